#!/usr/bin/env python3
"""Summarize per-step JSON logs into throughput / MFU numbers (markdown).

Per-step time for step k = t_k - t_{k-1} (wall time between consecutive step completions, so it
includes input pipeline, Python overhead, optimizer update). Steps 1..10 are discarded; stats use
steps 11..40 (30 steps).
  tokens/s (aggregate) = sum(tokens, steps 11-40) / sum(step times, steps 11-40)
FLOPs per step:
  (A) 6 * N_params * tgt_tokens                     (simple estimate; N includes the embedding)
  (B) 6 * (N_enc_linear * src_tokens + (N_dec_linear + V*d) * tgt_tokens)
      N_enc_linear = 6 * 12 d^2, N_dec_linear = 6 * 16 d^2 (weight matrices only, no biases/LN),
      V*d = tied pre-softmax projection; attention-score matmuls (QK^T, AV) NOT included
      (they add ~2-3% at these lengths); non-pad tokens only.
MFU = FLOPs/step / median step time / matmul ceiling (the same ceiling for every tool).
Usage: python3 summarize.py LOG_DIR   (reads LOG_DIR/*.json: onmt_steps*.json, mg_steps*.json, keras_steps*.json,
  matmul_*.json, and the /usr/bin/time -v logs beside them; writes LOG_DIR/summary.json).
benchmarks/run_protocol.sh imports stats() for OpenNMT-tf's figure alone.
"""
import glob
import json
import os
import re
import statistics
import sys

LOG = sys.argv[1] if __name__ == "__main__" and len(sys.argv) > 1 else "logs"
D, V = 512, 32768
N_ENC_LIN = 6 * 12 * D * D
N_DEC_LIN = 6 * 16 * D * D


def peak_rss_kb(time_log):
    if not os.path.exists(time_log):
        return None
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(time_log).read())
    return int(m.group(1)) if m else None


def ceiling():
    vals = {}
    for p in sorted(glob.glob(os.path.join(LOG, "matmul_*.json"))):
        d = json.load(open(p))
        vals[os.path.basename(p)] = (d["tf_version"], d["gflops_median"], d["gflops_best"])
    return vals


def stats(path, num_params=None, warmup=10):
    d = json.load(open(path))
    recs = d["records"]
    for i, r in enumerate(recs):
        if "dt" not in r or r.get("dt") is None:
            r["dt"] = r["t"] - recs[i - 1]["t"] if i > 0 else None
    last = [r for r in recs if r["step"] > warmup]
    dts = [r["dt"] for r in last]
    src = sum(r["src_tokens"] for r in last)
    tgt = sum(r["tgt_tokens"] for r in last)
    T = sum(dts)
    n = num_params or d.get("num_params") or d.get("info", {}).get("num_params")
    med = statistics.median(dts)
    mean_src = src / len(last)
    mean_tgt = tgt / len(last)
    flops_a = 6.0 * n * mean_tgt
    flops_b = 6.0 * (N_ENC_LIN * mean_src + (N_DEC_LIN + V * D) * mean_tgt)
    return dict(n_steps=len(last), median_step_s=med, mean_step_s=T / len(last),
                min_step_s=min(dts), max_step_s=max(dts),
                tok_per_s=(src + tgt) / T, tgt_tok_per_s=tgt / T,
                tok_per_s_median_step=(mean_src + mean_tgt) / med,
                mean_src_tokens=mean_src, mean_tgt_tokens=mean_tgt, num_params=n,
                flops_a=flops_a, flops_b=flops_b,
                achieved_gflops_a=flops_a / med / 1e9, achieved_gflops_b=flops_b / med / 1e9,
                peak_rss_step_gib=max(r.get("rss_bytes", 0) for r in recs) / 2**30,
                tf_version=d.get("tf_version"))


