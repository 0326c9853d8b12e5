"""The trainer's progress line: the loss over the interval since the last line, elapsed and remaining time.

One step's loss jumps with its length bucket (short sentences are easier), so
the line shows the mean per target token over every step since the last line.
"""
import dataclasses
import time
from collections.abc import Callable


def clock(seconds: float) -> str:
    """Seconds as H:MM:SS, e.g. 3725.2 -> '1:02:05'."""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


@dataclasses.dataclass
class Progress:
    """Accumulates steps between progress lines.

    Args:
      first_step: the step this process starts training at (resumed runs start later).
      last_step: the step training ends at.
      now: the clock (time.perf_counter; tests pass their own).
    """

    first_step: int
    last_step: int
    now: Callable[[], float] = time.perf_counter

    def __post_init__(self):
        self.started = self.now()
        self.restart_window()

    def restart_window(self) -> None:
        """Starts a new interval: call after a line, and after time that is not training (evaluation)."""
        self.loss_sum = self.tokens = 0.0
        self.steps = 0
        self.window_start = self.now()

    def add(self, loss: float, tokens: float) -> None:
        """One step's mean loss over its `tokens` target tokens."""
        self.loss_sum += loss * tokens
        self.tokens += tokens
        self.steps += 1

    @property
    def mean_loss(self) -> float:
        """Loss per target token over the interval's steps."""
        return self.loss_sum / max(self.tokens, 1.0)

    def tokens_per_second(self) -> float:
        return self.tokens / max(self.now() - self.window_start, 1e-9)

    def times(self, step: int, last_step: int | None = None) -> str:
        """'elapsed H:MM:SS  remaining ~H:MM:SS' at `step`, the remaining time at this process's pace so far."""
        elapsed = self.now() - self.started
        done = step - self.first_step
        remaining = elapsed / done * ((last_step or self.last_step) - step) if done > 0 else 0.0
        return f"elapsed {clock(elapsed)}  remaining ~{clock(remaining)}"

    def line(self, step: int, last_step: int, learning_rate: float, seconds_trained: float,
             budget_seconds: float) -> str:
        """The progress line at `step` of `last_step` (as planned now): mean loss, the learning rate, throughput
        and the time left."""
        times = (f"trained {clock(seconds_trained)}  remaining ~{clock(max(budget_seconds - seconds_trained, 0.0))} "
                 f"of the time budget" if budget_seconds else self.times(step, last_step))
        return (f"step {step}/{last_step}  loss {self.mean_loss:.4f} (mean of {self.steps} steps)  "
                f"lr {learning_rate:.3e}  target tokens/s {self.tokens_per_second():,.0f}  {times}")
