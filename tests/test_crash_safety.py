"""SIGKILL at random points never costs more than one checkpoint interval and never corrupts checkpoints."""
import random
import signal

import pytest
import tensorflow as tf

from small_training import TINY
from checkpoint_reads import assert_every_tensor_reads
from cli_helpers import _run_module, start_forked

# Three kills at random steps, then a run to the end: each round pays a trainer's start-up (the command forked
# with TensorFlow imported, start_tool: a SIGKILL ends a forked process as it ends a fresh one).
INTERVAL, TOTAL, KILLS = 4, 24, 3


def trainer_on_fewer_examples(flags):
    """The trainer command, on algorithmic_reverse's examples as small_problem() generates them (2,000 train,
    200 dev) instead of 100,000: a start-up spends less time generating them, and 24 steps take fewer than
    2,000 examples (a resume must restore where in them the run was, from the checkpoint)."""
    import t2t_lite.problems  # noqa: F401  (registers algorithmic_reverse)
    from t2t_lite.registry import problems
    problems.get("algorithmic_reverse").split_sizes = {"train": 2000, "dev": 200}
    _run_module("trainer", flags)


def start_trainer(output_dir):
    # Line-buffered stdout and stderr in one pipe: see each step as it happens, so the kill lands near it.
    return start_forked(trainer_on_fewer_examples, [
        "--problem=algorithmic_reverse", "--hparams_set=transformer_tiny", f"--hparams={TINY}",
        f"--output_dir={output_dir}", f"--train_steps={TOTAL}", f"--save_checkpoints_steps={INTERVAL}",
        "--log_every_steps=1", "--eval_steps=1", "--keep_checkpoint_max=3", "--nomemory_probe"], name="trainer")


def run_until_killed(output_dir, kill_after_step):
    """Starts the trainer, SIGKILLs it once it logs `kill_after_step`; returns (resumed step, last logged step)."""
    process = start_trainer(output_dir)
    resumed, last = 0, 0
    for line in process.stream:
        if line.startswith("resumed from"):
            resumed = int(line.rsplit(" ", 1)[1])
        if line.startswith("step ") and "/" in line.split()[1]:
            last = int(line.split()[1].split("/")[0])
            if last >= kill_after_step:
                process.send_signal(signal.SIGKILL)
                break
    assert process.wait().returncode == -signal.SIGKILL, "the trainer ended before it could be killed"
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
    result = start_trainer(tmp_path).wait(timeout=600)
    assert result.returncode == 0, result.stdout
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith(f"ckpt-{TOTAL}")
