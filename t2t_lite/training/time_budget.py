"""A training time budget: the seconds a run has trained, carried across restarts in its checkpoints.

The budget counts wall-clock seconds inside the training loop (steps, evaluations and saves; not start-up,
restore, the memory probe or the final averaging). Every checkpoint records the seconds trained up to its
step, so a run resumed from it goes on from there: time spent after the newest checkpoint by a process that
died without saving is not counted, just as the steps it took are not kept. Beside the clock, every
checkpoint holds what the plan of the last step was estimated from (PaceRecord), so a resumed run plans
as the uninterrupted one did (last_step.py).
"""
import time
from collections.abc import Callable

import tensorflow as tf


class TrainingClock:
    """Seconds trained so far in this run directory: those restored from a checkpoint plus this process's.

    Args:
      now: a monotonic clock in seconds (time.monotonic; tests pass their own).
    """

    def __init__(self, now: Callable[[], float] = time.monotonic):
        self._now = now
        # Checkpointed with the model; float64 so days of seconds keep sub-millisecond precision.
        self.variable = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="train_seconds")
        self._base, self._started = 0.0, None

    def start(self) -> None:
        """Starts counting from the restored (or zero) seconds: call when training steps begin."""
        self._base, self._started = float(self.variable.numpy()), self._now()

    def seconds(self) -> float:
        """Seconds trained in this run directory up to now."""
        return float(self.variable.numpy()) if self._started is None else self._base + (self._now() - self._started)

    def record(self) -> None:
        """Puts seconds() into the checkpointed variable: call just before a save."""
        self.variable.assign(self.seconds())


class PaceRecord(tf.Module):
    """What the plan of a run's last step is estimated from: the recent seconds per update and the
    evaluations' seconds and count (loop.StopRules keeps them here, checkpoints hold them)."""

    def __init__(self):
        super().__init__(name="pace")
        # -1: no pace measured yet (a new run, or one resumed from a checkpoint written before these were kept).
        self._seconds_per_step = tf.Variable(-1.0, dtype=tf.float64, trainable=False, name="seconds_per_step")
        self._eval_seconds = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="eval_seconds")
        self._evaluations = tf.Variable(0, dtype=tf.int64, trainable=False, name="evaluations")

    @property
    def seconds_per_step(self) -> float | None:
        value = float(self._seconds_per_step.numpy())
        return None if value < 0 else value

    @seconds_per_step.setter
    def seconds_per_step(self, value: float) -> None:
        self._seconds_per_step.assign(value)

    def add_evaluation(self, seconds: float) -> None:
        self._eval_seconds.assign_add(seconds)
        self._evaluations.assign_add(1)

    def mean_eval_seconds(self) -> float:
        evaluations = int(self._evaluations.numpy())
        return float(self._eval_seconds.numpy()) / evaluations if evaluations else 0.0
