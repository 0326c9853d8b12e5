"""Training checkpoints without a model: fallback past unreadable ones, the data seed, saving once per step,
and a non-chief's scratch directory outliving its last averaging-source save."""
import os

import pytest
import tensorflow as tf

from t2t_lite.errors import UserError
from t2t_lite.run_dir import RunDir
from t2t_lite.training import checkpoints as ckpt


def state(value=0.0):
    model, optimizer = tf.Module(), tf.Module()
    model.w = tf.Variable(value)
    optimizer.iterations = tf.Variable(0, dtype=tf.int64)
    return {"model": model, "optimizer": optimizer}


def saved_run(directory, steps):
    """Checkpoints at `steps` whose weight is the step number, as the trainer's manager writes them."""
    s = state()
    saver = ckpt.Checkpoints(RunDir(str(directory)), s, s["optimizer"].iterations, max_to_keep=10, chief=True)
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
    restored = ckpt.restore_latest(RunDir(str(tmp_path)), s, lines.append)
    assert (restored.step, float(s["model"].w.numpy())) == (4, 4.0)
    assert {"model", "optimizer"} <= restored.entries and "data" not in restored.entries
    assert lines and lines[0].startswith(f"checkpoint {tmp_path}/ckpt-6 is unreadable (")


def test_optional_entries_come_back_when_saved_and_the_data_position_is_left_for_later(tmp_path):
    saved_run(tmp_path, (2,))  # model and optimizer only
    clock, data = tf.Module(), tf.Module()
    clock.seconds, data.position = tf.Variable(5.0), tf.Variable(9)
    restored = ckpt.restore_latest(RunDir(str(tmp_path)), {**state(), "clock": clock, "data": data}, print)
    assert (restored.path, restored.step) == (str(tmp_path / "ckpt-2"), 2)
    assert {"model", "optimizer"} <= restored.entries and not {"clock", "data"} & restored.entries
    assert float(clock.seconds.numpy()) == 5.0  # not in the checkpoint: left as it was, no error
    # A checkpoint with a clock and a data position: the clock comes back, the data position does not (yet).
    s = {**state(3.0), "clock": clock, "data": data}
    ckpt.Checkpoints(RunDir(str(tmp_path / "full")), s, s["optimizer"].iterations, 10, chief=True).save(3)
    clock.seconds.assign(0.0)
    data.position.assign(0)
    lines, fresh = [], state()
    restored = ckpt.restore_latest(RunDir(str(tmp_path / "full")), {**fresh, "clock": clock, "data": data},
                                   lines.append)
    assert {"model", "optimizer", "clock", "data"} <= restored.entries and lines == []
    assert (float(fresh["model"].w.numpy()), float(clock.seconds.numpy()), int(data.position.numpy())) == (3.0, 5.0, 0)


def test_a_checkpoint_without_a_required_entry_is_unreadable(tmp_path):
    model = tf.Module()
    model.w = tf.Variable(1.0)
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(tmp_path), 3).save(checkpoint_number=1)
    with pytest.raises(UserError, match="can be read"):
        ckpt.restore_latest(RunDir(str(tmp_path)), state(), lambda line: None)


def test_an_unreadable_checkpoints_line_gives_the_first_line_of_the_error_or_its_type(tmp_path, monkeypatch):
    saved_run(tmp_path, (1, 2, 3))
    errors = iter([ValueError("first line\nsecond line"), IndexError(), ValueError("x" * 300)])

    def unreadable(path):
        raise next(errors)

    monkeypatch.setattr(ckpt, "checkpoint_entries", unreadable)
    lines = []
    with pytest.raises(UserError):
        ckpt.restore_latest(RunDir(str(tmp_path)), state(), lines.append)
    assert lines == [f"checkpoint {tmp_path}/ckpt-{step} is unreadable ({reason}); trying the one before it"
                     for step, reason in ((3, "first line"), (2, "IndexError"), (1, "x" * 200))]


def test_the_data_position_is_restored_only_from_a_checkpoint_that_holds_it(tmp_path):
    def iterator():
        return iter(tf.data.Dataset.range(10))

    saved = iterator()
    next(saved), next(saved)
    path = tf.train.Checkpoint(data=saved).write(str(tmp_path / "ckpt-2"))
    resumed = iterator()
    ckpt.restore_data(resumed, ckpt.Restored(path, 2, frozenset({"model", "data"})))
    assert int(next(resumed)) == 2
    for restored in (None, ckpt.Restored(path, 2, frozenset({"model", "optimizer"}))):
        fresh = iterator()
        ckpt.restore_data(fresh, restored)
        assert int(next(fresh)) == 0


