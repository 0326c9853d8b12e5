#!/usr/bin/env python3
"""Run `onmt-main` training unchanged, but record per-step wall time and token counts.

OpenNMT-tf's own log prints steps/s with 2 decimals (useless at ~0.03 steps/s), so we
monkeypatch opennmt.training.TrainingStats.update_on_step (called by the Trainer loop
once per optimizer step, right after the step's loss is returned) to record
time.perf_counter(), the source/target word counters accumulated by the toolkit
(source = source tokens, target = target tokens + </s>, i.e. loss positions) and RSS.
Everything else is stock onmt-main.

Usage (in the OpenNMT-tf venv that benchmarks/peers/setup.sh makes):
  $PEERS_DIR/onmt/bin/python onmt_train.py OUT.json -- <onmt-main args>
e.g. as `benchmarks/peers/protocol.sh train` runs it:
  $PEERS_DIR/onmt/bin/python onmt_train.py $PEERS_DIR/logs/onmt_steps.json -- \
      --model_type TransformerBaseSharedEmbeddings \
      --config benchmarks/peers/configs/onmt_base.yml $PEERS_DIR/run/onmt_paths.yml --seed 1234 train
"""
import json
import sys
import time

import psutil

if len(sys.argv) < 4 or sys.argv[2] != "--":
    sys.exit("usage: onmt_train.py OUT.json -- <onmt-main args>")
out_path = sys.argv[1]
onmt_args = sys.argv[3:]

import tensorflow as tf  # noqa: E402
from opennmt import training  # noqa: E402

RECORDS = []
_proc = psutil.Process()
_orig_update = training.TrainingStats.update_on_step
_orig_log_model_info = training.Trainer._log_model_info
INFO = {}


def _patched_update(self, step, loss):
    now = time.perf_counter()
    counters = {k: int(v.numpy()) for k, v in self._get_words_counters().items()}
    self._reset_words_counters()
    RECORDS.append(dict(step=int(step), t=now, loss=float(loss),
                        src_tokens=counters.get("source", 0),
                        tgt_tokens=counters.get("target", 0),
                        rss_bytes=_proc.memory_info().rss))
    print("[steptimer] step %d t=%.3f src=%d tgt=%d loss=%.4f rss=%.2fGiB" % (
        int(step), now, counters.get("source", 0), counters.get("target", 0), float(loss),
        _proc.memory_info().rss / 2**30), flush=True)
    return _orig_update(self, step, loss)


def _patched_log_model_info(self):
    _orig_log_model_info(self)
    INFO["num_params"] = int(sum(v.shape.num_elements() for v in self._model.trainable_variables))
    INFO["variables"] = [(v.name, v.shape.as_list()) for v in self._model.trainable_variables]


training.TrainingStats.update_on_step = _patched_update
training.Trainer._log_model_info = _patched_log_model_info

from opennmt.bin import main as onmt_main  # noqa: E402

T0 = time.perf_counter()
sys.argv = ["onmt-main"] + onmt_args
try:
    onmt_main.main()
finally:
    with open(out_path, "w") as f:
        json.dump(dict(t_start=T0, t_end=time.perf_counter(), records=RECORDS, info=INFO,
                       tf_version=tf.__version__,
                       intra_op=tf.config.threading.get_intra_op_parallelism_threads(),
                       inter_op=tf.config.threading.get_inter_op_parallelism_threads(),
                       argv=onmt_args), f, indent=1)
