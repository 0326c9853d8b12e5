"""The training loop's stop rules, with scripted steps and an injected clock: no model is trained."""
import math

import pytest

from t2t_lite.training import loop
from t2t_lite.training.loop import NonFiniteGuard, NonFiniteTrainingError, StopReason, StopRules
from t2t_lite.training.signals import StopRequest
from t2t_lite.training.steps import StepResult
from t2t_lite.training.time_budget import TrainingClock


class Script:
    """A step function: each call is one update taking `seconds_per_step` on the clock, unless scripted otherwise.

    skip: steps (1-based calls) whose update is skipped; stop_at: the call whose result says some worker voted.
    """

    def __init__(self, seconds_per_step=1.0, skip=(), stop_at=None, signal_at=None):
        self.now, self.step, self.calls, self.votes = 0.0, 0, 0, []
        self.seconds_per_step, self.skip, self.stop_at, self.signal_at = seconds_per_step, set(skip), stop_at, signal_at
        self.request = StopRequest()
        self.events = []

    def take_step(self, vote):
        self.calls += 1
        self.votes.append(vote)
        self.now += self.seconds_per_step
        if self.calls == self.signal_at:
            self.request.signal_name = "SIGTERM"
        if vote or self.calls == self.stop_at:
            return StepResult(loss=1.0, tokens=10.0, stop=True, skipped=False)
        if self.calls in self.skip:
            return StepResult(loss=float("nan"), tokens=10.0, stop=False, skipped=True)
        self.step += 1
        return StepResult(loss=1.0, tokens=10.0, stop=False, skipped=False)

    def hooks(self, stop_after_checkpoint=None, eval_seconds=0.0):
        def checkpoint(step):
            self.events.append(("checkpoint", step))
            self.now += eval_seconds  # the save and its evaluation take time on the budget's clock
            return stop_after_checkpoint is not None and step >= stop_after_checkpoint

        return loop.Hooks(updated=lambda step, result: self.events.append(("updated", step, result)),
                          log=lambda step: self.events.append(("log", step)), checkpoint=checkpoint,
                          skipped=lambda step, loss: self.events.append(("skipped", step, loss)))


def run(script, train_steps=10, budget=0.0, save_every=4, log_every=2, several_workers=False, **hooks):
    clock = TrainingClock(lambda: script.now)
    clock.start()
    rules = StopRules(train_steps, budget, clock, save_every)
    return loop.run(script.take_step, lambda: script.step, rules, save_every, log_every, script.hooks(**hooks),
                    script.request, several_workers)


def test_steps_reached_checkpoints_at_every_save_point_and_at_the_end():
    script = Script()
    assert run(script, train_steps=10) is StopReason.STEPS
    assert script.step == 10
    updates = [event[1:] for event in script.events if event[0] == "updated"]
    assert updates == [(step, StepResult(loss=1.0, tokens=10.0, stop=False, skipped=False)) for step in range(1, 11)]
    assert [s for kind, s, *_ in script.events if kind == "checkpoint"] == [4, 8, 10]
    assert [s for kind, s, *_ in script.events if kind == "log"] == [2, 4, 6, 8, 10]


def test_the_time_budget_ends_the_run_at_the_step_that_spends_it_and_checkpoints_there():
    script = Script(seconds_per_step=1.5)
    assert run(script, train_steps=100, budget=10.0) is StopReason.TIME_BUDGET
    assert script.step == 7  # 6 steps are 9 s, the 7th reaches 10.5 s
    assert script.events[-1] == ("checkpoint", 7)


def test_early_stopping_ends_one_worker_at_once_and_several_after_one_more_voted_step():
    alone = Script()
    assert run(alone, train_steps=100, stop_after_checkpoint=8) is StopReason.EARLY_STOPPING
    assert alone.step == 8 and not any(alone.votes)
    together = Script()
    assert run(together, train_steps=100, several_workers=True, stop_after_checkpoint=8) is StopReason.EARLY_STOPPING
    assert together.step == 8 and together.votes[-1] is True and together.calls == 9


