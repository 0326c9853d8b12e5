#!/usr/bin/env python3
"""CTranslate2 beam-4 decoding throughput on the 500 synthetic sentences (len 20-30).

Forced output length: min_decoding_length = max_decoding_length = 60 so the output length does
not depend on the (barely trained) weights. fp32 (compute_type=float32), CPU, inter_threads=1,
intra_threads=2, max_batch_size=32 examples (same as the OpenNMT-tf infer config).
One warm-up pass over the first 32 sentences, then 3 timed passes over all 500; report median.

Usage: $PEERS_DIR/ct2/bin/python ct2_translate.py MODEL_DIR INPUTS OUT.json [predictions.txt]
  MODEL_DIR: OpenNMT-tf's export (`onmt-main ... export --format ctranslate2`: benchmarks/peers/protocol.sh export);
  INPUTS: gen_data.py's infer_src.txt.
"""
import json
import statistics
import sys
import time

import ctranslate2
import psutil

if len(sys.argv) not in (4, 5):
    sys.exit("usage: ct2_translate.py MODEL_DIR INPUTS OUT.json [predictions.txt]")
model_dir, inputs, out_path = sys.argv[1:4]
pred_path = sys.argv[4] if len(sys.argv) > 4 else None
src = [line.split() for line in open(inputs)]
tr = ctranslate2.Translator(model_dir, device="cpu", compute_type="float32",
                            inter_threads=1, intra_threads=2)
kw = dict(beam_size=4, max_decoding_length=60, min_decoding_length=60, max_batch_size=32,
          batch_type="examples", num_hypotheses=1)
tr.translate_batch(src[:32], **kw)  # warm-up
times, res = [], None
for _ in range(3):
    t0 = time.perf_counter()
    res = tr.translate_batch(src, **kw)
    times.append(time.perf_counter() - t0)
lens = [len(r.hypotheses[0]) for r in res]
T = statistics.median(times)
out = dict(ctranslate2_version=ctranslate2.__version__, times_s=times, median_s=T,
           sentences=len(src), src_tokens=sum(map(len, src)), out_tokens=sum(lens),
           out_len_min=min(lens), out_len_max=max(lens),
           sent_per_s=len(src) / T, tgt_tok_per_s=sum(lens) / T,
           peak_rss_gib=psutil.Process().memory_info().rss / 2**30, settings=kw,
           threads=dict(inter_threads=1, intra_threads=2), compute_type="float32")
print(json.dumps(out, indent=1))
json.dump(out, open(out_path, "w"), indent=1)
if pred_path:
    with open(pred_path, "w") as f:
        for r in res:
            f.write(" ".join(r.hypotheses[0]) + "\n")
