"""A run's training checkpoints: restoring the newest readable one, saving each step once, averaging sources.

A checkpoint holds "model" and "optimizer" always; "clock" (seconds trained), "data" (the input
iterator's position) and "loss_scale" (float16) when the run that wrote it had them. Restoring happens
in two parts because the data iterator is made from a seed that depends on the checkpoint: first every
entry but the data decides which checkpoint is readable (`restore_latest`), then the iterator is made
(`data_seed`) and its position restored from that same checkpoint (`restore_data`).

A save the disk cannot take (full, over quota, read-only) leaves the checkpoints before it as they were:
TensorFlow writes a checkpoint under a temporary name and lists it in the `checkpoint` state file only once
whole; `Checkpoints.save` also removes what a failed save left behind, and `Checkpoints.stop_on_storage_faults`
turns the failure into one line naming the newest checkpoint, from which a rerun resumes.
"""
import contextlib
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Callable

import tensorflow as tf

from t2t_lite.errors import UserError
from t2t_lite.files import storage_fault, storage_fault_text
from t2t_lite.run_dir import CHECKPOINT_NAME, RunDir, checkpoint_exists, checkpoint_step, restore_checkpoint
from t2t_lite.training.averaging_schedule import AveragingSources

REQUIRED_STATE = ("model", "optimizer")
DATA = "data"


@dataclasses.dataclass(frozen=True)
class Restored:
    """The checkpoint a run resumed from."""

    path: str
    step: int
    entries: frozenset[str]  # the top-level names it holds ("model", "optimizer", "data", ...)


def saved_entries(checkpoint_path: str) -> frozenset[str]:
    """The top-level names a checkpoint holds."""
    return frozenset(name.split("/")[0] for name, _ in tf.train.list_variables(checkpoint_path))


def restore_latest(directory: str, state: dict, log: Callable[[str], None]) -> Restored | None:
    """Restores `state` (every entry but "data") from the newest readable checkpoint in directory.

    A checkpoint that cannot be read (a truncated or missing file) is reported and the one before it
    tried; the next save of that step number overwrites it. The required entries must match; the
    others come back when the checkpoint has them, so a run may resume under another distribution or
    precision.
    Returns:
      What was restored, or None when directory has no checkpoint.
    Raises:
      UserError: there are checkpoints but none can be read.
    """
    candidates = list(reversed(RunDir(directory).listed_checkpoints()))
    for path in candidates:
        try:
            entries = saved_entries(path)
            present = {k: v for k, v in state.items() if k != DATA and (k in REQUIRED_STATE or k in entries)}
            restore_checkpoint(path, **present)
        except (tf.errors.OpError, ValueError, IndexError) as error:  # IndexError: truncated file
            reason = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
            log(f"checkpoint {path} is unreadable ({reason}); trying the one before it")
            continue
        return Restored(path, checkpoint_step(path), entries)
    if candidates:
        raise UserError(f"no checkpoint in `output_dir` {directory!r} can be read; move them away to start afresh")
    return None


def data_seed(random_seed: int, restored: Restored | None, data_checkpointed: bool) -> int:
    """The training data's shuffle seed: random_seed, or random_seed + step when resuming from a checkpoint
    without the data position (so the resumed run does not replay the batches it began with)."""
    if restored is not None and not (data_checkpointed and DATA in restored.entries):
        return random_seed + restored.step
    return random_seed


def restore_data(iterator, restored: Restored | None) -> None:
    """Puts the data iterator back where the checkpoint `restored` left it, when it holds the position."""
    if restored is not None and DATA in restored.entries:
        tf.train.Checkpoint(data=iterator).restore(restored.path).expect_partial()


