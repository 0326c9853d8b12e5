"""The training loop: updates until a stop rule says why the run ends.

The loop knows nothing of models or files: it takes a step function and hooks (progress, checkpoint),
so each stop rule is tested with a scripted step and an injected clock.
"""
import dataclasses
import enum
from collections.abc import Callable

from t2t_lite.errors import UserError
from t2t_lite.training.signals import StopRequest
from t2t_lite.training.steps import StepResult
from t2t_lite.training.time_budget import TrainingClock


class StopReason(enum.Enum):
    STEPS = "train_steps reached"
    TIME_BUDGET = "time budget spent"
    EARLY_STOPPING = "early stopping"
    SIGNAL = "signal"  # this process's, or another worker's stop request


@dataclasses.dataclass(frozen=True)
class StopRules:
    """When the run is over: at train_steps, or once the clock has counted the budget (0 = none)."""

    train_steps: int
    budget_seconds: float
    clock: TrainingClock

    def reason(self, step: int) -> StopReason | None:
        if step >= self.train_steps:
            return StopReason.STEPS
        if self.budget_seconds > 0 and self.clock.seconds() >= self.budget_seconds:
            return StopReason.TIME_BUDGET
        return None


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
                f"--max_nonfinite_steps")
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
    vote, stopping_early = False, False
    while (reason := rules.reason(current_step())) is None:
        result = take_step(stop.requested or vote)
        if result.stop:
            return StopReason.EARLY_STOPPING if stopping_early else StopReason.SIGNAL
        if result.skipped:
            hooks.skipped(current_step() + 1, result.loss)
            continue
        step = current_step()
        hooks.updated(step, result)
        if step % log_every == 0:
            hooks.log(step)
        if step % save_every == 0 or rules.reason(step) is not None:
            if hooks.checkpoint(step):
                if not several_workers:
                    return StopReason.EARLY_STOPPING
                stopping_early = vote = True  # the others learn it from the next step's vote
    return reason
