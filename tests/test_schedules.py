"""The learning-rate schedules against numpy references: the paper's, and the two that end at a last step."""
import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

import t2t_lite.hparams  # noqa: F401  (registers the sets)
from t2t_lite.config import apply_overrides
from t2t_lite.registry import hparams_sets
from t2t_lite.training.schedules import (EndAwareSchedule, LinearDecaySchedule, NoamSchedule, WarmupStableDecaySchedule,
                                         set_last_step)
from t2t_lite.training.steps import learning_rate_schedule, make_optimizer


def paper_lr(step, d_model, warmup, constant):
    return constant * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def rate_at(schedule, step):
    # Keras hands the schedule the number of updates already applied: update `step` sees step - 1.
    return float(schedule(np.int64(step - 1)))


@pytest.mark.parametrize("set_name, d_model, warmup, constant", [
    ("transformer_base", 512, 4000, 1.0),
    ("transformer_base_v3", 512, 8000, 2.0),
    ("transformer_big", 1024, 4000, 1.0),
])
@pytest.mark.parametrize("step", [1, 2, 1000, 3999, 4000, 4001, 8000, 100_000, 300_000])
def test_paper_sets_follow_the_papers_formula(set_name, d_model, warmup, constant, step):
    hparams = hparams_sets.get(set_name)()
    assert hparams.train.schedule == "rsqrt"
    schedule = learning_rate_schedule(hparams, last_step=10)  # rsqrt has no last step
    np.testing.assert_allclose(rate_at(schedule, step), paper_lr(step, d_model, warmup, constant), rtol=1e-6)


def test_paper_base_peak_value():
    schedule = learning_rate_schedule(hparams_sets.get("transformer_base")())
    # 512^-0.5 * 4000^-0.5 = 6.9877e-4 at the end of warmup.
    np.testing.assert_allclose(rate_at(schedule, 4000), 6.987712429686844e-4, rtol=1e-6)


def test_optimizer_uses_the_sets_adam_settings():
    optimizer = make_optimizer(hparams_sets.get("transformer_base_v3")())
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.997, 1e-9)


def linear_decay_lr(step, peak, warmup, last, floor):
    """Piecewise, for last > warmup: warmup line, then the straight line from (warmup, peak) to (last, floor)."""
    if step <= warmup:
        return peak * step / warmup
    if step >= last:
        return floor
    return floor + (peak - floor) * (last - step) / (last - warmup)


def wsd_lr(step, peak, warmup, last, cooldown_fraction, floor):
    """Piecewise, for a cooldown that starts after the warmup: warmup line, peak, then down to the floor."""
    cooldown = cooldown_fraction * last
    if step <= warmup:
        return peak * step / warmup
    if step <= last - cooldown:
        return peak
    if step >= last:
        return floor
    return floor + (peak - floor) * (last - step) / cooldown


def end_aware(schedule: str, last_step: int, floor_fraction: float = 0.0, overrides: str = ""):
    hparams = apply_overrides(hparams_sets.get("transformer_base")(),
                              f"schedule={schedule},min_learning_rate_fraction={floor_fraction}{overrides}")
    return learning_rate_schedule(hparams, last_step), hparams


PEAK = 512**-0.5 * 4000**-0.5  # transformer_base: the rsqrt schedule's peak
# Warmup, its end, one after, mid-decay, wsd's cooldown start (16000) and one after, the last step and after.
SAMPLED_STEPS = [1, 2000, 4000, 4001, 10_000, 16_000, 16_001, 18_000, 19_999, 20_000, 20_001, 30_000]


