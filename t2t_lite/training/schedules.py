"""The Transformer learning-rate schedule (paper 5.3; t2t's rsqrt_decay form)."""
import keras
from keras import ops


class NoamSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """lr = constant * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).

    Linear warmup then decay with the inverse square root of the step. With
    constant 1.0 and warmup 4000 this is the paper's formula; tensor2tensor's
    "constant*linear_warmup*rsqrt_decay*rsqrt_hidden_size" with constant 2.0
    and warmup 8000 is the same function (min(1, s/w) * max(s, w)^-0.5 equals
    min(s^-0.5, s * w^-1.5)). Steps count from 1: Keras passes the number of
    updates already applied, so the first update uses step 1, as in the paper.

    Args:
      d_model: D.
      warmup_steps: warmup.
      constant: multiplier (1.0 paper, 2.0 t2t v3).
    """

    def __init__(self, d_model: int, warmup_steps: int, constant: float = 1.0):
        self.d_model, self.warmup_steps, self.constant = d_model, warmup_steps, constant

    def __call__(self, iterations):
        step = ops.cast(iterations, "float32") + 1.0
        warmup = float(self.warmup_steps)
        return self.constant * self.d_model**-0.5 * ops.minimum(ops.rsqrt(step), step * warmup**-1.5)

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "constant": self.constant}
