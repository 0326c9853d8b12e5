"""The planned last step: against brute force, and in a simulated training loop with scripted step times."""
import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.training.last_step import LastStepPlan, plan_last_step, saves_after, should_stop
from t2t_lite.training.loop import FIRST_PACE_STEPS
from t2t_lite.training.schedules import LinearDecaySchedule, WarmupStableDecaySchedule, set_last_step


def brute_force_last_step(train_steps, step, budget, seconds_trained, seconds_per_step, eval_seconds, save_every):
    """The largest L in step+1..train_steps whose steps and saves fit in the budget, by trying every L."""
    def saves(last):
        return sum(1 for s in range(step + 1, last + 1) if (save_every and s % save_every == 0) or s == last)

    fitting = [last for last in range(step + 1, train_steps + 1)
               if (last - step) * seconds_per_step + saves(last) * eval_seconds <= budget - seconds_trained]
    return max(fitting, default=step + 1)


def test_plan_is_the_largest_last_step_that_fits():
    rng = np.random.default_rng(0)
    for _ in range(200):
        train_steps = int(rng.integers(2, 600))
        step = int(rng.integers(0, train_steps))
        args = {"budget": float(rng.uniform(1, 900)), "seconds_trained": float(rng.uniform(0, 400)),
                "seconds_per_step": float(rng.uniform(0.1, 3)),
                "eval_seconds": float(rng.choice([0, rng.uniform(0, 60)])),
                "save_every": int(rng.choice([0, 1, 7, 100]))}
        plan = plan_last_step(train_steps, step, args["budget"], args["seconds_trained"], args["seconds_per_step"],
                              args["eval_seconds"], args["save_every"])
        assert plan.last_step == brute_force_last_step(train_steps, step, **args), (train_steps, step, args)
        assert plan.saves == saves_after(step, plan.last_step, args["save_every"])
        assert plan.limited_by == ("steps" if plan.last_step == train_steps else "time")


def test_without_a_budget_the_last_step_is_train_steps():
    assert plan_last_step(5000, 1234, seconds_trained=99.0, seconds_per_step=2.0) == LastStepPlan(last_step=5000)


def test_a_spent_budget_never_plans_a_step_already_taken():
    plan = plan_last_step(5000, 1234, budget_seconds=100.0, seconds_trained=150.0, seconds_per_step=2.0)
    assert plan.last_step == 1235 and should_stop(1235, plan) and not should_stop(1234, plan)
    assert plan_last_step(5000, 5000, budget_seconds=100.0, seconds_trained=150.0).last_step == 5000


def test_nothing_measured_plans_train_steps_then_the_runs_average_pace():
    assert plan_last_step(5000, 0, budget_seconds=600.0).last_step == 5000
    # Resumed from a checkpoint without measurements: 300 s for 100 steps, 3 s a step, evaluations included.
    assert plan_last_step(5000, 100, budget_seconds=600.0, seconds_trained=300.0).last_step == 200


def test_saves_after_counts_multiples_and_the_final_save():
    for step, last, every in [(0, 1000, 250), (0, 999, 250), (250, 251, 250), (3, 3, 5), (10, 40, 0)]:
        expected = sum(1 for s in range(step + 1, last + 1) if (every and s % every == 0) or s == last)
        assert saves_after(step, last, every) == expected


@dataclasses.dataclass
class Checkpoint:
    """What the simulated loop saves: the step, the clock, and the plan's two measurements."""

    step: int = 0
    seconds: float = 0.0
    seconds_per_step: float | None = None
    eval_seconds: float = 0.0
    evaluations: int = 0


@dataclasses.dataclass
class SimulatedRun:
    """Scripted timings of a run under a time budget."""

    budget: float = 1000.0
    step_seconds: Callable[[int], float] = lambda step: 1.0  # the duration of update `step`
    eval_cost: float = 20.0  # one save with its evaluation
    train_steps: int = 100_000
    save_every: int = 250
    log_every: int = 50
    schedule: str = "linear_decay"
    warmup_fraction: float = 0.0


