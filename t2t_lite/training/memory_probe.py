"""Before training: one forward and backward pass per replica on the largest batch shapes the bucketing can
produce, so a batch that does not fit in memory fails at once rather than hours in (tensor2tensor sorted its
first batches longest-first for the same reason)."""
import time
from collections.abc import Callable

import keras
import tensorflow as tf

from t2t_lite.config import HParams
from t2t_lite.data.batching import largest_batch_shapes
from t2t_lite.errors import UserError


def probe_memory(strategy: tf.distribute.Strategy, gradients: Callable, model: keras.Model, hparams: HParams,
                 log: Callable[[str], None]) -> None:
    """Runs `gradients` (TrainStep.gradients) on the largest batches; nothing is updated.

    The dropout seeds are put back afterwards, so a run with the probe trains exactly like one without it.
    """
    t = hparams.train
    seeds = [(variable, variable.numpy()) for variable in model.non_trainable_variables]
    for rows, length in largest_batch_shapes(t.batch_size, t.max_length):
        batch = {name: tf.ones([rows, length], tf.int32) for name in ("inputs", "targets")}
        start = time.perf_counter()
        try:
            strategy.run(gradients, args=(batch,))
        except tf.errors.ResourceExhaustedError:
            raise UserError(f"a batch of {rows} x {length} tokens per replica (train.batch_size={t.batch_size} tokens, "
                            f"train.max_length={t.max_length}) does not fit in memory; lower train.batch_size or "
                            f"train.max_length with `hparams` (raise train.accumulation_steps to keep the tokens "
                            f"per update)") from None
        log(f"memory probe: a {rows} x {length} batch fits ({time.perf_counter() - start:.1f} s)")
    for variable, value in seeds:
        variable.assign(value)
