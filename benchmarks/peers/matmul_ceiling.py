#!/usr/bin/env python3
"""fp32 matmul ceiling: 4096x4096x4096 tf.matmul inside tf.function, 3 warm-up + 10 timed reps.
The ceiling summarize.py divides by for MFU (the highest per-run median of every venv measured).
Usage: $PEERS_DIR/<venv>/bin/python matmul_ceiling.py [out.json]"""
import json, os, sys, time
import numpy as np
import tensorflow as tf

N = 4096
a = tf.random.stateless_normal((N, N), seed=(1, 2), dtype=tf.float32)
b = tf.random.stateless_normal((N, N), seed=(3, 4), dtype=tf.float32)

@tf.function
def mm(x, y):
    return tf.matmul(x, y)

for _ in range(3):
    mm(a, b)
times = []
for _ in range(10):
    t0 = time.perf_counter()
    c = mm(a, b)
    _ = c[0, 0].numpy()  # make sure the result exists (CPU eager is synchronous anyway)
    times.append(time.perf_counter() - t0)
flop = 2.0 * N ** 3
res = dict(tf_version=tf.__version__, n=N, times_s=times,
           median_s=float(np.median(times)), best_s=float(min(times)),
           gflops_median=flop / np.median(times) / 1e9, gflops_best=flop / min(times) / 1e9,
           intra_op_threads=tf.config.threading.get_intra_op_parallelism_threads(),
           inter_op_threads=tf.config.threading.get_inter_op_parallelism_threads(),
           onednn=os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default"))
print(json.dumps(res, indent=1))
if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as f:
        json.dump(res, f, indent=1)
