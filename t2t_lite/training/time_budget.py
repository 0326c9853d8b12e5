"""A training time budget: the seconds a run has trained, carried across restarts in its checkpoints.

The budget counts wall-clock seconds inside the training loop (steps, evaluations and saves; not start-up,
restore, the memory probe or the final averaging). Every checkpoint records the seconds trained up to its
step, so a run resumed from it goes on from there: time spent after the newest checkpoint by a process that
died without saving is not counted, just as the steps it took are not kept.
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
        if self._started is None:
            return float(self.variable.numpy())
        return self._base + (self._now() - self._started)

    def record(self) -> None:
        """Puts seconds() into the checkpointed variable: call just before a save."""
        self.variable.assign(self.seconds())
