"""Summarize the OpenNMT-tf training log: steps, throughput, approximate epochs (a JSON object).
Usage: parse_train_log.py <train.log> <data dir holding train.sp.en and train.sp.de>
benchmarks/multi30k_peer.sh writes it to WORK_DIR/train_summary.json for benchmarks/multi30k_summary.py."""
import re, sys, json, datetime, statistics

if len(sys.argv) != 3:
    sys.exit("usage: parse_train_log.py TRAIN_LOG DATA_DIR")
log = open(sys.argv[1], encoding="utf-8").read()
pat = re.compile(r"^(\S+ \S+): I runner.py:\d+\] Step = (\d+) ; steps/s = ([\d.]+), tokens/s = (\d+) "
                 r"\((\d+) source, (\d+) target\)", re.M)
rows = []
for m in pat.finditer(log):
    t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
    rows.append(dict(t=t, step=int(m.group(2)), sps=float(m.group(3)), src=int(m.group(5)), tgt=int(m.group(6))))

# Train-set target token count per epoch (pieces + </s>), pairs filtered at 100 pieces per side.
D = sys.argv[2]
epoch_tgt = epoch_src = kept = 0
with open(f"{D}/train.sp.en", encoding="utf-8") as fe, open(f"{D}/train.sp.de", encoding="utf-8") as fd:
    for le, ld in zip(fe, fd):
        ne, nd = len(le.split()), len(ld.split())
        if 0 < ne <= 100 and 0 < nd <= 100:
            kept += 1; epoch_src += ne; epoch_tgt += nd + 1

m = re.search(r"DEADLINE_REACHED (\{.*\})", log)
info = json.loads(m.group(1)) if m else {}
final = re.findall(r"Saved checkpoint \S+/ckpt-(\d+)", log)
final_step = int(final[-1]) if final else None

# Steady-state throughput: report intervals from step 100 on (first interval includes tracing).
steady = [r for r in rows if r["step"] >= 100]
tgt_tps = [r["tgt"] for r in steady]
# Target tokens between consecutive report lines ~= reported tgt tokens/s * interval length
# (counters are updated in the input pipeline, so single intervals are jittery; sums are not).
span_tokens = sum(b["tgt"] * (b["t"] - a["t"]) for a, b in zip(steady, steady[1:]))
span_steps = steady[-1]["step"] - steady[0]["step"] if len(steady) > 1 else 0
span_time = steady[-1]["t"] - steady[0]["t"] if len(steady) > 1 else 0
tok_per_step = [span_tokens / span_steps] if span_steps else []
# Wall-clock based throughput between first and last report line.
wall_tps = None
if len(rows) >= 2:
    a, b = rows[0], rows[-1]
    wall_steps_per_s = (b["step"] - a["step"]) / (b["t"] - a["t"])
else:
    wall_steps_per_s = None
med_tok_step = statistics.median(tok_per_step) if tok_per_step else None
out = {
    "final_checkpoint_step": final_step,
    "deadline_info": info,
    "report_lines": len(rows),
    "mean_target_tokens_per_s_reported(step>=100)": round(statistics.mean(tgt_tps), 1) if tgt_tps else None,
    "target_tokens_per_s_span(step>=100, time-weighted)": round(span_tokens / span_time, 1) if span_time else None,
    "span_steps_per_s(step>=100)": round(span_steps / span_time, 4) if span_time else None,
    "target_tokens_per_step(span estimate)": round(med_tok_step, 1) if med_tok_step else None,
    "wall_steps_per_s_between_first_and_last_report": round(wall_steps_per_s, 4) if wall_steps_per_s else None,
    "train_pairs_kept_len<=100": kept,
    "train_target_tokens_per_epoch(incl </s>)": epoch_tgt,
    "train_source_tokens_per_epoch": epoch_src,
}
if final_step and med_tok_step:
    out["approx_epochs_seen(final_step*tgt_tokens_per_step/epoch_tgt)"] = round(final_step * med_tok_step / epoch_tgt, 2)
    out["approx_target_tokens_per_s_over_whole_wall_time"] = round(final_step * med_tok_step / info.get("stop_s", float("nan")), 1)
print(json.dumps(out, indent=1))
