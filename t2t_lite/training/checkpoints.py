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
import shutil
from collections.abc import Callable

import tensorflow as tf

from t2t_lite.errors import UserError
from t2t_lite.files import storage_fault, storage_fault_text
from t2t_lite.run_dir import RunDir, checkpoint_entries, checkpoint_step, restore_checkpoint, restore_unchecked
from t2t_lite.training.averaging_schedule import AveragingSources

REQUIRED_STATE = ("model", "optimizer")
DATA = "data"


@dataclasses.dataclass(frozen=True)
class Restored:
    """The checkpoint a run resumed from."""

    path: str
    step: int
    entries: frozenset[str]  # the top-level names it holds ("model", "optimizer", "data", ...)


def restore_latest(run_dir: RunDir, state: dict, log: Callable[[str], None]) -> Restored | None:
    """Restores `state` (every entry but "data") from the newest readable checkpoint in run_dir.

    A checkpoint that cannot be read (a truncated or missing file) is reported and the one before it
    tried; the next save of that step number overwrites it. The required entries must match; the
    others come back when the checkpoint has them, so a run may resume under another distribution or
    precision.
    Returns:
      What was restored, or None when run_dir has no checkpoint.
    Raises:
      UserError: there are checkpoints but none can be read.
    """
    candidates = list(reversed(run_dir.listed_checkpoints()))
    for path in candidates:
        try:
            entries = checkpoint_entries(path)
            present = {k: v for k, v in state.items() if k != DATA and (k in REQUIRED_STATE or k in entries)}
            restore_checkpoint(path, **present)
        except (tf.errors.OpError, ValueError, IndexError) as error:  # IndexError: truncated file
            reason = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
            log(f"checkpoint {path} is unreadable ({reason}); trying the one before it")
            continue
        return Restored(path, checkpoint_step(path), entries)
    if candidates:
        raise UserError(f"no checkpoint in `output_dir` {run_dir.path!r} can be read; move them away to start afresh")
    return None


def data_seed(random_seed: int, restored: Restored | None, data_checkpointed: bool) -> int:
    """The training data's shuffle seed: random_seed, or random_seed + step when resuming from a checkpoint
    without the data position (so the resumed run does not replay the batches it began with)."""
    replays = restored is not None and not (data_checkpointed and DATA in restored.entries)
    return random_seed + restored.step if replays else random_seed


def restore_data(iterator, restored: Restored | None) -> None:
    """Puts the data iterator back where the checkpoint `restored` left it, when it holds the position."""
    if restored is not None and DATA in restored.entries:
        restore_unchecked(restored.path, data=iterator)


class Checkpoints:
    """Saves a run's training state, once per step, into the run directory (or, for a worker that is not
    the chief, into a scratch directory: tf.distribute may need every worker to take part in a save).

    Args:
      run_dir: the run directory.
      state: what a checkpoint holds, by entry name.
      step_counter: the optimizer's iterations.
      max_to_keep: regular checkpoints kept.
      chief: whether this process writes into run_dir.
      before_save: called just before each save (the training clock records its seconds).
      saved_step: the step of the checkpoint restored, which counts as saved.
    """

    def __init__(self, run_dir: RunDir, state: dict, step_counter: tf.Variable, max_to_keep: int, chief: bool,
                 before_save: Callable[[], None] = lambda: None, saved_step: int | None = None):
        self.run_dir = run_dir if chief else RunDir.scratch()
        self._scratch = not chief
        self._before_save, self._saved_step = before_save, saved_step
        self.manager = self.run_dir.manager(tf.train.Checkpoint(**state), max_to_keep, step_counter)

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
            self.run_dir.remove_unrecorded(step)
            raise
        self._saved_step = step
        return path

    @contextlib.contextmanager
    def stop_on_storage_faults(self):
        """Within the block, a write the disk cannot take (full, over quota, read-only: files.STORAGE_FAULTS)
        raises a UserError naming the newest checkpoint, which is intact, instead of a traceback."""
        try:
            yield
        except Exception as error:  # noqa: BLE001 (anything else is re-raised as it is)
            if (code := storage_fault(error)) is None:
                raise
            where = f"{'the scratch directory' if self._scratch else '`output_dir`'} {self.run_dir.path!r}"
            newest = self.run_dir.latest_checkpoint()
            then = (f"it resumes from {newest}, the newest checkpoint, which is intact" if newest
                    else "no checkpoint was saved yet")
            raise UserError(f"cannot write into {where}: {storage_fault_text(code)}, then rerun the same command: "
                            f"{then}") from None

    def averaging_sources(self, points: list[float], position: float, model, count: int, step: int) -> AveragingSources:
        """The end-of-run checkpoints to average (averaging_schedule.py), kept beside the regular ones."""
        return AveragingSources(points, position, tf.train.Checkpoint(model=model),
                                self.run_dir.average_sources, count, step)

    def close(self) -> None:
        """Removes a non-chief's scratch directory: call once nothing more is saved."""
        if self._scratch:
            shutil.rmtree(self.run_dir.path, ignore_errors=True)
