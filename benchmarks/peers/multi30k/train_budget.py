"""OpenNMT-tf training (stock `onmt-main train`) stopped by a wall-clock deadline.

The deadline is measured from the launch of this process (includes TF start-up, vocabulary/
dataset setup and tf.function tracing). When the deadline passes, the training-step generator
is ended after the current step; OpenNMT-tf then saves a final checkpoint at that step.
Runs in the OpenNMT-tf venv (benchmarks/peers/setup.sh); benchmarks/multi30k_peer.sh and
benchmarks/parsing_side_by_side.sh call it:

  $PEERS_DIR/onmt/bin/python train_budget.py SECONDS MODEL_FILE CONFIG.yml [CONFIG.yml ...]

MODEL_FILE is an OpenNMT-tf custom model file (e.g. multi30k/model_transformer_small.py); the configs are
merged in order (the protocol's, then the one naming the paths). Seed 1234, 2 intra- and inter-op threads.
"""
import sys, time, json
T0 = time.time()
if len(sys.argv) < 4:
    sys.exit("usage: train_budget.py SECONDS MODEL_FILE CONFIG.yml [CONFIG.yml ...]")
BUDGET = float(sys.argv[1])
DEADLINE = T0 + BUDGET
MODEL_FILE = sys.argv[2]
CONFIGS = sys.argv[3:]

import opennmt.training as training
from opennmt.bin import main as onmt_main

_orig_steps = training.Trainer._steps
info = {"t0": T0, "budget_s": BUDGET, "config": CONFIGS}


def _steps(self, *args, **kwargs):
    n = 0
    for out in _orig_steps(self, *args, **kwargs):
        n += 1
        if n == 1:
            info["first_step_done_s"] = time.time() - T0
        yield out
        if time.time() >= DEADLINE:
            info["stop_s"] = time.time() - T0
            info["steps_in_run"] = n
            print("DEADLINE_REACHED " + json.dumps(info), flush=True)
            return


training.Trainer._steps = _steps

sys.argv = [
    "onmt-main",
    "--model", MODEL_FILE,
    "--config", *CONFIGS,
    "--seed", "1234",
    "--intra_op_parallelism_threads", "2",
    "--inter_op_parallelism_threads", "2",
    "train",
]
onmt_main.main()
info["exit_s"] = time.time() - T0
print("TRAIN_DONE " + json.dumps(info), flush=True)
