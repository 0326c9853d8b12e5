"""The planned last step: against brute force, and in the real training loop with scripted updates and clock."""
import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.training import loop
from t2t_lite.training.last_step import plan_last_step, saves_after, should_stop
from t2t_lite.training.loop import StopReason, StopRules
from t2t_lite.training.schedules import LinearDecaySchedule, WarmupStableDecaySchedule, set_last_step
from t2t_lite.training.signals import StopRequest
from t2t_lite.training.steps import StepResult
from t2t_lite.training.time_budget import PaceRecord, TrainingClock


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
        last = plan_last_step(train_steps, step, args["budget"], args["seconds_trained"], args["seconds_per_step"],
                              args["eval_seconds"], args["save_every"])
        assert last == brute_force_last_step(train_steps, step, **args), (train_steps, step, args)


def test_without_a_budget_the_last_step_is_train_steps():
    assert plan_last_step(5000, 1234, seconds_trained=99.0, seconds_per_step=2.0) == 5000


def test_a_spent_budget_never_plans_a_step_already_taken():
    last = plan_last_step(5000, 1234, budget_seconds=100.0, seconds_trained=150.0, seconds_per_step=2.0)
    assert last == 1235 and should_stop(1235, last) and not should_stop(1234, last)
    assert plan_last_step(5000, 5000, budget_seconds=100.0, seconds_trained=150.0) == 5000


def test_the_defaults_are_no_seconds_trained_and_only_the_final_save():
    # 600 s left at 2 s a step, and one final save of 10 s: (L - 100) * 2 + 10 <= 600.
    assert plan_last_step(5000, 100, budget_seconds=600.0, seconds_per_step=2.0, eval_seconds=10.0) == 395
    assert plan_last_step(0, 0) == 0


def test_a_run_plans_from_its_average_pace_only_once_it_has_one():
    # Nothing to estimate from: no step yet (whatever the clock), or no second counted (whatever the saves cost).
    assert plan_last_step(5000, 0, budget_seconds=100.0, seconds_trained=5.0) == 5000
    assert plan_last_step(5000, 10, budget_seconds=100.0, eval_seconds=1000.0, save_every=1) == 5000
    # One step in half a second: 99.5 s left at 0.5 s a step.
    assert plan_last_step(5000, 1, budget_seconds=100.0, seconds_trained=0.5) == 200


def test_nothing_measured_plans_train_steps_then_the_runs_average_pace():
    assert plan_last_step(5000, 0, budget_seconds=600.0) == 5000
    # Resumed from a checkpoint without measurements: 300 s for 100 steps, 3 s a step, evaluations included.
    assert plan_last_step(5000, 100, budget_seconds=600.0, seconds_trained=300.0) == 200


def test_saves_after_counts_multiples_and_the_final_save():
    for step, last, every in [(0, 1000, 250), (0, 999, 250), (250, 251, 250), (3, 3, 5), (10, 40, 0)]:
        expected = sum(1 for s in range(step + 1, last + 1) if (every and s % every == 0) or s == last)
        assert saves_after(step, last, every) == expected


@dataclasses.dataclass
class ScriptedRun:
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
    step: int  # where the process ended
    seconds: float  # its clock, including the evaluations it finished
    reason: StopReason | None  # None: killed


class Killed(Exception):
    """The process died (after a save, before its evaluation)."""


def train(run: ScriptedRun, directory, stop_after: int | None = None,
          kill_after_saving: int | None = None) -> Outcome:
    """The real loop (loop.run, StopRules, TrainingClock, PaceRecord, the schedule) with scripted updates.

    No model: an update moves the step and the clock. Each save writes the step, the clock and the pace record
    to `directory` with tf.train.Checkpoint, and a process restores them from the newest, as the trainer does.
    stop_after: a signal after that update (the next one is applied, then saved without evaluating, as the
    trainer does). kill_after_saving: the process dies after the save at that step, before its evaluation.
    """
    schedule_class = LinearDecaySchedule if run.schedule == "linear_decay" else WarmupStableDecaySchedule
    schedule = schedule_class(d_model=512, warmup_steps=100, last_step=run.train_steps,
                              warmup_fraction=run.warmup_fraction)
    rate = tf.function(schedule, input_signature=[tf.TensorSpec([], tf.int64)])
    now = [5000.0]  # a new process's monotonic clock starts anywhere
    step = tf.Variable(0, dtype=tf.int64)
    clock, pace = TrainingClock(lambda: now[0]), PaceRecord()
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(step=step, clock=clock.variable, pace=pace),
                                         str(directory), max_to_keep=2)
    if manager.latest_checkpoint:
        manager.checkpoint.restore(manager.latest_checkpoint).expect_partial()  # an old one lacks the pace
    rules = StopRules(run.train_steps, run.budget, clock, run.save_every,
                      on_plan=lambda last: set_last_step(schedule, last), pace=pace)
    request, rates = StopRequest(), {}

    def take_step(vote: bool) -> StepResult:
        rates[int(step) + 1] = float(rate(step))
        step.assign_add(1)
        now[0] += run.step_seconds(int(step))
        if int(step) == stop_after:
            request.signal_name = "SIGTERM"
        return StepResult(loss=1.0, tokens=1.0, stop=vote, skipped=False)

    def checkpoint(at: int) -> bool:
        clock.record()
        manager.save(checkpoint_number=at)
        if at == kill_after_saving:
            raise Killed
        now[0] += run.eval_cost
        return False

    hooks = loop.Hooks(updated=lambda at, result: None, log=lambda at: None, checkpoint=checkpoint,
                       skipped=lambda at, loss: None)
    clock.start()
    try:
        reason = loop.run(take_step, lambda: int(step), rules, run.save_every, run.log_every, hooks, request,
                          several_workers=False)
    except Killed:
        return Outcome(rates, int(step), clock.seconds(), None)
    if reason is StopReason.SIGNAL:
        clock.record()
        manager.save(checkpoint_number=int(step))
    return Outcome(rates, int(step), clock.seconds(), reason)


