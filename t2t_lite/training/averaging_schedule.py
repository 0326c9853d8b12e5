"""Checkpoints for averaging taken at the end of training, not wherever the regular saves happen to fall.

With train.average_span = s > 0, the trainer saves the model's weights at `average_last_checkpoints`
evenly spaced points of the last fraction s of the run (of the time budget when there is one, else of
train_steps), the last at its end, into <output_dir>/average_sources/, and averages those. They live
beside, not among, the regular checkpoints, so keep_checkpoint_max never deletes them; that directory's
own manager keeps the newest `average_last_checkpoints`.
"""
import math

import tensorflow as tf

from t2t_lite.run_dir import RunDir, checkpoint_step
from t2t_lite.training.progress import clock


def averaging_points(end: float, span: float, count: int) -> list[float]:
    """`count` evenly spaced points ending at `end`, covering the last `span` fraction of [0, end].

    Each point stands for the span / count of training before it, so together they cover the span:
    end=1000, span=0.1, count=5 -> [920, 940, 960, 980, 1000].
    """
    return [end - end * span * k / count for k in reversed(range(count))]


def averaging_steps(train_steps: int, span: float, count: int) -> list[int]:
    """averaging_points over steps, rounded up to whole steps (at least 1), without repeats."""
    return sorted({max(1, math.ceil(p - 1e-9)) for p in averaging_points(train_steps, span, count)})


def end_of_run_points(train_steps: int, budget_seconds: float, span: float, count: int) -> tuple[list[float], str]:
    """The points to save at: in trained seconds under a time budget, else in steps; and how to say them."""
    if budget_seconds:
        points = averaging_points(budget_seconds, span, count)
        return points, ", ".join(clock(p) for p in points) + " of training"
    steps = averaging_steps(train_steps, span, count)
    return steps, "steps " + ", ".join(str(p) for p in steps)


class AveragingSchedule:
    """Says after which steps to save a checkpoint for averaging.

    Args:
      points: ascending points, in steps or in trained seconds.
      position: where training is now (a resumed run is past some points already; they were saved then).
    """

    def __init__(self, points: list[float], position: float):
        self.points = list(points)
        self._next = sum(1 for p in self.points if p <= position)

    def due(self, position: float) -> bool:
        """True once per crossing: when `position` has reached the next point (several at once count once)."""
        crossed = False
        while self._next < len(self.points) and position >= self.points[self._next]:
            self._next, crossed = self._next + 1, True
        return crossed


class AveragingSources:
    """The checkpoints to average at the end of a run: when to save them and where they are kept.

    Args:
      points: as for AveragingSchedule. position: where training is now.
      checkpoint: what a source holds (the model's weights). sources, count, current_step: as for
        sources_manager.
    """

    def __init__(self, points: list[float], position: float, checkpoint: tf.train.Checkpoint, sources: RunDir,
                 count: int, current_step: int):
        self.schedule = AveragingSchedule(points, position)
        self.run_dir = sources
        self.manager = sources_manager(checkpoint, sources, count, current_step)
        self._saved_step = None

    def save_if_due(self, position: float, step: int) -> None:
        """Saves at `step` when `position` has crossed the schedule's next point."""
        if self.schedule.due(position):
            self.save(step)

    def save(self, step: int) -> None:
        """Saves the weights at `step` as one of the checkpoints to average, once per step."""
        if self._saved_step != step:
            self._saved_step = step
            self.manager.save(checkpoint_number=step)


def sources_manager(checkpoint: tf.train.Checkpoint, sources: RunDir, count: int,
                    current_step: int) -> tf.train.CheckpointManager:
    """The manager of the averaging sources in `sources`, keeping the newest `count`.

    Sources newer than current_step were saved by a process that died before its next regular
    checkpoint; the resumed run retrains those steps (and, under a time budget, may cross the points at
    other steps), so they are dropped rather than averaged with the new ones.
    """
    sources.keep_listed([p for p in sources.listed_checkpoints() if checkpoint_step(p) <= current_step])
    return sources.manager(checkpoint, max_to_keep=count)
