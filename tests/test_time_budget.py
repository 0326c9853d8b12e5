"""The training time budget (--train_minutes) and checkpoints for averaging taken at the end of the run.

The trainer's clock is injected: each step takes exactly SECONDS_PER_STEP, so the stop and the points
of the schedule fall on known steps.
"""
import json
import os
import signal

import keras
import numpy as np
import pytest
import tensorflow as tf

import t2t_lite.hparams  # noqa: F401
import t2t_lite.problems  # noqa: F401
from t2t_lite import config
from t2t_lite.errors import UserError
from t2t_lite.models import build_model
from t2t_lite.registry import hparams_sets
from t2t_lite.run_dir import RunDir, RunSpec, save_spec
from t2t_lite import run_dir
from t2t_lite.training.averaging_schedule import (AveragingSchedule, AveragingSources, averaging_points,
                                                  averaging_steps, sources_manager)
from t2t_lite.training.time_budget import TrainingClock
from t2t_lite.training.run_config import RunConfig, resolve_for
from t2t_lite.training.loop import StopReason
from t2t_lite.training.trainer import Trainer
from small_training import TINY, small_problem

SECONDS_PER_STEP = 10.0


def make_trainer(output_dir, train_steps, log=lambda line: None, span=0.5, average_last=3, more_overrides="",
                 clock=None, **run_options):
    # The smallest set-up (small_training.py): what these tests check depends on the injected clock and the
    # trainer's bookkeeping, not on the model's size. Adam still moves each weight by ~8e-5 a step, far beyond
    # allclose's tolerance, so the averaged sources differ.
    problem = small_problem()
    overrides = f"{TINY},average_last_checkpoints={average_last},average_span={span}{more_overrides}"
    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(), overrides)
    run_dir.ensure_writable(RunDir(str(output_dir)))
    save_spec(RunDir(str(output_dir)), RunSpec("algorithmic_reverse", "transformer_tiny", overrides, hparams))
    options = dict(eval_steps=1, save_checkpoints_steps=4, keep_checkpoint_max=1, log_every_steps=1,
                   random_seed=7, memory_probe=False, eval_bleu_sentences=0)
    options.update(run_options)
    run = RunConfig(mixed_precision="none", output_dir=str(output_dir), train_steps=train_steps, **options)
    box = {}
    # By default time advances only with steps: evaluation and saving take no time on this clock.
    trainer = Trainer(problem, hparams, resolve_for(run, problem, hparams, log=log), log=log,
                      clock=clock or (lambda: box["trainer"].step * SECONDS_PER_STEP))
    box["trainer"] = trainer
    return trainer


def model_weights(hparams, path):
    model = build_model(hparams)
    tf.train.Checkpoint(model=model).restore(str(path)).expect_partial()
    return [w.numpy() for w in model.weights if keras.backend.is_float_dtype(w.dtype)]


def test_averaging_points_cover_the_last_span_and_end_at_the_end():
    assert averaging_points(1000.0, 0.1, 5) == pytest.approx([920, 940, 960, 980, 1000])
    assert averaging_points(60.0, 1.0, 1) == [60.0]
    # Steps round up and never repeat: 1620 steps, the last 10%, 5 checkpoints.
    assert averaging_steps(1620, 0.1, 5) == [1491, 1523, 1556, 1588, 1620]
    assert averaging_steps(4, 0.1, 5) == [4]


def test_schedule_is_due_once_per_crossing_and_skips_points_already_passed():
    schedule = AveragingSchedule([40.0, 50.0, 60.0], position=0.0)
    assert [schedule.due(t) for t in (35, 40, 45, 49.9, 61)] == [False, True, False, False, True]
    assert not schedule.due(70)  # both later points were crossed by one step: one save
    resumed = AveragingSchedule([40.0, 50.0, 60.0], position=50.0)
    assert [resumed.due(t) for t in (55, 60)] == [False, True]


