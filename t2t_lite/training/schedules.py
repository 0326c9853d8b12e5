"""Learning-rate schedules: the paper's (5.3; t2t's rsqrt_decay form) and two that end at a known last step."""
import keras
import tensorflow as tf
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
        return self.constant * self.d_model**-0.5 * ops.minimum(ops.rsqrt(step), step * self.warmup_steps**-1.5)

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "constant": self.constant}


class EndAwareSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup to the peak, then (after a constant stretch) linearly down to the floor at the last step.

    lr(s) = min(peak * min(s, last) / warmup, floor + (peak - floor) * clip((last - s) / cooldown, 0, 1)), where
    peak = constant * d_model^-0.5 * warmup_steps^-0.5 is the paper's schedule's highest rate (at the end of
    its warmup), so a set that switches from it keeps its peak; floor = min_fraction * peak. The warmup is
    warmup_steps, or with warmup_fraction > 0 that share of the run (of last): a short budget then spends
    the same share warming up as a long one, on a fast CPU or a slow one. The rate is
    the floor at the last step (or the warmup's rate there, if that is lower: a run that ends early in its
    warmup) and stays there after it. The cooldown (subclasses) is at least one step.

    The last step is a tf.Variable the training loop assigns as its estimate of where training ends
    changes (training/last_step.py); a compiled step reads the new value without retracing. The
    variable belongs to the schedule, which optimizers do not track, so checkpoints do not hold it.

    Args:
      d_model: D.
      warmup_steps: warmup.
      last_step: the step training is planned to end at.
      constant: multiplier of the peak, as NoamSchedule's.
      min_fraction: the floor as a fraction of the peak (0: decay to zero).
      warmup_fraction: 0, or the warmup's share of the run in (0, 1).
    """

    def __init__(self, d_model: int, warmup_steps: int, last_step: int, constant: float = 1.0,
                 min_fraction: float = 0.0, warmup_fraction: float = 0.0):
        self.d_model, self.warmup_steps, self.constant = d_model, warmup_steps, constant
        self.min_fraction, self.warmup_fraction = min_fraction, warmup_fraction
        # Not trainable and not checkpointed: the loop re-derives it when a run resumes.
        self.last_step = tf.Variable(last_step, dtype=tf.int64, trainable=False, name="last_step")

    def warmup_length(self, last):
        """The steps of the warmup in a run ending at `last` (a float tensor)."""
        return (ops.maximum(self.warmup_fraction * last, 1.0) if self.warmup_fraction > 0
                else ops.convert_to_tensor(float(self.warmup_steps)))

    def cooldown_steps(self, last):
        """The steps over which the rate falls from the peak to the floor, ending at `last` (a float tensor)."""
        raise NotImplementedError

    def __call__(self, iterations):
        step = ops.cast(iterations, "float32") + 1.0
        last = ops.cast(self.last_step, "float32")
        peak = self.constant * self.d_model**-0.5 * self.warmup_steps**-0.5  # the paper's schedule's highest
        floor = self.min_fraction * peak
        # Steps past the last one keep its rate: the warmup line must not climb again there.
        warming = peak * ops.minimum(step, last) / self.warmup_length(last)
        cooling = floor + (peak - floor) * ops.clip((last - step) / self.cooldown_steps(last), 0.0, 1.0)
        return ops.minimum(warming, cooling)

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "last_step": int(self.last_step.numpy()),
                "constant": self.constant, "min_fraction": self.min_fraction, "warmup_fraction": self.warmup_fraction}


class LinearDecaySchedule(EndAwareSchedule):
    """Linear warmup to the peak, then linearly to the floor at the last step (Bergsma et al., 2025).

    A run planned to end before its warmup does drops to the floor in its last step.
    """

    def cooldown_steps(self, last):
        return ops.maximum(last - self.warmup_length(last), 1.0)


class WarmupStableDecaySchedule(EndAwareSchedule):
    """Warmup, constant at the peak, then linearly to the floor over the last cooldown_fraction of the run.

    Hägele et al. (NeurIPS 2024). When the cooldown is longer than what is left after the warmup, the
    rate turns down where the warmup line meets the cooldown line.

    Args:
      cooldown_fraction: the share of the run's steps (of last_step) spent cooling down, in (0, 1].
      (the others as EndAwareSchedule's)
    """

    def __init__(self, d_model: int, warmup_steps: int, last_step: int, constant: float = 1.0,
                 min_fraction: float = 0.0, warmup_fraction: float = 0.0, cooldown_fraction: float = 0.2):
        super().__init__(d_model, warmup_steps, last_step, constant, min_fraction, warmup_fraction)
        self.cooldown_fraction = cooldown_fraction

    def cooldown_steps(self, last):
        return ops.maximum(self.cooldown_fraction * last, 1.0)

    def get_config(self):
        return {**super().get_config(), "cooldown_fraction": self.cooldown_fraction}


def set_last_step(schedule: keras.optimizers.schedules.LearningRateSchedule, last_step: int) -> None:
    """Moves an EndAwareSchedule's last step; the paper's schedule has none and is left as it is."""
    if isinstance(schedule, EndAwareSchedule):
        schedule.last_step.assign(last_step)
