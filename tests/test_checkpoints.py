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


def test_a_step_is_saved_once_and_a_restored_step_counts_as_saved(tmp_path):
    saver = saved_run(tmp_path, (3,))
    assert saver.save(3).endswith("ckpt-3") and len(tf.train.get_checkpoint_state(str(tmp_path))
                                                    .all_model_checkpoint_paths) == 1
    s = state()
    resumed = ckpt.Checkpoints(str(tmp_path), s, s["optimizer"].iterations, 10, chief=True, saved_step=3)
    recorded = []
    resumed._before_save = lambda: recorded.append(True)
    resumed.save(3)
    assert recorded == []


def test_a_non_chief_saves_into_scratch_and_removes_it_only_at_close(tmp_path):
    s = state()
    worker = ckpt.Checkpoints(str(tmp_path / "run"), s, s["optimizer"].iterations, 10, chief=False)
    assert not worker.directory.startswith(str(tmp_path))
    sources = worker.averaging_sources([4.0], 0.0, s["model"], count=1, step=0)
    worker.save(4)
    sources.save(4)  # the end of the run's source save comes before close
    assert tf.train.latest_checkpoint(sources.directory).endswith("ckpt-4")
    worker.close()
    assert not os.path.exists(worker.directory) and not (tmp_path / "run").exists()