def test_averaging_sources_are_saved_at_each_crossing_and_once_per_step(tmp_path):
    variable = tf.Variable(0.0)
    sources = AveragingSources([2.0, 4.0], position=0.0, checkpoint=tf.train.Checkpoint(v=variable),
                               sources=RunDir(str(tmp_path)), count=5, current_step=0)
    for step in (1, 2, 3, 4):
        variable.assign(float(step))
        sources.save_if_due(float(step), step)
    variable.assign(40.0)
    sources.save(4)  # the end of training fell on the last point: step 4 is not saved again
    variable.assign(5.0)
    sources.save(5)
    assert sources.run_dir == RunDir(str(tmp_path))
    assert [os.path.basename(p) for p in sources.manager.checkpoints] == ["ckpt-2", "ckpt-4", "ckpt-5"]
    restored = tf.Variable(-1.0)
    for step, value in ((2, 2.0), (4, 4.0), (5, 5.0)):
        tf.train.Checkpoint(v=restored).restore(str(tmp_path / f"ckpt-{step}")).assert_consumed()
        assert float(restored.numpy()) == value


def test_training_clock_adds_this_process_seconds_to_the_restored_ones():
    now = [100.0]
    training_clock = TrainingClock(lambda: now[0])
    training_clock.variable.assign(30.0)  # as restored from a checkpoint
    training_clock.start()
    now[0] = 112.5
    assert training_clock.seconds() == 42.5
    training_clock.record()
    assert float(training_clock.variable.numpy()) == 42.5


# 6.5 steps' worth: the paper's schedule trains on to step 7, where the clock has counted the budget; a planned
# last step (what end-aware schedules have) would be step 6, the last that fits.
BUDGET_MINUTES = 6.5 * SECONDS_PER_STEP / 60


@pytest.fixture(scope="module")
def budgeted_run(tmp_path_factory):
    """A run with the paper's schedule, BUDGET_MINUTES at 10 s a step, keeping one regular checkpoint:
    (trainer, output_dir, log lines, what train() returned)."""
    output_dir, lines = tmp_path_factory.mktemp("budgeted"), []
    trainer = make_trainer(output_dir, train_steps=1000, log=lines.append, train_minutes=BUDGET_MINUTES)
    reason = trainer.train()
    return trainer, output_dir, lines, reason


def test_budget_stops_saves_and_averages_the_end_whatever_keep_checkpoint_max(budgeted_run):
    trainer, run, lines, _ = budgeted_run
    # 65 s at 10 s a step: the budget is spent at step 7, the last 50% of it is 32.5-65 s, so the three
    # averaged checkpoints are those first past 43.3, 54.2 and 65 s: steps 5, 6 and 7.
    assert trainer.step == 7
    assert tf.train.latest_checkpoint(str(run)).endswith("ckpt-7")
    assert any("time budget of 1.08333 minutes spent at step 7" in line for line in lines)
    assert any("remaining ~0:00:55 of the time budget" in line for line in lines)
    assert any(line.startswith("trained steps 1-7: ") and "0:01:10 of training" in line for line in lines)
    # keep_checkpoint_max=1 left one regular checkpoint; the averaging sources are all there.
    assert tf.train.get_checkpoint_state(str(run)).all_model_checkpoint_paths == [str(run / "ckpt-7")]
    provenance = json.loads((run / "averaged" / "averaged.json").read_text())
    assert provenance["checkpoints"] == [f"average_sources/ckpt-{s}" for s in (5, 6, 7)]
    sources = [model_weights(trainer.hparams, run / "average_sources" / f"ckpt-{s}") for s in (5, 6, 7)]
    averaged = model_weights(trainer.hparams, run / "averaged" / "ckpt-7")
    for mean, *values in zip(averaged, *sources):
        np.testing.assert_allclose(mean, np.mean(values, axis=0), rtol=1e-5, atol=1e-7)
    assert not np.allclose(sources[0][0], sources[2][0])  # the sources differ, so the mean is a real test


