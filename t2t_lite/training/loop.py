"""The training loop: updates until a stop rule says why the run ends.

The loop knows nothing of models or files: it takes a step function and hooks (progress, checkpoint),
so each stop rule is tested with a scripted step and an injected clock.
"""
import dataclasses
import enum
from collections.abc import Callable

from t2t_lite.errors import UserError
from t2t_lite.training.last_step import plan_last_step, should_stop
from t2t_lite.training.signals import StopRequest
from t2t_lite.training.steps import StepResult
from t2t_lite.training.time_budget import PaceRecord, TrainingClock


class StopReason(enum.Enum):
    STEPS = "train_steps reached"
    TIME_BUDGET = "time budget spent"
    EARLY_STOPPING = "early stopping"
    SIGNAL = "signal"  # this process's, or another worker's stop request


# The first pace is measured over this many updates after the process's first (which traces the step),
# not at the first progress line: a warmup given as a share of the run needs the plan from its first steps.
FIRST_PACE_STEPS = 10


class StopRules:
    """When the run is over.

    With the paper's schedule: at train_steps, or once the clock has counted the budget. With a schedule
    that knows the end (`on_plan` given: it moves the schedule's last step), at the planned last step
    (last_step.py), where the rate reaches its floor: the plan is made at the start, revised at every
    progress line and after every evaluation while the run goes on, from the pace the budget's clock
    measured since the last revision with evaluations left out. The measurements live in `pace`, which
    checkpoints hold, so a resumed run starts from the pace and evaluation cost its checkpoint recorded (from
    the run's average pace, seconds trained / steps, when it recorded none); every process measures its own
    pace over its first FIRST_PACE_STEPS updates after the first, whose tracing is left out.

    Args:
      train_steps: the step limit.
      budget_seconds: the time budget; 0 = none.
      clock: the run's TrainingClock.
      save_every: save_checkpoints_steps (each save has an evaluation the plan makes room for).
      on_plan: called with each plan's last step; None with the paper's schedule.
      pace: the run's PaceRecord (restored from its checkpoint); a new one by default.
    """

    def __init__(self, train_steps: int, budget_seconds: float, clock: TrainingClock, save_every: int,
                 on_plan: Callable[[int], None] | None = None, pace: PaceRecord | None = None):
        self.train_steps, self.budget_seconds, self.clock = train_steps, budget_seconds, clock
        self.save_every, self.on_plan = save_every, on_plan
        self.pace = pace or PaceRecord()
        self.last_step = train_steps  # where the run is planned to end
        self._window = (0.0, 0)  # (seconds trained, step) where the current pace window began
        self._traced = False  # whether this process has taken its first update
        self._measured = False  # whether this process has measured its pace

    def reason(self, step: int) -> StopReason | None:
        # The plan's last step (train_steps with the paper's schedule, whose run also ends once the budget is spent).
        if should_stop(step, self.last_step) or (self.on_plan is None and self.budget_spent()):
            return StopReason.STEPS if step >= self.train_steps else StopReason.TIME_BUDGET
        if self.on_plan is not None and self.budget_spent() and self.last_step > step + 1:
            self._revise(step)  # the estimate fell short: end at the next step, the rate at its floor there
        return None

    def budget_spent(self) -> bool:
        return self.budget_seconds > 0 and self.clock.seconds() >= self.budget_seconds

    def start(self, step: int) -> None:
        """Call when the clock starts: the first plan, from the run's average pace so far."""
        self._window = (self.clock.seconds(), step)
        self._revise(step)

    def updated(self, step: int) -> None:
        """After every applied update: this process's first pace, early (FIRST_PACE_STEPS)."""
        if self.on_plan is None or self._measured:
            return
        if not self._traced:
            self._traced = True
            self._window = (self.clock.seconds(), step)  # the first update's tracing is not the pace
        elif step - self._window[1] >= FIRST_PACE_STEPS:
            self.logged(step)

    def logged(self, step: int) -> None:
        """At a progress line: the pace of the steps since the last revision, and a new plan."""
        seconds, first = self._window
        if step > first:
            self.pace.seconds_per_step = (self.clock.seconds() - seconds) / (step - first)
            self._measured = True
        self._window = (self.clock.seconds(), step)
        self._revise(step)

    def evaluated(self, step: int, seconds: float) -> None:
        """After a save and evaluation that took `seconds`: counted apart from the pace, and a new plan."""
        self.pace.add_evaluation(seconds)
        window_seconds, first = self._window
        self._window = (window_seconds + seconds, first)  # the evaluation is not part of the steps' pace
        self._revise(step)

    def _revise(self, step: int) -> None:
        # Never once the last step is reached: a later end would raise the rate again after the floor.
        if self.on_plan is None or should_stop(step, self.last_step):
            return
        self.last_step = plan_last_step(self.train_steps, step, self.budget_seconds, self.clock.seconds(),
                                   self.pace.seconds_per_step, self.pace.mean_eval_seconds(), self.save_every)
        self.on_plan(self.last_step)