@dataclasses.dataclass
class Outcome:
    rates: dict  # step -> the learning rate that update used
    state: Checkpoint  # where the process ended, its clock including the evaluations it finished
    saved: Checkpoint  # its newest checkpoint


def simulate(run: SimulatedRun, resume_from: Checkpoint | None = None, stop_at: int | None = None,
             kill_after_saving: int | None = None) -> Outcome:
    """The training loop's use of the plan (no model): what the trainer does, in the same order.

    stop_at: a signal at that step: save (no evaluation) and stop. kill_after_saving: the process dies
    after the save at that step, before its evaluation.
    """
    schedule_class = LinearDecaySchedule if run.schedule == "linear_decay" else WarmupStableDecaySchedule
    schedule = schedule_class(d_model=512, warmup_steps=100, last_step=run.train_steps,
                              warmup_fraction=run.warmup_fraction)
    rate = tf.function(schedule, input_signature=[tf.TensorSpec([], tf.int64)])
    state = dataclasses.replace(resume_from or Checkpoint())
    saved = dataclasses.replace(state)

    def revise() -> LastStepPlan:
        plan = plan_last_step(run.train_steps, state.step, run.budget, state.seconds, state.seconds_per_step,
                              state.eval_seconds, run.save_every)
        set_last_step(schedule, plan.last_step)
        return plan

    plan, rates, window_steps, window_seconds = revise(), {}, 0, 0.0
    traced, own_pace = False, False  # this process: its first update taken, its pace measured
    while not should_stop(state.step, plan):
        rates[state.step + 1] = float(rate(tf.constant(state.step, tf.int64)))
        seconds = run.step_seconds(state.step + 1)
        state.step, state.seconds = state.step + 1, state.seconds + seconds
        window_steps, window_seconds = window_steps + 1, window_seconds + seconds
        measured = state.step % run.log_every == 0
        if not own_pace:  # the first pace: FIRST_PACE_STEPS updates after the first (which traces)
            if not traced:
                traced, window_steps, window_seconds = True, 0, 0.0
            elif window_steps >= FIRST_PACE_STEPS:
                measured = True
        if measured and window_steps:
            state.seconds_per_step, window_steps, window_seconds = window_seconds / window_steps, 0, 0.0
            own_pace = True
        if state.step == stop_at:
            return Outcome(rates, state, dataclasses.replace(state))
        ending = should_stop(state.step, plan)
        if state.step % run.save_every == 0 or ending:
            saved = dataclasses.replace(state)
            if state.step == kill_after_saving:
                return Outcome(rates, state, saved)
            state.seconds += run.eval_cost
            state.evaluations += 1
            state.eval_seconds += (run.eval_cost - state.eval_seconds) / state.evaluations
            window_steps, window_seconds, measured = 0, 0.0, True  # evaluations stay out of the pace
        if measured and not ending:
            plan = revise()
    return Outcome(rates, state, saved)


def floor_rate(outcome: Outcome) -> float:
    return outcome.rates[max(outcome.rates)]


@pytest.mark.parametrize("schedule", ["linear_decay", "wsd"])
def test_a_budgeted_run_ends_at_its_plan_with_the_rate_at_zero(schedule):
    # Steps alternate 0.75 s and 1.25 s; the budget is 1000 s; each save with its evaluation costs 20 s.
    run = SimulatedRun(step_seconds=lambda step: 0.75 if step % 2 else 1.25, schedule=schedule)
    outcome = simulate(run)
    last = max(outcome.rates)
    # Saves at 250, 500, 750 and the last step: L + 4 * 20 <= 1000 at 1 s a step.
    assert last == 920 and outcome.saved.step == 920
    assert outcome.rates[last] == 0.0 and max(outcome.rates.values()) > 0.0
    assert all(rate > 0 for step, rate in outcome.rates.items() if step < last)
    assert outcome.state.seconds == pytest.approx(run.budget, abs=1.25)  # the last evaluation ends on time