def test_interrupted_budgeted_run_resumes_to_the_same_step_weights_and_average(budgeted_run, tmp_path):
    straight, straight_dir, _, _ = budgeted_run

    def interrupt_at_step_4(line):
        if line.startswith("step 4/"):
            os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C would; the trainer saves and returns

    first = make_trainer(tmp_path, train_steps=1000, log=interrupt_at_step_4, train_minutes=BUDGET_MINUTES)
    first.train()
    assert 4 <= first.step < 7
    assert not (tmp_path / "averaged").exists()
    lines = []
    second = make_trainer(tmp_path, train_steps=1000, log=lines.append, train_minutes=BUDGET_MINUTES)
    second.train()
    assert any("resumed from" in line and f"step {first.step}" in line for line in lines)
    # The seconds trained came back with the checkpoint: the budget ends at the same step.
    assert second.step == straight.step == 7
    assert second.clock.seconds() == straight.clock.seconds() == 70.0
    for a, b in zip(straight.model.weights, second.model.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    names = json.loads((tmp_path / "averaged" / "averaged.json").read_text())["checkpoints"]
    assert names == [f"average_sources/ckpt-{s}" for s in (5, 6, 7)]
    for a, b in zip(model_weights(straight.hparams, straight_dir / "averaged" / "ckpt-7"),
                    model_weights(straight.hparams, tmp_path / "averaged" / "ckpt-7")):
        np.testing.assert_array_equal(a, b)
    # A rerun finds the budget spent and trains nothing.
    rerun_lines = []
    rerun = make_trainer(tmp_path, train_steps=1000, log=rerun_lines.append, train_minutes=BUDGET_MINUTES)
    rerun.train()
    assert rerun.step == 7 and any("was spent by an earlier run" in line for line in rerun_lines)


def test_without_a_budget_the_span_is_a_fraction_of_train_steps(tmp_path):
    trainer = make_trainer(tmp_path, train_steps=10, span=0.3)
    trainer.train()
    provenance = json.loads((tmp_path / "averaged" / "averaged.json").read_text())
    assert provenance["checkpoints"] == [f"average_sources/ckpt-{s}" for s in (8, 9, 10)]


def test_sources_newer_than_the_resumed_step_are_dropped(tmp_path):
    variable = tf.Variable(1.0)
    checkpoint = tf.train.Checkpoint(v=variable)
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path), max_to_keep=5, checkpoint_name="ckpt")
    for step in (2, 4, 6):
        manager.save(checkpoint_number=step)
    # A process died after saving the step-6 source but before its next regular checkpoint (step 4).
    resumed = sources_manager(checkpoint, RunDir(str(tmp_path)), 5, current_step=4)
    assert [os.path.basename(p) for p in resumed.checkpoints] == ["ckpt-2", "ckpt-4"]
    assert not tf.io.gfile.glob(str(tmp_path / "ckpt-6.*"))
    # Resumed before every source: none is left, nor the state file naming them.
    assert sources_manager(checkpoint, RunDir(str(tmp_path)), 5, current_step=0).checkpoints == []
    assert not tf.io.gfile.exists(str(tmp_path / "checkpoint"))


def test_average_span_outside_0_to_1_and_a_negative_budget_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="average_span"):
        config.apply_overrides(hparams_sets.get("transformer_tiny")(), "average_span=1.5")
    with pytest.raises(UserError, match="`train_minutes`"):
        make_trainer(tmp_path, train_steps=10, train_minutes=-1.0)


# Each schedule once and each way of giving the warmup once, not their 4 pairs: the warmup's length is
# EndAwareSchedule's (warmup_length, from the planned last step with warmup_fraction) and the schedules
# differ only in their cooldown, so no pair tests what its two halves do not.
@pytest.mark.parametrize("schedule, warmup", [("linear_decay", "warmup_steps=3"),
                                              ("wsd", "warmup_steps=50,warmup_fraction=0.25")])
def test_an_end_aware_schedule_reaches_zero_at_the_last_step_the_budget_allows(tmp_path, schedule, warmup):
    lines = []
    # 12 steps of 10 s fit the budget; evaluations take no time on this clock. Either warmup is 3 steps.
    trainer = make_trainer(tmp_path, train_steps=1000, log=lines.append, average_last=0,
                           more_overrides=f",schedule={schedule},{warmup}", train_minutes=12 * SECONDS_PER_STEP / 60,
                           save_checkpoints_steps=5)
    assert trainer.train() is StopReason.TIME_BUDGET
    assert trainer.step == 12
    # Keras passes the updates applied before a step: update s used schedule(s - 1).
    rates = [float(trainer.schedule(s)) for s in range(trainer.step)]
    assert rates[-1] == 0.0 and max(rates) == pytest.approx(rates[2]) and rates[2] > 0  # the peak ends the warmup
    assert all(a >= b for a, b in zip(rates[2:], rates[3:]))
    # Every progress line shows the step the budget allows, the first too (from the pace up to it), not train_steps.
    planned = [line.split()[1] for line in lines if line.startswith("step ") and "/" in line.split()[1]]
    assert planned == [f"{s}/12" for s in range(1, 13)]
    assert f"learning rate: {max(rates):.3e} at its highest, 0.000e+00 on the last update (step 12)" in lines


