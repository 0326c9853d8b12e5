"""Both learning-rate schedules at the steps the issue names, against the formula in numpy."""
import numpy as np
import pytest

import t2t_lite.hparams  # noqa: F401  (registers the sets)
from t2t_lite.registry import hparams_sets
from t2t_lite.training.steps import learning_rate_schedule, make_optimizer


def paper_lr(step, d_model, warmup, constant):
    return constant * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@pytest.mark.parametrize("set_name, d_model, warmup, constant", [
    ("transformer_base", 512, 4000, 1.0),
    ("transformer_base_v3", 512, 8000, 2.0),
    ("transformer_big", 1024, 4000, 1.0),
])
@pytest.mark.parametrize("step", [1, 4000, 8000, 100_000])
def test_learning_rate_at_step(set_name, d_model, warmup, constant, step):
    schedule = learning_rate_schedule(hparams_sets.get(set_name)())
    # Keras hands the schedule the number of updates already applied: update `step` sees step - 1.
    value = float(schedule(np.int64(step - 1)))
    np.testing.assert_allclose(value, paper_lr(step, d_model, warmup, constant), rtol=1e-6)


def test_paper_base_peak_value():
    schedule = learning_rate_schedule(hparams_sets.get("transformer_base")())
    # 512^-0.5 * 4000^-0.5 = 6.9877e-4 at the end of warmup.
    np.testing.assert_allclose(float(schedule(np.int64(3999))), 6.987712429686844e-4, rtol=1e-6)


def test_optimizer_uses_the_sets_adam_settings():
    optimizer = make_optimizer(hparams_sets.get("transformer_base_v3")())
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.997, 1e-9)