def floor_rate(outcome: Outcome) -> float:
    return outcome.rates[max(outcome.rates)]


@pytest.mark.parametrize("schedule", ["linear_decay", "wsd"])
def test_a_budgeted_run_ends_at_its_plan_with_the_rate_at_zero(schedule, tmp_path):
    # Steps alternate 0.75 s and 1.25 s; the budget is 1000 s; each save with its evaluation costs 20 s.
    run = ScriptedRun(step_seconds=lambda step: 0.75 if step % 2 else 1.25, schedule=schedule)
    outcome = train(run, tmp_path)
    last = max(outcome.rates)
    # Saves at 250, 500, 750 and the last step: L + 4 * 20 <= 1000 at 1 s a step.
    assert last == 920 and outcome.step == 920 and tf.train.latest_checkpoint(str(tmp_path)).endswith("-920")
    assert outcome.rates[last] == 0.0 and max(outcome.rates.values()) > 0.0
    assert all(rate > 0 for step, rate in outcome.rates.items() if step < last)
    assert outcome.seconds == pytest.approx(run.budget, abs=1.25)  # the last evaluation ends on time


def test_evaluations_are_accounted_for(tmp_path):
    quick = train(ScriptedRun(eval_cost=0.0), tmp_path / "quick")
    slow = train(ScriptedRun(eval_cost=50.0), tmp_path / "slow")
    # 1 s a step: 1000 steps without evaluation costs; with 50 s ones, L + 50 * saves(L) <= 1000.
    assert (max(quick.rates), max(slow.rates)) == (1000, 800)
    assert slow.seconds == pytest.approx(1000.0) and quick.seconds == pytest.approx(1000.0)
    assert floor_rate(quick) == floor_rate(slow) == 0.0


def test_a_slowing_run_meets_its_budget_within_one_log_interval(tmp_path):
    # The pace drops from 1 s to 1.3 s a step at step 400; each revision measures the last log interval.
    run = ScriptedRun(step_seconds=lambda step: 1.0 if step <= 400 else 1.3)
    outcome = train(run, tmp_path)
    assert floor_rate(outcome) == 0.0
    assert abs(outcome.seconds - run.budget) <= run.log_every * 0.3


def test_without_a_budget_the_run_ends_at_train_steps_with_the_rate_at_zero(tmp_path):
    outcome = train(ScriptedRun(budget=0.0, train_steps=300), tmp_path)
    assert max(outcome.rates) == 300 and outcome.reason is StopReason.STEPS and floor_rate(outcome) == 0.0


@pytest.mark.parametrize("warmup_fraction", [0.0, 0.1])
@pytest.mark.parametrize("schedule", ["linear_decay", "wsd"])
def test_a_run_stopped_and_resumed_follows_the_same_schedule(schedule, warmup_fraction, tmp_path):
    run = ScriptedRun(step_seconds=lambda step: 0.5, schedule=schedule, budget=600.0, warmup_fraction=warmup_fraction)
    whole = train(run, tmp_path / "whole")
    first = train(run, tmp_path / "resumed", stop_after=332)  # stops at 333, between two log lines: no evaluation
    second = train(run, tmp_path / "resumed")
    assert first.reason is StopReason.SIGNAL and max(first.rates) == 333 and min(second.rates) == 334
    assert {**first.rates, **second.rates} == whole.rates
    assert second.seconds == whole.seconds and floor_rate(second) == 0.0


def test_a_run_with_uneven_steps_resumes_on_the_same_schedule_within_the_estimates_error(tmp_path):
    run = ScriptedRun(step_seconds=lambda step: 0.75 if step % 2 else 1.25)
    whole = train(run, tmp_path / "whole")
    first = train(run, tmp_path / "resumed", stop_after=332)
    second = train(run, tmp_path / "resumed")
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


def test_a_run_killed_after_a_save_plans_with_the_time_its_clock_kept(tmp_path):
    run = ScriptedRun()
    whole = train(run, tmp_path / "whole")
    first = train(run, tmp_path / "resumed", kill_after_saving=500)  # the evaluation at 500 is lost, and its 20 s
    second = train(run, tmp_path / "resumed")
    assert first.reason is None and max(second.rates) == max(whole.rates) + 20 and floor_rate(second) == 0.0
    assert second.seconds == pytest.approx(run.budget)  # as its clock counts


def test_a_checkpoint_without_measurements_resumes_at_the_runs_average_pace(tmp_path):
    run = ScriptedRun(step_seconds=lambda step: 0.75 if step % 2 else 1.25)
    train(run, tmp_path, stop_after=332)
    # As a checkpoint written before the pace was kept: the step and the clock only.
    step, seconds = tf.Variable(0, dtype=tf.int64), tf.Variable(0.0, dtype=tf.float64)
    tf.train.Checkpoint(step=step, clock=seconds).restore(tf.train.latest_checkpoint(str(tmp_path))).expect_partial()
    old = tmp_path / "old"
    tf.train.CheckpointManager(tf.train.Checkpoint(step=step, clock=seconds), str(old), 1).save(int(step))
    second = train(run, old)
    assert min(second.rates) == 334 and floor_rate(second) == 0.0
    assert abs(second.seconds - run.budget) <= 1.25
