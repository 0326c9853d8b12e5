"""SIGKILL at random points never costs more than one checkpoint interval and never corrupts checkpoints."""
import os
import random
import signal
import subprocess
import sys

import pytest
import tensorflow as tf

from small_training import TINY
from checkpoint_reads import assert_every_tensor_reads

# Three kills at random steps, then a run to the end: each round pays a trainer's start-up.
INTERVAL, TOTAL, KILLS = 4, 24, 3


def start_trainer(output_dir):
    command = [sys.executable, "-m", "t2t_lite.bin.trainer", "--problem=algorithmic_reverse",
               "--hparams_set=transformer_tiny", f"--hparams={TINY}", f"--output_dir={output_dir}",
               f"--train_steps={TOTAL}", f"--save_checkpoints_steps={INTERVAL}", "--log_every_steps=1",
               "--eval_steps=1", "--keep_checkpoint_max=3",
               "--nomemory_probe"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # see each step as it happens, so the kill lands near it
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def run_until_killed(output_dir, kill_after_step):
    """Starts the trainer, SIGKILLs it once it logs `kill_after_step`; returns (resumed step, last logged step)."""
    process = start_trainer(output_dir)
    resumed, last = 0, 0
    for line in process.stdout:
        if line.startswith("resumed from"):
            resumed = int(line.rsplit(" ", 1)[1])
        if line.startswith("step ") and "/" in line.split()[1]:
            last = int(line.split()[1].split("/")[0])
            if last >= kill_after_step:
                process.send_signal(signal.SIGKILL)
                break
    process.wait()
    return resumed, last


@pytest.mark.slow
def test_random_sigkills_lose_at_most_one_interval_and_every_checkpoint_loads(tmp_path):
    rng = random.Random(0)
    previous_last = 0
    for kill_after in sorted(rng.sample(range(3, TOTAL - 3), KILLS)):
        resumed, last = run_until_killed(tmp_path, kill_after)
        # Resumed from a checkpoint within one interval of the last step seen before the kill
        # (the kill may land just before or just after the save of that step).
        assert resumed % INTERVAL == 0 and previous_last - INTERVAL <= resumed <= previous_last + 1, (resumed, previous_last)
        previous_last = last
        state = tf.train.get_checkpoint_state(str(tmp_path))
        assert state is not None or last <= INTERVAL
        for path in state.all_model_checkpoint_paths if state else []:
            assert_every_tensor_reads(path)
    process = start_trainer(tmp_path)
    output = process.communicate(timeout=600)[0]
    assert process.returncode == 0, output
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith(f"ckpt-{TOTAL}")