def main():
    ceil = ceiling()
    if not ceil:
        sys.exit(f"summarize.py: no matmul_*.json in {LOG} (run matmul_ceiling.py LOG/matmul_onmt.json in a peer's venv)")
    print("matmul ceiling runs (tf, median GFLOP/s, best GFLOP/s):")
    for k, v in ceil.items():
        print("  %-28s TF %-7s median %.1f best %.1f" % (k, v[0], v[1], v[2]))
    c = max(v[1] for v in ceil.values())
    print("ceiling used = highest per-run median: %.1f GFLOP/s" % c)
    tools = [("OpenNMT-tf 2.32.0 (TF 2.13.1)", "onmt"), ("Model Garden 2.20.0 (TF 2.20.0)", "mg"),
             ("Keras 3.15 naive (TF 2.21.0)", "keras")]
    out = {}
    rows = []
    for name, prefix in tools:
        paths = sorted(glob.glob(os.path.join(LOG, prefix + "_steps*.json")))
        pooled = []
        for p in paths:
            tag = os.path.basename(p)[len(prefix + "_steps"):-len(".json")]
            s = stats(p)
            s["peak_rss_gib_time_v"] = (peak_rss_kb(os.path.join(LOG, prefix + "_train" + tag + ".log")) or 0) / 2**20
            s["mfu_a"] = s["achieved_gflops_a"] / c
            s["mfu_b"] = s["achieved_gflops_b"] / c
            out[name + (tag or "_rep1")] = s
            rows.append((name, tag or "_rep1", s))
            d = json.load(open(p))
            recs = d["records"]
            for i, r in enumerate(recs):
                if r.get("dt") is None:
                    r["dt"] = r["t"] - recs[i - 1]["t"] if i > 0 else None
            pooled += [r for r in recs if r["step"] > 10]
        if len(paths) > 1:
            med = statistics.median(r["dt"] for r in pooled)
            T = sum(r["dt"] for r in pooled)
            src = sum(r["src_tokens"] for r in pooled); tgt = sum(r["tgt_tokens"] for r in pooled)
            n = rows[-1][2]["num_params"]
            ms, mt = src / len(pooled), tgt / len(pooled)
            fa = 6.0 * n * mt
            fb = 6.0 * (N_ENC_LIN * ms + (N_DEC_LIN + V * D) * mt)
            s = dict(n_steps=len(pooled), median_step_s=med, mean_step_s=T / len(pooled),
                     min_step_s=min(r["dt"] for r in pooled), max_step_s=max(r["dt"] for r in pooled),
                     tok_per_s=(src + tgt) / T, tgt_tok_per_s=tgt / T, mean_src_tokens=ms,
                     mean_tgt_tokens=mt, num_params=n, achieved_gflops_a=fa / med / 1e9,
                     achieved_gflops_b=fb / med / 1e9, mfu_a=fa / med / 1e9 / c, mfu_b=fb / med / 1e9 / c,
                     peak_rss_gib_time_v=max(x[2]["peak_rss_gib_time_v"] for x in rows if x[0] == name))
            out[name + "_pooled"] = s
            rows.append((name, "_pooled", s))
    print()
    print("| tool | run | params | steps | median step s | mean step s [min-max] | src+tgt tok/s | tgt tok/s | "
          "src/tgt tok per step | GFLOP/s (A) | MFU (A) | MFU (B) | peak RSS GiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, tag, s in rows:
        print("| %s | %s | %s | %d | %.2f | %.2f [%.2f-%.2f] | %.0f | %.0f | %.0f / %.0f | %.0f | %.1f%% | %.1f%% | %.2f |" % (
            name, tag.lstrip("_"), format(s["num_params"], ","), s["n_steps"], s["median_step_s"],
            s["mean_step_s"], s["min_step_s"], s["max_step_s"], s["tok_per_s"], s["tgt_tok_per_s"],
            s["mean_src_tokens"], s["mean_tgt_tokens"], s["achieved_gflops_a"], 100 * s["mfu_a"],
            100 * s["mfu_b"], s["peak_rss_gib_time_v"]))
    json.dump(dict(ceiling_gflops=c, ceiling_runs=ceil, runs=out),
              open(os.path.join(LOG, "summary.json"), "w"), indent=1)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 summarize.py LOG_DIR")
    main()