def test_the_papers_schedule_still_stops_on_the_clock(budgeted_run):
    trainer, _, _, reason = budgeted_run
    assert trainer.hparams.train.schedule == "rsqrt"  # the paper's
    assert reason is StopReason.TIME_BUDGET and trainer.step == 7


class ScriptedClock:
    """The time a Trainer's budget is counted with, moved by its real updates and evaluations.

    Update s takes step_seconds(s); each save with its evaluation takes eval_seconds; a signal (as Ctrl-C
    would send) arrives after update stop_at. The learning rate each update used is recorded.
    """

    def __init__(self, step_seconds, eval_seconds, stop_at=None):
        self.now, self.step_seconds, self.eval_seconds, self.stop_at = 0.0, step_seconds, eval_seconds, stop_at
        self.rates = {}

    def __call__(self):
        return self.now

    def drive(self, trainer):
        take_step, evaluate = trainer.train_step, trainer.evaluator.evaluate_checkpoint

        def timed_step(iterator, vote):
            rate = float(trainer.optimizer.learning_rate)  # what this update applies
            result = take_step(iterator, vote)
            if not result.skipped:  # an update that carries a stop vote is applied too
                self.rates[trainer.step] = rate
                self.now += self.step_seconds(trainer.step)
                if trainer.step == self.stop_at:
                    os.kill(os.getpid(), signal.SIGINT)
            return result

        def timed_evaluation(step, checkpoint):
            self.now += self.eval_seconds
            return evaluate(step, checkpoint)

        trainer.train_step, trainer.evaluator.evaluate_checkpoint = timed_step, timed_evaluation
        return trainer


def test_a_budgeted_run_stopped_and_resumed_uses_the_learning_rate_of_an_uninterrupted_one(tmp_path):
    # The pace the plan of the last step was made from, and the evaluations' cost, come back with the
    # checkpoint: replanned at the resumed step they give the plan the uninterrupted run had there. Steps
    # slow from 1 s to 2 s at step 40, evaluations take 6 s: the run's average pace (what a resumed run
    # would otherwise plan from) is neither, and a new process has measured no evaluation yet.
    def step_seconds(step):
        return 1.0 if step <= 40 else 2.0

    options = dict(train_steps=1000, average_last=0, more_overrides=",schedule=linear_decay,warmup_fraction=0.1",
                   train_minutes=2.5, save_checkpoints_steps=10, log_every_steps=5)

    def budgeted(directory, clock):
        trainer = make_trainer(directory, **options, clock=clock)
        return clock.drive(trainer)

    whole_clock = ScriptedClock(step_seconds, eval_seconds=6.0)
    whole = budgeted(tmp_path / "whole", whole_clock)
    assert whole.train() is StopReason.TIME_BUDGET
    # Signalled after update 53, the run stops after the next one, between the saves at 50 and 60.
    first_clock = ScriptedClock(step_seconds, eval_seconds=6.0, stop_at=53)
    first = budgeted(tmp_path / "resumed", first_clock)
    assert first.train() is StopReason.SIGNAL and first.step == 54
    second_clock = ScriptedClock(step_seconds, eval_seconds=6.0)
    second_clock.now = 1000.0  # a new process's monotonic clock starts anywhere
    second = budgeted(tmp_path / "resumed", second_clock)
    assert second.train() is StopReason.TIME_BUDGET
    assert min(second_clock.rates) == 55 and whole.step > 60
    assert {**first_clock.rates, **second_clock.rates} == whole_clock.rates
    assert second.step == whole.step and second.clock.seconds() == whole.clock.seconds()
    assert whole_clock.rates[whole.step] == 0.0 and whole_clock.rates[whole.step - 1] > 0.0