def test_a_signal_stops_after_the_current_step_and_another_workers_vote_reads_as_a_signal():
    signalled = Script(signal_at=3)
    assert run(signalled, train_steps=100) is StopReason.SIGNAL
    assert signalled.step == 3 and signalled.votes == [False, False, False, True]
    voted = Script(stop_at=5)
    assert run(voted, train_steps=100) is StopReason.SIGNAL and voted.step == 4


def test_skipped_updates_are_reported_with_the_step_they_would_have_been_and_not_counted():
    script = Script(skip={3, 4})
    assert run(script, train_steps=6) is StopReason.STEPS
    assert script.step == 6 and script.calls == 8
    skipped = [event[1:] for event in script.events if event[0] == "skipped"]
    assert [step for step, _ in skipped] == [3, 3] and all(math.isnan(loss) for _, loss in skipped)


def test_a_run_that_has_reached_its_steps_takes_no_step():
    script = Script()
    script.step = 10
    assert run(script, train_steps=10) is StopReason.STEPS and script.calls == 0


def test_the_non_finite_guard_counts_in_a_row_and_stops_at_the_limit():
    guard = NonFiniteGuard(max_in_a_row=1)
    with pytest.raises(NonFiniteTrainingError, match=r"newest checkpoint: none yet\)"):
        guard.skip(1, float("nan"), None)
    guard = NonFiniteGuard(max_in_a_row=3)
    assert guard.skip(5, float("nan"), None).endswith("(1 in a row, 1 in this run)")
    guard.passed()
    assert guard.skip(7, float("inf"), "run/ckpt-6") == ("step 7: loss inf or a gradient is not finite; update "
                                                         "skipped (1 in a row, 2 in this run)")
    guard.skip(8, float("nan"), "run/ckpt-6")
    with pytest.raises(NonFiniteTrainingError, match=r"step 9: 3 updates in a row .*newest checkpoint: run/ckpt-6"):
        guard.skip(9, float("nan"), "run/ckpt-6")


class SlowFirstStep(Script):
    """The first update traces the step and takes `first_seconds`; the others take one second."""

    def __init__(self, first_seconds):
        super().__init__()
        self.first_seconds = first_seconds

    def take_step(self, vote):
        result = super().take_step(vote)
        if self.calls == 1:
            self.now += self.first_seconds - self.seconds_per_step
        return result


def test_the_first_pace_is_measured_early_and_without_the_first_steps_tracing():
    script, plans = SlowFirstStep(first_seconds=100.0), []
    clock = TrainingClock(lambda: script.now)
    clock.start()
    rules = StopRules(100_000, 1000.0, clock, save_every=1000,
                      on_plan=lambda last: plans.append((script.step, last)))
    # No progress line or save before the end: only the early pace can move the plan.
    reason = loop.run(script.take_step, lambda: script.step, rules, save_every=1000, log_every=1000,
                      hooks=script.hooks(), stop=script.request, several_workers=False)
    # Nothing measured at the start; then planned once the FIRST_PACE_STEPS updates after the traced one were
    # timed, at 1 s a step: the budget leaves 1000 - 100 - 10 seconds, 890 more steps (a last save of no
    # measured cost yet), and the run ends there, on its budget.
    first_measured = 1 + loop.FIRST_PACE_STEPS
    assert plans == [(0, 100_000), (first_measured, first_measured + 890)]
    assert reason is StopReason.TIME_BUDGET and script.step == first_measured + 890 and script.now == 1000.0


def budgeted(script, train_steps=100_000, budget=100.0, save_every=10, log_every=5, eval_seconds=10.0):
    """loop.run under a time budget with an end-aware schedule: (reason, [(step, pace, last step) per plan])."""
    clock = TrainingClock(lambda: script.now)
    clock.start()
    plans = []
    rules = StopRules(train_steps, budget, clock, save_every,
                      on_plan=lambda last: plans.append((script.step, rules.pace.seconds_per_step, last)))
    reason = loop.run(script.take_step, lambda: script.step, rules, save_every, log_every,
                      script.hooks(eval_seconds=eval_seconds), script.request, several_workers=False)
    return reason, plans, rules


