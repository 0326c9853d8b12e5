"""Training checkpoints without a model: fallback past unreadable ones, the data seed, saving once per step,
and a non-chief's scratch directory outliving its last averaging-source save."""
import os

import pytest
import tensorflow as tf

from t2t_lite.errors import UserError
from t2t_lite.training import checkpoints as ckpt


def state(value=0.0):
    model, optimizer = tf.Module(), tf.Module()
    model.w = tf.Variable(value)
    optimizer.iterations = tf.Variable(0, dtype=tf.int64)
    return {"model": model, "optimizer": optimizer}


def saved_run(directory, steps):
    """Checkpoints at `steps` whose weight is the step number, as the trainer's manager writes them."""
    s = state()
    saver = ckpt.Checkpoints(str(directory), s, s["optimizer"].iterations, max_to_keep=10, chief=True)
    for step in steps:
        s["model"].w.assign(float(step))
        s["optimizer"].iterations.assign(step)
        saver.save(step)
    return saver


def test_the_newest_readable_checkpoint_is_restored_and_an_unreadable_one_is_named(tmp_path):
    saved_run(tmp_path, (2, 4, 6))
    for name in os.listdir(tmp_path):
        if name.startswith("ckpt-6.data"):
            (tmp_path / name).write_bytes(b"")  # truncated
    lines, s = [], state()
    restored = ckpt.restore_latest(str(tmp_path), s, lines.append)
    assert (restored.step, float(s["model"].w.numpy())) == (4, 4.0)
    assert {"model", "optimizer"} <= restored.entries and "data" not in restored.entries
    assert lines and lines[0].startswith(f"checkpoint {tmp_path}/ckpt-6 is unreadable (")


def test_no_checkpoint_is_none_and_none_readable_is_one_line(tmp_path):
    assert ckpt.restore_latest(str(tmp_path), state(), print) is None
    saved_run(tmp_path, (1,))
    for name in os.listdir(tmp_path):
        if name.startswith("ckpt-1.data"):
            (tmp_path / name).write_bytes(b"")
    with pytest.raises(UserError, match="no checkpoint in --output_dir .* can be read; move them away"):
        ckpt.restore_latest(str(tmp_path), state(), lambda line: None)


def test_the_data_seed_moves_on_only_when_the_restored_checkpoint_lacks_the_data_position():
    with_data = ckpt.Restored("run/ckpt-40", 40, frozenset({"model", "optimizer", "data"}))
    without = ckpt.Restored("run/ckpt-40", 40, frozenset({"model", "optimizer"}))
    assert ckpt.data_seed(7, None, True) == 7
    assert ckpt.data_seed(7, with_data, True) == 7
    assert ckpt.data_seed(7, without, True) == 47
    assert ckpt.data_seed(7, with_data, False) == 47  # a distributed iterator cannot be restored


def saved_weight(path):
    return float(tf.train.load_checkpoint(path).get_tensor("model/w/.ATTRIBUTES/VARIABLE_VALUE"))


def test_a_step_is_saved_once_and_a_restored_step_counts_as_saved(tmp_path):
    calls, s = [], state()
    saver = ckpt.Checkpoints(str(tmp_path), s, s["optimizer"].iterations, 10, chief=True,
                             before_save=lambda: calls.append("saved"))
    s["model"].w.assign(3.0)
    first = saver.save(3)
    s["model"].w.assign(99.0)  # a second save of step 3 would write this
    assert saver.save(3) == first and calls == ["saved"]
    assert saved_weight(first) == 3.0
    # A run resumed from step 3 does not write it again (nor call before_save), but writes the next step.
    resumed_state = state(77.0)
    resumed = ckpt.Checkpoints(str(tmp_path), resumed_state, resumed_state["optimizer"].iterations, 10, chief=True,
                               before_save=lambda: calls.append("resumed"), saved_step=3)
    assert resumed.save(3) == first and calls == ["saved"] and saved_weight(first) == 3.0
    assert saved_weight(resumed.save(4)) == 77.0 and calls == ["saved", "resumed"]


def test_a_non_chief_saves_into_scratch_and_close_removes_it(tmp_path):
    # That the trainer closes only after its last save: test_trainer.py's non-chief test.
    s = state()
    worker = ckpt.Checkpoints(str(tmp_path / "run"), s, s["optimizer"].iterations, 10, chief=False)
    assert not worker.directory.startswith(str(tmp_path))
    sources = worker.averaging_sources([4.0], 0.0, s["model"], count=1, step=0)
    worker.save(4)
    sources.save(4)
    assert tf.train.latest_checkpoint(worker.directory).endswith("ckpt-4")
    assert tf.train.latest_checkpoint(sources.directory).endswith("ckpt-4")
    worker.close()
    assert not os.path.exists(worker.directory) and not (tmp_path / "run").exists()