class NonFiniteTrainingError(UserError):
    """Too many updates in a row were skipped because the loss or a gradient was not finite."""


@dataclasses.dataclass
class NonFiniteGuard:
    """Counts updates skipped for a non-finite loss or gradient; too many in a row end the run.

    Nothing is saved when stopping: the skipped updates changed no variable, and the newest
    checkpoint is the last good state.
    """

    max_in_a_row: int
    skipped: int = 0
    in_a_row: int = 0

    def passed(self) -> None:
        self.in_a_row = 0

    def skip(self, failed_step: int, loss: float, newest_checkpoint: str | None) -> str:
        """Counts a skipped update and returns its log line; raises NonFiniteTrainingError after too many."""
        self.skipped += 1
        self.in_a_row += 1
        if self.in_a_row >= self.max_in_a_row:
            raise NonFiniteTrainingError(
                f"step {failed_step}: {self.in_a_row} updates in a row had a non-finite loss or gradient, "
                f"stopping (newest checkpoint: {newest_checkpoint or 'none yet'}); lower "
                f"train.learning_rate_constant, raise train.warmup_steps or check the training data, or raise "
                f"`max_nonfinite_steps`")
        return (f"step {failed_step}: loss {loss} or a gradient is not finite; update skipped "
                f"({self.in_a_row} in a row, {self.skipped} in this run)")


@dataclasses.dataclass
class Hooks:
    """What the loop calls; each gets the step just reached."""

    # After every update that was applied, with its result.
    updated: Callable[[int, StepResult], None]
    # Every log_every steps.
    log: Callable[[int], None]
    # At every save_every steps and at the last step: save, evaluate; returns whether to stop early.
    checkpoint: Callable[[int], bool]
    # After an update skipped for non-finite values (the step number it would have had, its loss).
    skipped: Callable[[int, float], None]


def run(take_step: Callable[[bool], StepResult], current_step: Callable[[], int], rules: StopRules,
        save_every: int, log_every: int, hooks: Hooks, stop: StopRequest, several_workers: bool) -> StopReason:
    """Updates until a stop rule, a signal or early stopping ends the run; returns which.

    Args:
      take_step: one update, given this process's stop vote; with several workers every one takes each
        step, and the step's `stop` says whether any of them voted to stop.
      several_workers: a worker that decides to stop early votes, so all stop after the same step.
    """
    stopping_early = False  # this worker's vote: it decided to stop early
    rules.start(current_step())
    while (reason := rules.reason(current_step())) is None:
        result = take_step(stop.requested or stopping_early)
        if result.stop:
            return StopReason.EARLY_STOPPING if stopping_early else StopReason.SIGNAL
        if result.skipped:
            hooks.skipped(current_step() + 1, result.loss)
            continue
        step = current_step()
        hooks.updated(step, result)
        rules.updated(step)
        if step % log_every == 0:
            rules.logged(step)  # first, so the line shows the plan this step's pace made
            hooks.log(step)
        if step % save_every == 0 or rules.reason(step) is not None:
            started = rules.clock.seconds()
            if hooks.checkpoint(step):
                if not several_workers:
                    return StopReason.EARLY_STOPPING
                stopping_early = True  # the others learn it from the next step's vote
            rules.evaluated(step, rules.clock.seconds() - started)
    return reason
