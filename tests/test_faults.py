"""Faults a user meets while training and exporting: a full disk, a read-only directory, a signal at a bad time.

Each ends with one line saying what happened and what to do, nothing half-written, and a run that the same
command resumes. A full disk is simulated by making the write raise what TensorFlow or the OS raise (and,
where this process may mount a tmpfs, made real: a filesystem of a few MB, filled up).
"""
import contextlib
import errno
import json
import os
import shutil
import signal
import subprocess

import keras
import numpy as np
import pytest
import tensorflow as tf

import t2t_lite.hparams  # noqa: F401
import t2t_lite.problems  # noqa: F401
from t2t_lite import config, files, run_dir
from t2t_lite.errors import UserError
from t2t_lite.export import exporter, layout
from t2t_lite.export.exporter import ExportRequest, export_run
from t2t_lite.models import build_model
from t2t_lite.registry import hparams_sets
from t2t_lite.run import RunRequest
from t2t_lite.run_dir import RunDir, RunSpec, save_spec
from t2t_lite.training import averaging
from t2t_lite.training.loop import StopReason
from t2t_lite.training.run_config import RunConfig, resolve_for
from t2t_lite.training.trainer import Trainer
from cli_helpers import run_tool, run_tools, snapshot
from small_training import TINY, small_problem

DISK_FULL = "No space left on device"

# The writes a user can make succeed again (files.STORAGE_FAULTS), each with what its one line says to do. Every
# simulated fault is each of them in turn: one the library stopped handling would end in a traceback.
STORAGE_FAULTS = [pytest.param(errno.ENOSPC, "free some space", id="ENOSPC"),
                  pytest.param(errno.EDQUOT, "free some space or raise the quota", id="EDQUOT"),
                  pytest.param(errno.EROFS, "make it writable", id="EROFS")]


def tiny_hparams(average_last=2):
    return config.apply_overrides(hparams_sets.get("transformer_tiny")(),
                                  f"{TINY},average_last_checkpoints={average_last}")


def make_trainer(output_dir, train_steps, log=lambda line: None, average_last=2, save_every=4, seconds_per_step=None,
                 **run_options):
    """A TINY trainer on a small algorithmic_reverse, saving and evaluating every `save_every` steps; with
    seconds_per_step, its clock counts that many seconds a step (for a time budget, train_minutes)."""
    overrides = f"{TINY},average_last_checkpoints={average_last}"
    hparams = tiny_hparams(average_last)
    if run_dir.load_spec(RunDir(str(output_dir))) is None:  # what the trainer command writes first
        run_dir.ensure_writable(RunDir(str(output_dir)))
        save_spec(RunDir(str(output_dir)), RunSpec("algorithmic_reverse", "transformer_tiny", overrides, hparams))
    options = dict(eval_steps=1, save_checkpoints_steps=save_every, log_every_steps=save_every, random_seed=7,
                   memory_probe=False, eval_bleu_sentences=0)
    options.update(run_options)
    problem = small_problem()
    run = resolve_for(RunConfig(mixed_precision="none", output_dir=str(output_dir), train_steps=train_steps,
                                **options), problem, hparams, log=log)
    if seconds_per_step is None:
        return Trainer(problem, hparams, run, log=log)
    box = {}
    box["trainer"] = Trainer(problem, hparams, run, log=log,
                             clock=lambda: box["trainer"].step * seconds_per_step)
    return box["trainer"]


def model_weights(hparams, path):
    model = build_model(hparams)
    tf.train.Checkpoint(model=model).restore(str(path)).expect_partial().assert_existing_objects_matched()
    return [w.numpy() for w in model.weights if keras.backend.is_float_dtype(w.dtype)]


def leftovers(directory) -> list[str]:
    """Temporary files and directories anywhere under directory: what a write cut short leaves."""
    found = []
    for root, dirs, names in os.walk(directory):
        for name in dirs + names:
            if name.startswith(".tmp") or "_temp" in name or ".tmp" in name or name.endswith("-retired"):
                found.append(os.path.relpath(os.path.join(root, name), directory))
    return found


def write_error(path: str, code: int) -> tf.errors.OpError:
    """What TensorFlow's SaveV2 raises when a write into path fails with errno `code` (TensorFlow 2.21, a full
    tmpfs: ResourceExhaustedError "...; No space left on device"). TensorFlow's IOError maps ENOSPC and EDQUOT
    to RESOURCE_EXHAUSTED, EROFS to PERMISSION_DENIED, and ends the message with the OS's text."""
    error = tf.errors.PermissionDeniedError if code == errno.EROFS else tf.errors.ResourceExhaustedError
    return error(None, None, f"{{{{function_node __wrapped__SaveV2}}}} {path}; {os.strerror(code)} [Op:SaveV2]")