def test_the_plan_counts_every_save_and_evaluation_and_leaves_them_out_of_the_pace():
    script = Script()
    reason, plans, rules = budgeted(script)
    # 1 s a step, 10 s a save with its evaluation, one every 10 steps and one at the end: L + 10 * saves(L)
    # fits in 100 s at L = 50 (five saves); at 51 a sixth would not.
    assert reason is StopReason.TIME_BUDGET and script.step == 50 and script.now == 100.0
    assert [s for kind, s, *_ in script.events if kind == "checkpoint"] == [10, 20, 30, 40, 50]
    assert rules.pace.mean_eval_seconds() == 10.0
    # Every pace measured is the steps' own, though evaluations fell inside its windows.
    assert plans[0] == (0, None, 100_000) and {pace for _, pace, _ in plans[1:]} == {1.0}
    # Until the first evaluation was measured the saves cost nothing to the plan; from then on it holds.
    assert (10, 1.0, 50) in plans  # the plan made after the first evaluation
    assert {last for step, _, last in plans if step > 10} == {50}


def test_an_estimate_that_falls_short_ends_the_run_at_the_next_step():
    # Planned at 1 s a step, the steps take 10 s from step 31: the budget runs out before the plan's end, at
    # step 37 (30 + 7 * 10 = 100 s with no evaluation due), and the run ends one step later, at its floor.
    class SlowsDown(Script):
        def take_step(self, vote):
            self.seconds_per_step = 10.0 if self.step >= 30 else 1.0
            return super().take_step(vote)

    script = SlowsDown()
    reason, plans, _ = budgeted(script, save_every=1000, log_every=1000, eval_seconds=0.0)
    assert reason is StopReason.TIME_BUDGET and script.step == 38
    assert plans[-1] == (37, 1.0, 38)

    # Short by two steps: at 33/32 s a step from step 31, the budget runs out at step 98 (30 + 68 * 33/32 s)
    # where the plan said 100; the run still ends at the next step, 99.
    class SlowsALittle(Script):
        def take_step(self, vote):
            self.seconds_per_step = 33 / 32 if self.step >= 30 else 1.0
            return super().take_step(vote)

    script = SlowsALittle()
    reason, plans, _ = budgeted(script, save_every=1000, log_every=1000, eval_seconds=0.0)
    assert plans[1][2] == 100 and plans[-1] == (98, 1.0, 99) and script.step == 99


def test_a_run_that_ends_on_train_steps_says_so_with_an_end_aware_schedule():
    script = Script()
    reason, plans, _ = budgeted(script, train_steps=10, budget=0.0, eval_seconds=0.0)
    assert reason is StopReason.STEPS and script.step == 10 and {last for *_, last in plans} == {10}


def test_a_budget_spent_exactly_on_a_step_ends_the_run_there():
    script = Script(seconds_per_step=1.0)
    assert run(script, train_steps=100, budget=10.0) is StopReason.TIME_BUDGET
    assert script.step == 10 and script.events[-1] == ("checkpoint", 10)
    half_a_second = Script(seconds_per_step=1.0)
    assert run(half_a_second, train_steps=100, budget=0.5) is StopReason.TIME_BUDGET and half_a_second.step == 1


def test_a_progress_line_on_the_step_that_measured_the_first_pace_plans_again_from_it():
    # The first pace is measured at step 11 (the ten steps after the traced one); a progress line at 11 too.
    script = Script()
    reason, plans, rules = budgeted(script, save_every=1000, log_every=11, eval_seconds=0.0)
    assert reason is StopReason.TIME_BUDGET and script.step == 100 and rules.pace.seconds_per_step == 1.0
    assert plans[1:3] == [(11, 1.0, 100), (11, 1.0, 100)]
