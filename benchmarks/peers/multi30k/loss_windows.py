"""Mean reported training loss (OpenNMT-tf report lines, every 50 steps) per 500-step window.
Usage: loss_windows.py <train.log> [window=500]   (any Python; the log is train_budget.py's output)"""
import re, sys
log = open(sys.argv[1], encoding="utf-8").read()
W = int(sys.argv[2]) if len(sys.argv) > 2 else 500
rows = [(int(m.group(1)), float(m.group(2)))
        for m in re.finditer(r"Step = (\d+) ;.*Loss = ([\d.]+)", log)]
last = rows[-1][0] if rows else 0
for lo in range(0, last, W):
    w = [l for s, l in rows if lo < s <= lo + W]
    if w:
        print(f"{lo + 1}-{lo + W}: n={len(w)} mean={sum(w) / len(w):.2f}")
