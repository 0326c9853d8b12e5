"""Where training will end: the last step of a run under a step limit and, optionally, a time budget.

A schedule that reaches its floor at the last step (schedules.EndAwareSchedule) needs that step before
it is taken. Under train_steps alone it is train_steps. Under a time budget it is estimated:

- The cost of one more step is the loop's recent seconds per update, measured over its last log
  interval with evaluations and saves left out.
- Each save with its evaluation costs eval_seconds (the mean of those measured so far). The loop saves
  and evaluates at every multiple of save_every and once more at the last step; the plan reserves time
  for each of those between the current step and the last, the final one included, so the run's last
  evaluation ends within the budget as well (the budget counts evaluations and saves: time_budget.py).
- The last step is the largest L <= train_steps whose steps and saves fit in what is left of the budget:
  (L - step) * seconds_per_step + saves(step, L) * eval_seconds <= budget - seconds_trained.

The plan never ends before step + 1: a revision cannot end the run at a step already taken, whose rate
was not the floor. The loop revises the plan at every log interval, after every evaluation and once early,
after its first few updates (loop.FIRST_PACE_STEPS), while the run goes on (never once its last step is
reached), and stops when the step reaches the plan's last step (should_stop), not when the clock runs
out: the schedule then reaches its floor at the last step actually taken, and the budget is met within
the estimate's error over the steps since the last revision (at most one log interval).

Across a resume the seconds trained come back from the checkpoint's clock, so what is left of the budget
continues from there. Given the same measurements, a plan re-derived at the restored step equals the one
in force when the run stopped (with steady step times: no evaluation falls between the two, as each one
revises the plan). The trainer checkpoints those measurements beside the clock (time_budget.PaceRecord),
so a resumed run goes on with the schedule it had; its first pace after the resume is measured over the
steps since then, a shorter interval whose error the next log line corrects. Without them (a checkpoint
written before they were kept) it plans from the run's average pace, seconds trained / steps, which counts
past evaluations, until it has measured its own. Time the clock lost (a process killed after its last save,
the evaluation that followed it included) is not counted, so such a run plans lost_seconds /
seconds_per_step steps later and still ends within the budget as its clock counts it.
"""
import bisect


def plan_last_step(train_steps: int, step: int, budget_seconds: float = 0.0, seconds_trained: float = 0.0,
                   seconds_per_step: float | None = None, eval_seconds: float = 0.0,
                   save_every: int = 0) -> int:
    """The step training ends at, estimated as the module docstring says; pure and deterministic.

    Args:
      train_steps: the step limit.
      step: updates applied so far.
      budget_seconds: the time budget; 0 means none.
      seconds_trained: seconds the budget has counted so far (TrainingClock.seconds()).
      seconds_per_step: recent seconds per update, evaluations and saves excluded; None when this
        process has measured none yet: then the run's average, seconds_trained / step, is used.
      eval_seconds: seconds of one save with its evaluation (0 until one was measured).
      save_every: save_checkpoints_steps; 0 when only the final save is made.
    Returns:
      The last step: at least step + 1 while step < train_steps.
    """
    if not budget_seconds or step >= train_steps:
        return max(train_steps, 0)
    if seconds_per_step is None:
        if step == 0 or seconds_trained <= 0:
            return train_steps  # nothing to estimate from yet: the warmup comes first
        seconds_per_step = seconds_trained / step
    remaining = budget_seconds - seconds_trained

    def over_budget(last: int) -> bool:
        return (last - step) * seconds_per_step + saves_after(step, last, save_every) * eval_seconds > remaining

    # The cost grows with the last step: count, by bisection, the last steps that fit; at least step + 1.
    fitting = bisect.bisect_right(range(step + 1, train_steps + 1), False, key=over_budget)
    return step + max(fitting, 1)


def saves_after(step: int, last_step: int, save_every: int) -> int:
    """Saves (each with an evaluation) in steps step+1..last_step: every multiple of save_every and the last.

    >>> saves_after(0, 2500, 1000), saves_after(1000, 3000, 1000), saves_after(10, 20, 0)
    (3, 2, 1)
    """
    if last_step <= step:
        return 0
    # The regular saves (multiples of save_every before last_step), then the final one.
    return ((last_step - 1) // save_every - step // save_every if save_every > 0 else 0) + 1


def should_stop(step: int, last_step: int) -> bool:
    """The loop's stop rule: training ends at the planned last step, where the schedule reaches its floor."""
    return step >= last_step
