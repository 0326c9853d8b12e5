"""Two versions of t2t-lite timed in turns (ABBA), a fresh process per run, min/median/max per row.

  python benchmarks/before_after.py --before_python=VENV_BEFORE/bin/python --after_python=python \\
      --run=RUN --source=test_2016_flickr.en --rounds=5 [--rows=decode_fp32,decode_bf16,real,train]

Each row runs one benchmark script of this directory with each version's Python (a venv with the
older commit installed, and one with this one), before-after in odd rounds and after-before in
even ones, so a drift in the machine's speed falls on both alike. The scripts time decoding after
a warm-up batch and training after discarded steps, so tracing is apart from every rate.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RATE = {  # a row's rate, read from its script's output line
    "decode": re.compile(r"([\d.]+) sentences/s, "),
    "real": re.compile(r"run, batch \d+, \w+: ([\d.]+) sentences/s"),
    "train": re.compile(r"([\d.]+) target tokens/s"),
}


def rows(args):
    """row name -> (script and its flags, which RATE reads its output)."""
    return {
        "decode_fp32": (["bench_decode.py", f"--sentences={args.sentences}", "--no_ceilings"], "decode"),
        "decode_bf16": (["bench_decode.py", f"--sentences={args.sentences}", "--no_ceilings",
                         "--mixed_precision=mixed_bfloat16"], "decode"),
        "real": (["bench_decode_run.py", f"--output_dir={args.run}", f"--source={args.source}",
                  "--mixed_precisions=none", "--rounds=1"], "real"),
        "train": (["bench_train.py", f"--steps={args.train_steps}", f"--discard={args.train_discard}"], "train"),
    }


def run_once(python, command, rate):
    """The rate one fresh process prints (its output line is echoed)."""
    # cwd outside any checkout, so `python` imports the t2t_lite its environment has installed.
    out = subprocess.run([python, os.path.join(HERE, command[0]), *command[1:]], cwd="/", check=True,
                         capture_output=True, text=True).stdout
    line = next(line for line in out.splitlines() if rate.search(line))
    print("   ", line, flush=True)
    return float(rate.search(line).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before_python", required=True)
    parser.add_argument("--after_python", default=sys.executable)
    parser.add_argument("--run", help="a trained run for the real row")
    parser.add_argument("--source", help="its source sentences")
    parser.add_argument("--rows", default="decode_fp32,decode_bf16,real,train")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=160)
    parser.add_argument("--train_steps", type=int, default=9)
    parser.add_argument("--train_discard", type=int, default=3)
    args = parser.parse_args()
    args.run, args.source = (os.path.abspath(path) if path else path for path in (args.run, args.source))
    table = rows(args)
    chosen = args.rows.split(",")
    unknown = [row for row in chosen if row not in table]
    if unknown or ("real" in chosen and not (args.run and args.source)):
        parser.error(f"unknown rows {unknown} (known: {', '.join(table)})" if unknown
                     else "the real row needs --run and --source")
    pythons = {"before": args.before_python, "after": args.after_python}
    rates = {(row, side): [] for row in chosen for side in pythons}
    for round_ in range(args.rounds):
        order = ["before", "after"] if round_ % 2 == 0 else ["after", "before"]
        for row in chosen:
            command, rate = table[row]
            for side in order:
                print(f"== round {round_ + 1} {row} {side}", flush=True)
                rates[row, side].append(run_once(pythons[side], command, RATE[rate]))
    print(f"\n{args.rounds} rounds, min / median / max; after/before of the medians")
    for row in chosen:
        cells = [f"{min(r):.2f} / {statistics.median(r):.2f} / {max(r):.2f}"
                 for r in (rates[row, "before"], rates[row, "after"])]
        ratio = statistics.median(rates[row, "after"]) / statistics.median(rates[row, "before"])
        print(f"  {row:12s} before {cells[0]:24s} after {cells[1]:24s} {ratio:.3f}x")


if __name__ == "__main__":
    main()