@pytest.mark.parametrize("floor_fraction", [0.0, 0.1])
@pytest.mark.parametrize("step", SAMPLED_STEPS)
def test_linear_decay_against_numpy(step, floor_fraction):
    schedule, _ = end_aware("linear_decay", 20_000, floor_fraction)
    expected = linear_decay_lr(step, PEAK, 4000, 20_000, floor_fraction * PEAK)
    np.testing.assert_allclose(rate_at(schedule, step), expected, rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize("floor_fraction", [0.0, 0.1])
@pytest.mark.parametrize("step", SAMPLED_STEPS)
def test_wsd_against_numpy(step, floor_fraction):
    schedule, _ = end_aware("wsd", 20_000, floor_fraction, ",cooldown_fraction=0.2")
    expected = wsd_lr(step, PEAK, 4000, 20_000, 0.2, floor_fraction * PEAK)
    np.testing.assert_allclose(rate_at(schedule, step), expected, rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize("last_step", [1000, 20_000])
@pytest.mark.parametrize("name", ["linear_decay", "wsd"])
def test_a_warmup_given_as_a_share_of_the_run_against_numpy(name, last_step):
    schedule, _ = end_aware(name, last_step, 0.0, ",warmup_fraction=0.1,cooldown_fraction=0.2")
    warmup = 0.1 * last_step
    for step in (1, warmup // 2, warmup - 1, warmup, warmup + 1, last_step // 2, 0.85 * last_step, last_step - 1,
                 last_step, last_step + 5):
        # The peak is still the one warmup_steps (4000) gives, whatever the warmup's length.
        expected = (linear_decay_lr(step, PEAK, warmup, last_step, 0.0) if name == "linear_decay"
                    else wsd_lr(step, PEAK, warmup, last_step, 0.2, 0.0))
        np.testing.assert_allclose(rate_at(schedule, int(step)), expected, rtol=1e-5, atol=1e-12)


def test_a_warmup_given_as_a_share_moves_with_the_last_step():
    schedule, _ = end_aware("linear_decay", 1000, 0.0, ",warmup_fraction=0.1")
    assert rate_at(schedule, 100) == pytest.approx(PEAK, rel=1e-6)
    set_last_step(schedule, 3000)  # a faster machine: the same share is 300 steps
    assert rate_at(schedule, 100) == pytest.approx(PEAK / 3, rel=1e-5)
    assert rate_at(schedule, 300) == pytest.approx(PEAK, rel=1e-6)


def test_rsqrt_ignores_the_warmup_fraction():
    paper = hparams_sets.get("transformer_base")()
    with_fraction = apply_overrides(paper, "warmup_fraction=0.5")
    assert [rate_at(learning_rate_schedule(with_fraction, 100), s) for s in (10, 4000, 9000)] == \
           [rate_at(learning_rate_schedule(paper, 100), s) for s in (10, 4000, 9000)]


def test_new_schedules_peak_where_rsqrt_peaks():
    paper = learning_rate_schedule(hparams_sets.get("transformer_base")())
    for name in ("linear_decay", "wsd"):
        schedule, _ = end_aware(name, 100_000)
        np.testing.assert_allclose(rate_at(schedule, 4000), rate_at(paper, 4000), rtol=1e-6)
        assert rate_at(schedule, 4000) == max(rate_at(schedule, s) for s in (3999, 4000, 4001, 50_000))


@pytest.mark.parametrize("name", ["linear_decay", "wsd"])
@pytest.mark.parametrize("last_step", [1, 2, 100, 3999, 4000, 4001, 4500, 1_000_000])
def test_floor_at_the_last_step_whatever_it_is(name, last_step):
    # Also runs that end before or around the end of warmup, where the cooldown meets the warmup line.
    for floor_fraction in (0.0, 0.1):
        schedule, _ = end_aware(name, last_step, floor_fraction)
        floor = floor_fraction * PEAK
        rates = [rate_at(schedule, s) for s in (last_step - 1, last_step, last_step + 1, last_step + 1000)]
        assert rates[1:] == pytest.approx([min(floor, PEAK * last_step / 4000)] * 3, rel=1e-5, abs=1e-12)
        if PEAK * (last_step - 1) / 4000 > floor:  # it came down to the floor in its last step
            assert rates[0] > rates[1]


def test_moving_the_last_step_changes_a_compiled_schedule_without_retracing():
    schedule, hparams = end_aware("linear_decay", 20_000)
    optimizer = make_optimizer(hparams, schedule)
    traces = []

    @tf.function
    def learning_rate():
        traces.append(1)
        return optimizer.learning_rate  # the schedule at the optimizer's iterations

    optimizer.iterations.assign(11_999)  # the rate update 12000 uses
    before = float(learning_rate())
    set_last_step(schedule, 36_000)
    after = float(learning_rate())
    np.testing.assert_allclose([before, after], [linear_decay_lr(12_000, PEAK, 4000, last, 0.0)
                                                 for last in (20_000, 36_000)], rtol=1e-5)
    assert len(traces) == 1


def test_set_last_step_leaves_the_papers_schedule_alone():
    schedule = learning_rate_schedule(hparams_sets.get("transformer_base")())
    before = rate_at(schedule, 5000)
    set_last_step(schedule, 5000)
    assert isinstance(schedule, NoamSchedule) and rate_at(schedule, 5000) == before


def test_the_constructors_defaults_are_the_papers_constant_a_fixed_warmup_a_floor_of_zero_and_a_fifth_to_cool():
    np.testing.assert_allclose(rate_at(NoamSchedule(512, 4000), 4000), PEAK, rtol=1e-6)
    linear, wsd = LinearDecaySchedule(512, 4000, 20_000), WarmupStableDecaySchedule(512, 4000, 20_000)
    for step in SAMPLED_STEPS:
        np.testing.assert_allclose(rate_at(linear, step), linear_decay_lr(step, PEAK, 4000, 20_000, 0.0),
                                   rtol=1e-5, atol=1e-12)
        np.testing.assert_allclose(rate_at(wsd, step), wsd_lr(step, PEAK, 4000, 20_000, 0.2, 0.0),
                                   rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize("name, last_step, overrides, warmup", [
    ("linear_decay", 5, ",warmup_fraction=0.1", 1),  # a tenth of 5 steps: the warmup is still one step
    ("linear_decay", 4001, "", 4000),  # one step left after the warmup: a cooldown of one step
    ("wsd", 5, ",warmup_fraction=0.2,cooldown_fraction=0.1", 1),  # a tenth of 5 steps: one step of cooldown
])
def test_the_warmup_and_the_cooldown_are_at_least_one_step(name, last_step, overrides, warmup):
    schedule, _ = end_aware(name, last_step, 0.0, overrides)
    for step in range(max(1, last_step - 5), last_step + 2):
        expected = (linear_decay_lr(step, PEAK, warmup, last_step, 0.0) if name == "linear_decay"
                    else wsd_lr(step, PEAK, warmup, last_step, 1 / last_step, 0.0))  # a cooldown of 1 step
        np.testing.assert_allclose(rate_at(schedule, step), expected, rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize("name", ["rsqrt", "linear_decay", "wsd"])
def test_get_config_round_trip(name):
    schedule, _ = end_aware(name, 12_345, 0.1, ",cooldown_fraction=0.3,warmup_fraction=0.05")
    copy = type(schedule).from_config(schedule.get_config())
    assert copy.get_config() == schedule.get_config()
    assert [rate_at(copy, s) for s in (100, 5000, 12_000, 12_345)] == \
           [rate_at(schedule, s) for s in (100, 5000, 12_000, 12_345)]


def test_checkpoints_do_not_hold_the_last_step(tmp_path):
    """A run's checkpoints read the same whatever its schedule, so runs from before the new schedules restore."""
    paper = hparams_sets.get("transformer_tiny")()
    variable = keras.Variable(np.ones([3], "float32"))
    saved = {}
    for name in ("rsqrt", "wsd"):
        hparams = dataclasses.replace(paper, train=dataclasses.replace(paper.train, schedule=name))
        optimizer = make_optimizer(hparams)
        optimizer.build([variable])
        optimizer.iterations.assign(7)
        path = tf.train.Checkpoint(optimizer=optimizer).save(str(tmp_path / name / "ckpt"))
        saved[name] = path
        assert {n for n, _ in tf.train.list_variables(path)} == {n for n, _ in tf.train.list_variables(saved["rsqrt"])}
    # The trainer's restore asserts every object it has matched something in the checkpoint.
    schedule, hparams = end_aware("wsd", 500)
    optimizer = make_optimizer(hparams, schedule)
    optimizer.build([variable])
    tf.train.Checkpoint(optimizer=optimizer).restore(saved["rsqrt"]).assert_existing_objects_matched()
    assert int(optimizer.iterations.numpy()) == 7 and isinstance(schedule, EndAwareSchedule)
    assert int(schedule.last_step.numpy()) == 500