def test_no_checkpoint_is_none_and_none_readable_is_one_line(tmp_path):
    assert ckpt.restore_latest(RunDir(str(tmp_path)), state(), print) is None
    saved_run(tmp_path, (1,))
    for name in os.listdir(tmp_path):
        if name.startswith("ckpt-1.data"):
            (tmp_path / name).write_bytes(b"")
    with pytest.raises(UserError, match="no checkpoint in `output_dir` .* can be read; move them away"):
        ckpt.restore_latest(RunDir(str(tmp_path)), state(), lambda line: None)


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
    saver = ckpt.Checkpoints(RunDir(str(tmp_path)), s, s["optimizer"].iterations, 10, chief=True,
                             before_save=lambda: calls.append("saved"))
    s["model"].w.assign(3.0)
    first = saver.save(3)
    s["model"].w.assign(99.0)  # a second save of step 3 would write this
    assert saver.save(3) == first and calls == ["saved"]
    assert saved_weight(first) == 3.0
    # A run resumed from step 3 does not write it again (nor call before_save), but writes the next step.
    resumed_state = state(77.0)
    resumed = ckpt.Checkpoints(RunDir(str(tmp_path)), resumed_state, resumed_state["optimizer"].iterations, 10,
                               chief=True, before_save=lambda: calls.append("resumed"), saved_step=3)
    assert resumed.save(3) == first and calls == ["saved"] and saved_weight(first) == 3.0
    assert saved_weight(resumed.save(4)) == 77.0 and calls == ["saved", "resumed"]


def test_a_non_chief_saves_into_scratch_and_close_removes_it(tmp_path):
    # That the trainer closes only after its last save: test_trainer.py's non-chief test.
    s = state()
    worker = ckpt.Checkpoints(RunDir(str(tmp_path / "run")), s, s["optimizer"].iterations, 10, chief=False)
    assert not worker.run_dir.path.startswith(str(tmp_path))
    assert os.path.basename(worker.run_dir.path).startswith("t2t-lite-worker-")  # what a leftover is recognised by
    sources = worker.averaging_sources([4.0], 0.0, s["model"], count=1, step=0)
    worker.save(4)
    sources.save(4)
    assert tf.train.latest_checkpoint(worker.run_dir.path).endswith("ckpt-4")
    assert tf.train.latest_checkpoint(sources.run_dir.path).endswith("ckpt-4")
    worker.close()
    assert not os.path.exists(worker.run_dir.path) and not (tmp_path / "run").exists()
    worker.close()  # a second close (or a directory removed by hand) is no error


def test_max_to_keep_regular_checkpoints_and_count_averaging_sources_from_the_resumed_step(tmp_path):
    saver = saved_run(tmp_path, (2, 4, 6))
    s = state()
    kept = ckpt.Checkpoints(RunDir(str(tmp_path)), s, s["optimizer"].iterations, max_to_keep=2, chief=True)
    for step in (8, 10, 12):
        kept.save(step)
    assert [os.path.basename(p) for p in tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths] \
        == ["ckpt-10", "ckpt-12"] and not (tmp_path / "ckpt-8.index").exists()
    sources = saver.averaging_sources([1.0], 0.0, s["model"], count=2, step=6)
    assert sources.run_dir.path == str(tmp_path / "average_sources")
    for step in (5, 6, 7):
        sources.save(step)
    assert [os.path.basename(p) for p in sources.manager.checkpoints] == ["ckpt-6", "ckpt-7"]
    # A run resumed at step 6 drops the sources a killed run saved after it (averaging_schedule.sources_manager).
    resumed = saver.averaging_sources([1.0], 0.0, s["model"], count=2, step=6)
    assert [os.path.basename(p) for p in resumed.manager.checkpoints] == ["ckpt-6"]


def test_a_failed_save_removes_what_it_left_unless_the_state_file_already_lists_it(tmp_path):
    s = state(2.0)
    saver = ckpt.Checkpoints(RunDir(str(tmp_path)), s, s["optimizer"].iterations, max_to_keep=10, chief=True)
    saver.save(2)
    real_save = saver.manager.save

    def full_disk_midway(checkpoint_number):  # what a full disk leaves while writing ckpt-4
        (tmp_path / "ckpt-4_temp").mkdir()
        (tmp_path / "ckpt-4_temp" / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"half")
        for name in ("ckpt-4.index", "ckpt-4.data-00000-of-00001", "checkpoint.tmp1a2b"):
            (tmp_path / name).write_bytes(b"")
        raise OSError(28, "No space left on device")

    saver.manager.save = full_disk_midway
    with pytest.raises(OSError):
        saver.save(4)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index"]
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-2")

    def full_disk_after_listing(checkpoint_number):  # ckpt-4 written whole and listed, then a failure
        path = real_save(checkpoint_number=checkpoint_number)
        (tmp_path / "checkpoint.tmp3c4d").write_bytes(b"")
        raise OSError(28, f"No space left on device after {path}")

    saver.manager.save = full_disk_after_listing
    with pytest.raises(OSError):
        saver.save(4)
    assert not (tmp_path / "checkpoint.tmp3c4d").exists()
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-4")
    assert saved_weight(str(tmp_path / "ckpt-4")) == 2.0
    # A failed save does not count as saved: the next save of step 4 writes it.
    saver.manager.save = real_save
    s["model"].w.assign(44.0)
    assert saved_weight(saver.save(4)) == 44.0