def test_evaluations_are_accounted_for():
    quick = simulate(SimulatedRun(eval_cost=0.0))
    slow = simulate(SimulatedRun(eval_cost=50.0))
    # 1 s a step: 1000 steps without evaluation costs; with 50 s ones, L + 50 * saves(L) <= 1000.
    assert (max(quick.rates), max(slow.rates)) == (1000, 800)
    assert slow.state.seconds == pytest.approx(1000.0) and quick.state.seconds == pytest.approx(1000.0)
    assert floor_rate(quick) == floor_rate(slow) == 0.0


def test_a_slowing_run_meets_its_budget_within_one_log_interval():
    # The pace drops from 1 s to 1.3 s a step at step 400; each revision measures the last log interval.
    run = SimulatedRun(step_seconds=lambda step: 1.0 if step <= 400 else 1.3)
    outcome = simulate(run)
    assert floor_rate(outcome) == 0.0
    assert abs(outcome.state.seconds - run.budget) <= run.log_every * 0.3


def test_without_a_budget_the_run_ends_at_train_steps_with_the_rate_at_zero():
    outcome = simulate(SimulatedRun(budget=0.0, train_steps=300))
    assert max(outcome.rates) == 300 and floor_rate(outcome) == 0.0


@pytest.mark.parametrize("warmup_fraction", [0.0, 0.1])
@pytest.mark.parametrize("schedule", ["linear_decay", "wsd"])
def test_a_run_stopped_and_resumed_follows_the_same_schedule(schedule, warmup_fraction):
    run = SimulatedRun(step_seconds=lambda step: 0.5, schedule=schedule, budget=600.0, warmup_fraction=warmup_fraction)
    whole = simulate(run)
    first = simulate(run, stop_at=333)  # a signal between two log lines: saved without evaluating
    second = simulate(run, resume_from=first.saved)
    assert max(first.rates) == 333 and min(second.rates) == 334
    assert {**first.rates, **second.rates} == whole.rates
    assert second.state.seconds == whole.state.seconds and floor_rate(second) == 0.0


def test_a_run_with_uneven_steps_resumes_on_the_same_schedule_within_the_estimates_error():
    run = SimulatedRun(step_seconds=lambda step: 0.75 if step % 2 else 1.25)
    whole = simulate(run)
    first = simulate(run, stop_at=333)
    second = simulate(run, resume_from=first.saved)
    resumed = {**first.rates, **second.rates}
    last = max(whole.rates)
    assert abs(max(resumed) - last) <= 1 and floor_rate(second) == 0.0
    peak = 512**-0.5 * 100**-0.5
    common = sorted(set(resumed) & set(whole.rates))[:-1]
    # The resumed run measures its first pace over steps 335-344 (the update after the resume traces and is
    # left out): an even number of alternating steps, 1.0 s a step as in the whole run. So the plans differ
    # by at most one step (float rounding), which moves a rate by at most one step of the decay.
    one_step = peak / (last - 100 - 1) * 1.01
    differences = np.abs(np.array([resumed[s] for s in common]) - [whole.rates[s] for s in common])
    assert np.all(differences <= one_step)


def test_a_run_killed_after_a_save_plans_with_the_time_its_clock_kept():
    run = SimulatedRun()
    whole = simulate(run)
    first = simulate(run, kill_after_saving=500)  # the evaluation at 500 is lost, and so are its 20 s
    second = simulate(run, resume_from=first.saved)
    assert max(second.rates) == max(whole.rates) + 20 and floor_rate(second) == 0.0
    assert second.state.seconds == pytest.approx(run.budget)  # as its clock counts


def test_a_checkpoint_without_measurements_resumes_at_the_runs_average_pace():
    run = SimulatedRun(step_seconds=lambda step: 0.75 if step % 2 else 1.25)
    first = simulate(run, stop_at=333)
    old = dataclasses.replace(first.saved, seconds_per_step=None, eval_seconds=0.0, evaluations=0)
    second = simulate(run, resume_from=old)
    assert floor_rate(second) == 0.0
    assert abs(second.state.seconds - run.budget) <= 1.25