class Checkpoints:
    """Saves a run's training state, once per step, into the run directory (or, for a worker that is not
    the chief, into a scratch directory: tf.distribute may need every worker to take part in a save).

    Args:
      output_dir: the run directory.
      state: what a checkpoint holds, by entry name.
      step_counter: the optimizer's iterations.
      max_to_keep: regular checkpoints kept.
      chief: whether this process writes into output_dir.
      before_save: called just before each save (the training clock records its seconds).
      saved_step: the step of the checkpoint restored, which counts as saved.
    """

    def __init__(self, output_dir: str, state: dict, step_counter: tf.Variable, max_to_keep: int, chief: bool,
                 before_save: Callable[[], None] = lambda: None, saved_step: int | None = None):
        self.directory = output_dir if chief else tempfile.mkdtemp(prefix="t2t-lite-worker-")
        self.run_dir = RunDir(self.directory)
        self._scratch = not chief
        self._before_save, self._saved_step = before_save, saved_step
        self.manager = tf.train.CheckpointManager(tf.train.Checkpoint(**state), self.directory, max_to_keep=max_to_keep,
                                                  step_counter=step_counter, checkpoint_name=CHECKPOINT_NAME)

    @property
    def latest(self) -> str | None:
        return self.manager.latest_checkpoint

    def save(self, step: int) -> str:
        """Writes a checkpoint for `step` unless one was already saved or restored for it."""
        if self._saved_step == step:
            return self.latest
        self._before_save()
        try:
            path = self.manager.save(checkpoint_number=step)
        except BaseException:
            self._remove_unlisted(step)
            raise
        self._saved_step = step
        return path

    def _remove_unlisted(self, step: int) -> None:
        """Removes what a failed save of `step` left: its temporary files, and its files unless the state
        file already lists it as the newest (the failure came after it was recorded)."""
        prefix = self.run_dir.checkpoint_prefix(step)
        listed = self.run_dir.listed_checkpoints()
        recorded = (bool(listed) and os.path.basename(listed[-1]) == os.path.basename(prefix)
                    and checkpoint_exists(prefix))
        # <prefix>_temp/ holds the shards being written; checkpoint.tmp<hex> a state file being written.
        leftovers = tf.io.gfile.glob(prefix + "_temp*") + tf.io.gfile.glob(self.run_dir.checkpoint_state_file + ".tmp*")
        if not recorded:
            leftovers += tf.io.gfile.glob(prefix + ".index") + tf.io.gfile.glob(prefix + ".data-*")
        for path in leftovers:
            try:
                if tf.io.gfile.isdir(path):
                    tf.io.gfile.rmtree(path)
                else:
                    tf.io.gfile.remove(path)
            except tf.errors.OpError:
                pass  # already gone; nothing else can be done about the rest

    @contextlib.contextmanager
    def stop_on_storage_faults(self):
        """Within the block, a write the disk cannot take (full, over quota, read-only: files.STORAGE_FAULTS)
        raises a UserError naming the newest checkpoint, which is intact, instead of a traceback."""
        try:
            yield
        except Exception as error:  # noqa: BLE001 (anything else is re-raised as it is)
            if (code := storage_fault(error)) is None:
                raise
            where = f"{'the scratch directory' if self._scratch else '`output_dir`'} {self.directory!r}"
            newest = tf.train.latest_checkpoint(self.directory)
            then = (f"it resumes from {newest}, the newest checkpoint, which is intact" if newest
                    else "no checkpoint was saved yet")
            raise UserError(f"cannot write into {where}: {storage_fault_text(code)}, then rerun the same command: "
                            f"{then}") from None

    def averaging_sources(self, points: list[float], position: float, model, count: int, step: int) -> AveragingSources:
        """The end-of-run checkpoints to average (averaging_schedule.py), kept beside the regular ones."""
        return AveragingSources(points, position, tf.train.Checkpoint(model=model),
                                self.run_dir.average_sources.path, count, step)

    def close(self) -> None:
        """Removes a non-chief's scratch directory: call once nothing more is saved."""
        if self._scratch:
            shutil.rmtree(self.directory, ignore_errors=True)
