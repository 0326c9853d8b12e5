"""The training loop: learning, exact resume, clean stop on SIGTERM."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import t2t_lite.hparams  # noqa: F401
import t2t_lite.problems  # noqa: F401
from t2t_lite import config
from t2t_lite.models import build_model
from t2t_lite.registry import hparams_sets, problems
from t2t_lite.training import run_dir
from t2t_lite.training.trainer import RunConfig, Trainer

TINY = "vocab_size=12,d_model=32,d_ff=64,num_heads=4,dropout=0,attention_dropout=0,relu_dropout=0,train.batch_size=256"


def make_trainer(output_dir, train_steps, save_every, log=lambda line: None, average_last=0):
    problem = problems.get("algorithmic_reverse")()
    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(),
                                     f"{TINY},average_last_checkpoints={average_last}")
    # What the trainer CLI writes first; averaging rebuilds the model from it.
    run_dir.ensure_writable(str(output_dir))
    run_dir.save(str(output_dir), run_dir.RunSpec("algorithmic_reverse", "transformer_tiny", TINY, hparams))
    run = RunConfig(output_dir=str(output_dir), train_steps=train_steps, eval_steps=2,
                    save_checkpoints_steps=save_every, log_every_steps=save_every, random_seed=7)
    return Trainer(problem, hparams, run, log=log)


def weights(trainer):
    return [v.numpy() for v in trainer.model.weights]


def test_resume_gives_the_same_weights_as_an_uninterrupted_run(tmp_path):
    straight = make_trainer(tmp_path / "straight", train_steps=8, save_every=4)
    straight.train()
    first_half = make_trainer(tmp_path / "resumed", train_steps=4, save_every=4)
    first_half.train()
    lines = []
    second_half = make_trainer(tmp_path / "resumed", train_steps=8, save_every=4, log=lines.append)
    second_half.train()
    assert any("resumed from" in line and "step 4" in line for line in lines)
    assert second_half.step == straight.step == 8
    for a, b in zip(weights(straight), weights(second_half)):
        np.testing.assert_array_equal(a, b)
    # The optimizer state came back too: its step counter and moments match.
    for a, b in zip(straight.optimizer.variables, second_half.optimizer.variables):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_training_lowers_dev_loss_and_writes_summaries_checkpoints_and_average(tmp_path):
    trainer = make_trainer(tmp_path, train_steps=60, save_every=30, average_last=2)
    before = trainer.evaluate()
    trainer.train()
    after = trainer.evaluate()
    assert after.loss < before.loss - 0.1
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-60")
    assert os.listdir(tmp_path / "train") and os.listdir(tmp_path / "eval")
    # The last 2 checkpoints (steps 30 and 60) were averaged at the end.
    def model_weights(path):
        model = build_model(trainer.hparams)
        tf.train.Checkpoint(model=model).restore(path).expect_partial()
        return [w.numpy() for w in model.weights]

    step30, step60 = model_weights(str(tmp_path / "ckpt-30")), model_weights(str(tmp_path / "ckpt-60"))
    for averaged, a, b in zip(model_weights(str(tmp_path / "averaged" / "ckpt-60")), step30, step60):
        np.testing.assert_allclose(averaged, (a + b) / 2, rtol=1e-5, atol=1e-7)


def test_sigterm_saves_a_checkpoint_and_exits_zero(tmp_path):
    command = [sys.executable, "-m", "t2t_lite.bin.trainer", "--problem=algorithmic_reverse",
               "--hparams_set=transformer_tiny", f"--hparams={TINY}", f"--output_dir={tmp_path}",
               "--train_steps=100000", "--save_checkpoints_steps=100000", "--log_every_steps=5", "--eval_steps=1"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in process.stdout:
        if line.startswith("step 10/"):
            break
    else:
        pytest.fail(f"trainer ended before step 10 (exit {process.wait()})")
    process.send_signal(signal.SIGTERM)
    start = time.monotonic()
    output = process.communicate(timeout=60)[0]
    assert process.returncode == 0, output
    assert time.monotonic() - start < 30
    assert "SIGTERM received" in output
    saved = tf.train.latest_checkpoint(str(tmp_path))
    assert saved is not None and int(saved.rsplit("-", 1)[1]) >= 10


def test_corrupt_newest_checkpoint_falls_back_to_the_previous_one(tmp_path):
    make_trainer(tmp_path, train_steps=10, save_every=5).train()
    newest = tf.train.latest_checkpoint(str(tmp_path))
    assert newest.endswith("ckpt-10")
    data_file = next(p for p in tmp_path.iterdir() if p.name.startswith("ckpt-10.data"))
    data_file.write_bytes(data_file.read_bytes()[:100])  # a crash or a bad disk truncated it
    lines = []
    resumed = make_trainer(tmp_path, train_steps=15, save_every=5, log=lines.append)
    resumed.train()
    assert any("ckpt-10 is unreadable" in line for line in lines)
    assert any(line.startswith("resumed from") and "ckpt-5 at step 5" in line for line in lines)
    assert resumed.step == 15
    # ckpt-10 was written again by the resumed run and now loads.
    assert tf.train.load_checkpoint(str(tmp_path / "ckpt-10")).get_variable_to_shape_map()