@contextlib.contextmanager
def tmpfs(path, options: str):
    """A tmpfs mounted at path, or a skip where this process may not mount one (not root, no CAP_SYS_ADMIN)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a real full or read-only filesystem needs a tmpfs mount (root); the simulated faults "
                    "test the same paths")
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}); the simulated faults test the "
                    f"same paths")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)  # lazily: summary writers may hold files


def fill(directory) -> None:
    """Fills the filesystem of directory up to the last byte (directory/filler)."""
    fd = os.open(os.path.join(directory, "filler"), os.O_WRONLY | os.O_CREAT)
    try:
        for size in (1 << 16, 1 << 12, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)


# --- A full disk while training ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained_to_step_4(tmp_path_factory):
    """A run trained 4 steps (ckpt-4), once for the module; read-only: a test that trains on copies it."""
    run = tmp_path_factory.mktemp("faults") / "run"
    make_trainer(run, train_steps=4).train()
    return run


@pytest.mark.parametrize("code, advice", STORAGE_FAULTS)
def test_a_full_or_read_only_disk_at_a_save_stops_with_one_line_keeps_the_previous_checkpoint_and_a_rerun_resumes(
        trained_to_step_4, tmp_path, monkeypatch, code, advice):
    run = tmp_path / "run"
    shutil.copytree(trained_to_step_4, run)
    before = model_weights(tiny_hparams(), run / "ckpt-4")
    save = tf.train.CheckpointManager.save

    def fails_at_step_8(manager, checkpoint_number=None, **kwargs):
        if checkpoint_number != 8:
            return save(manager, checkpoint_number=checkpoint_number, **kwargs)
        # What a save cut short leaves: the shards' temporary directory, a partial data file, a state file
        # being written.
        (run / "ckpt-8_temp").mkdir()
        (run / "ckpt-8_temp" / "part-00000-of-00001.data-00000-of-00001.tempstate1").write_bytes(b"\0" * 10)
        (run / "ckpt-8.data-00000-of-00001").write_bytes(b"\0" * 10)
        (run / "checkpoint.tmp0123abcd").write_text("model_checkpoint_")
        raise write_error(str(run / "ckpt-8_temp" / "part-00000-of-00001.data-00000-of-00001.tempstate1"), code)

    monkeypatch.setattr(tf.train.CheckpointManager, "save", fails_at_step_8)
    with pytest.raises(UserError) as raised:
        make_trainer(run, train_steps=8).train()
    assert str(raised.value) == (
        f"cannot write into `output_dir` '{run}': {os.strerror(code)}; {advice}, then rerun the same command: "
        f"it resumes from {run}/ckpt-4, the newest checkpoint, which is intact")
    assert leftovers(run) == [] and not list(run.glob("ckpt-8*"))
    assert tf.train.latest_checkpoint(str(run)) == str(run / "ckpt-4")
    for a, b in zip(before, model_weights(tiny_hparams(), run / "ckpt-4")):
        np.testing.assert_array_equal(a, b)

    if code != errno.ENOSPC:  # the fault left nothing behind whatever it was: the rerun is run once, after one
        return
    monkeypatch.setattr(tf.train.CheckpointManager, "save", save)  # space again
    lines = []
    rerun = make_trainer(run, train_steps=8, log=lines.append)
    assert rerun.train() is StopReason.STEPS
    assert f"resumed from {run}/ckpt-4 at step 4" in lines and rerun.step == 8
    assert (run / "averaged" / "ckpt-8.index").exists()


@pytest.mark.parametrize("code, advice", STORAGE_FAULTS)
def test_a_full_or_read_only_disk_while_writing_the_average_leaves_averaged_as_it_was_and_a_rerun_averages(
        trained_to_step_4, tmp_path, monkeypatch, code, advice):
    run = tmp_path / "run"
    # Resumed at step 4 rather than trained from scratch: steps 1-4, their checkpoint and evaluation are not run
    # again for each fault. Its averaged/ (of ckpt-4 alone) is what the failed write must leave as it was.
    shutil.copytree(trained_to_step_4, run)
    averaged_before = snapshot(run / "averaged")
    save = tf.train.CheckpointManager.save
    staged = []

    def fails_in_the_staging_directory(manager, *args, **kwargs):
        """The averaged checkpoint's save into write_model_dir's staging directory fails once its files are
        written: write_model_dir's own clean-up, not this test's, must remove them."""
        prefix = save(manager, *args, **kwargs)
        if not os.path.basename(manager.directory).startswith(".tmp-averaged-"):
            return prefix  # the run's checkpoints, and best/'s
        staged.extend(os.listdir(manager.directory))
        raise write_error(os.path.join(manager.directory, "checkpoint"), code)

    monkeypatch.setattr(tf.train.CheckpointManager, "save", fails_in_the_staging_directory)
    with pytest.raises(UserError) as raised:
        make_trainer(run, train_steps=8).train()
    assert str(raised.value) == (f"cannot write the averaged checkpoint into '{run}/averaged': {os.strerror(code)}; "
                                 f"{advice}, then run the same command again (nothing in '{run}/averaged' was "
                                 f"changed)")
    assert "ckpt-8.index" in staged  # the fault came inside the real write, with the checkpoint staged
    assert averaged_before is not None and snapshot(run / "averaged") == averaged_before and leftovers(run) == []
    assert tf.train.latest_checkpoint(str(run)).endswith("ckpt-8")

    if code != errno.ENOSPC:  # as above: the rerun after one fault stands for all
        return
    monkeypatch.setattr(tf.train.CheckpointManager, "save", save)
    lines = []
    assert make_trainer(run, train_steps=8, log=lines.append).train() is StopReason.STEPS
    assert f"training ended in an earlier run, which did not write {run}/averaged: averaging now" in lines
    assert json.loads((run / "averaged" / "averaged.json").read_text())["checkpoints"] == ["ckpt-4", "ckpt-8"]


@pytest.mark.slow  # a real filesystem (root only), filled up; two trainers
def test_a_really_full_disk_stops_the_trainer_with_one_line_and_a_rerun_resumes_once_there_is_space(
        trained_to_step_4, tmp_path):
    with tmpfs(tmp_path / "disk", "size=8m") as disk:
        run = disk / "run"
        shutil.copytree(trained_to_step_4, run)
        trainer = make_trainer(run, train_steps=8)
        fill(disk)
        with pytest.raises(UserError, match=f"^cannot write into `output_dir` '{run}': {DISK_FULL}; free some "
                                            f"space, then rerun the same command: it resumes from {run}/ckpt-4,"):
            trainer.train()
        assert leftovers(run) == [] and not list(run.glob("ckpt-8*"))
        os.remove(disk / "filler")
        lines = []
        assert make_trainer(run, train_steps=8, log=lines.append).train() is StopReason.STEPS
        assert f"resumed from {run}/ckpt-4 at step 4" in lines
        assert (run / "averaged" / "ckpt-8.index").exists() and leftovers(run) == []


# --- A full disk while exporting ----------------------------------------------------------------------------


@pytest.mark.parametrize("code, advice", STORAGE_FAULTS)
def test_a_full_or_read_only_disk_during_an_export_publishes_nothing_and_keeps_earlier_versions(
        multi30k_run, tmp_path, monkeypatch, code, advice):
    model_dir = tmp_path / "exports" / "m30k"
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "1" / "saved_model.pb").write_bytes(b"an earlier export")

    def fails(module, path, signatures=None):
        with open(os.path.join(path, "saved_model.pb"), "wb") as f:
            f.write(b"half")
        raise write_error(os.path.join(path, "variables", "variables_temp", "part-00000-of-00001"), code)

    monkeypatch.setattr(exporter.tf.saved_model, "save", fails)
    request = ExportRequest(str(tmp_path / "exports"), RunRequest(output_dir=multi30k_run["output_dir"],
                                                                  data_dir=multi30k_run["data_dir"]), "m30k")
    with pytest.raises(UserError) as raised:
        export_run(request)
    assert str(raised.value) == (
        f"cannot write the export into `export_dir` '{tmp_path / 'exports'}': {os.strerror(code)}; {advice}, then "
        f"export again (nothing was published; the versions in '{model_dir}' are as they were)")
    assert sorted(os.listdir(model_dir)) == ["1"] and layout.versions(str(model_dir)) == [1]
    assert (model_dir / "1" / "saved_model.pb").read_bytes() == b"an earlier export"


@pytest.mark.parametrize("code, advice", STORAGE_FAULTS)
def test_a_full_or_read_only_disk_during_a_ctranslate2_export_publishes_nothing(multi30k_run, tmp_path, monkeypatch,
                                                                               code, advice):
    ctranslate2 = pytest.importorskip("ctranslate2")
    from t2t_lite.export.ctranslate2_export import export_ctranslate2
    from t2t_lite.run import open_run

    model_dir = tmp_path / "exports" / "m30k"
    (model_dir / "3").mkdir(parents=True)

    def fails(converter, output_dir, **kwargs):
        os.makedirs(output_dir)
        with open(os.path.join(output_dir, "model.bin"), "wb") as f:
            f.write(b"half")
        raise OSError(code, os.strerror(code), os.path.join(output_dir, "model.bin"))

    monkeypatch.setattr(ctranslate2.converters.Converter, "convert", fails)
    run = open_run(RunRequest(output_dir=multi30k_run["output_dir"], data_dir=multi30k_run["data_dir"]))
    with pytest.raises(UserError, match=f"^cannot write the export into `export_dir` '{tmp_path / 'exports'}': "
                                        f"{os.strerror(code)}; {advice}, then export again"):
        export_ctranslate2(run, str(tmp_path / "exports"), "m30k")
    assert sorted(os.listdir(model_dir)) == ["3"]


# --- Read-only directories ----------------------------------------------------------------------------------


def test_a_read_only_output_dir_is_refused_before_training_when_resuming_too(tmp_path, monkeypatch):
    run = tmp_path / "run"
    spec = RunSpec("algorithmic_reverse", "transformer_tiny", TINY, tiny_hparams())
    run.mkdir()
    save_spec(RunDir(str(run)), spec)

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(run_dir.tempfile, "NamedTemporaryFile", read_only)  # the probe ensure_writable writes
    for output_dir in (run, tmp_path / "new"):
        with pytest.raises(UserError, match=f"^cannot write to `output_dir` '{output_dir}': Read-only file system$"):
            run_dir.create_or_resume(RunDir(str(output_dir)), spec)


def test_a_data_dir_datagen_cannot_write_is_refused_before_anything_is_read(tmp_path, monkeypatch):
    (tmp_path / "a_file").write_text("")
    with pytest.raises(UserError, match="^cannot write to --data_dir '.*/a_file/data': Not a directory$"):
        files.check_dir_can_be_written(str(tmp_path / "a_file" / "data"), "--data_dir")
    files.check_dir_can_be_written(str(tmp_path / "new" / "data"), "--data_dir")
    assert sorted(os.listdir(tmp_path)) == ["a_file"]  # nothing created
    monkeypatch.setattr(files.os, "statvfs", lambda path: os.statvfs_result((0,) * 8 + (os.ST_RDONLY, 255)))
    with pytest.raises(UserError, match=f"^cannot write to --data_dir '{tmp_path}/new': Read-only file system$"):
        files.check_dir_can_be_written(str(tmp_path / "new"), "--data_dir")
    result = run_tool("datagen", "--problem=translate_files", f"--data_dir={tmp_path / 'a_file' / 'data'}",
                      f"--train_files={tmp_path / 'nope.en'},{tmp_path / 'nope.de'}",
                      f"--dev_files={tmp_path / 'nope.en'},{tmp_path / 'nope.de'}")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.error == f"cannot write to --data_dir '{tmp_path / 'a_file' / 'data'}': Not a directory"


@pytest.mark.slow  # a real read-only filesystem (root only)
def test_a_read_only_output_dir_is_one_line_before_any_training_new_or_resumed(trained_to_step_4, tmp_path):
    with tmpfs(tmp_path / "disk", "size=8m") as disk:
        flags = ["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny", f"--hparams={TINY}",
                 "--train_steps=2", "--save_checkpoints_steps=2", "--eval_steps=1", "--nomemory_probe"]
        resumed = disk / "resumed"
        shutil.copytree(trained_to_step_4, resumed)  # ckpt-4
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        listing = sorted(os.listdir(resumed))
        results = run_tools({"new": ("trainer", [*flags, f"--output_dir={disk / 'new'}"]),
                             "again": ("trainer", [*flags[3:], "--train_steps=8", f"--output_dir={resumed}"])})
        new, again = results["new"], results["again"]
        unchanged = listing == sorted(os.listdir(resumed))
    for result, where in ((new, disk / "new"), (again, resumed)):
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert result.error == f"cannot write to --output_dir '{where}': Read-only file system"
    assert "step 5" not in again.stdout and unchanged


@pytest.mark.slow  # a real read-only filesystem (root only)
def test_a_read_only_data_dir_is_read_by_the_trainer_and_refused_by_datagen(multi30k_run, tmp_path):
    with tmpfs(tmp_path / "disk", "size=16m") as disk:
        data_dir = disk / "data"
        shutil.copytree(multi30k_run["data_dir"], data_dir)
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        raw = multi30k_run["raw"]
        results = run_tools({
            "datagen": ("datagen", ["--problem=translate_files", f"--data_dir={data_dir / 'more'}",
                                    f"--train_files={raw}/train.en,{raw}/train.de", "--vocab_size=300"]),
            "trained": ("trainer", [f"--output_dir={tmp_path / 'run'}", f"--data_dir={data_dir}",
                                    "--problem=translate_files", "--hparams_set=transformer_tiny",
                                    "--hparams=num_encoder_layers=1,num_decoder_layers=1,d_model=16,d_ff=32,num_heads=2",
                                    "--train_steps=1", "--save_checkpoints_steps=1", "--eval_steps=1",
                                    "--nomemory_probe", "--eval_bleu_sentences=0"])})
        datagen, trained = results["datagen"], results["trained"]
    assert datagen.returncode == 2 and "Traceback" not in datagen.stderr, datagen.stderr
    assert datagen.error == f"cannot write to --data_dir '{data_dir / 'more'}': Read-only file system"
    assert trained.returncode == 0, trained.stderr
    assert tf.train.latest_checkpoint(str(tmp_path / "run")).endswith("ckpt-1")


# --- Signals at a bad time ----------------------------------------------------------------------------------


def test_sigterm_during_an_evaluation_lets_it_finish_then_saves_and_stops_and_a_rerun_goes_on(tmp_path):
    run = tmp_path / "run"
    lines = []
    trainer = make_trainer(run, train_steps=8, log=lines.append)
    evaluate = trainer.evaluator.dev_loss

    def signalled_midway():
        if not lines_before_signal:
            lines_before_signal.append(len(lines))
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs at once, in this (the main) thread
        return evaluate()

    lines_before_signal = []

    trainer.evaluator.dev_loss = signalled_midway
    assert trainer.train() is StopReason.SIGNAL
    assert [line for line in lines if line.startswith("step 4: dev loss")]  # the evaluation finished
    scores = json.loads((run / "dev_scores.json").read_text())
    assert [e["step"] for e in scores["evaluations"]] == [4] and scores["best_step"] == 4
    assert json.loads((run / "best" / "best.json").read_text())["step"] == 4
    # The vote to stop rides on the next update, which is saved: nothing trained is lost.
    assert lines[-1] == f"SIGTERM received: saved step {trainer.step}, stopping" and trainer.step == 5
    assert tf.train.latest_checkpoint(str(run)) == str(run / "ckpt-5")
    assert leftovers(run) == [] and not (run / "averaged").exists()
    lines.clear()
    rerun = make_trainer(run, train_steps=8, log=lines.append)
    assert rerun.train() is StopReason.STEPS and rerun.step == 8
    assert f"resumed from {run}/ckpt-5 at step 5" in lines
    assert [e["step"] for e in json.loads((run / "dev_scores.json").read_text())["evaluations"]] == [4, 8]


def test_sigterm_while_averaging_leaves_averaged_as_it_was_and_a_rerun_averages(tmp_path, monkeypatch):
    run = tmp_path / "run"
    lines = []
    # 10 s a step on its clock and a budget of 1 minute: the run ends at step 6 (checkpoints 4 and 6).
    budgeted = dict(train_steps=1000, seconds_per_step=10.0, train_minutes=1.0)
    trainer = make_trainer(run, log=lines.append, **budgeted)
    build = averaging.build_model

    def signalled(hparams):
        os.kill(os.getpid(), signal.SIGTERM)
        return build(hparams)

    monkeypatch.setattr(averaging, "build_model", signalled)
    assert trainer.train() is StopReason.TIME_BUDGET and trainer.step == 6
    assert lines[-1] == (f"SIGTERM received while averaging: {run}/averaged was left as it was; run the same "
                         f"command again to average")
    assert not (run / "averaged").exists() and leftovers(run) == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handlers are put back

    monkeypatch.setattr(averaging, "build_model", build)
    (run / ".tmp-averaged-killed").mkdir()  # what an averaging killed before its rename leaves
    lines.clear()
    rerun = make_trainer(run, log=lines.append, **budgeted)
    assert rerun.train() is StopReason.TIME_BUDGET
    assert any("was spent by an earlier run" in line for line in lines)
    assert f"training ended in an earlier run, which did not write {run}/averaged: averaging now" in lines
    assert leftovers(run) == []
    hparams = rerun.hparams
    step4, step6 = model_weights(hparams, run / "ckpt-4"), model_weights(hparams, run / "ckpt-6")
    for averaged, a, b in zip(model_weights(hparams, run / "averaged" / "ckpt-6"), step4, step6):
        np.testing.assert_allclose(averaged, (a + b) / 2, rtol=1e-6)
    lines.clear()
    assert averaging.finish_averaging(RunDir(str(run)), hparams.train, lines.append) is None  # averaged/ is current
    assert lines == []
