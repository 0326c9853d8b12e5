"""Token embeddings shared with the pre-softmax projection, and positional encodings."""
import math

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from t2t_lite.ops.float32_product import float32_product


def _inverse_timescales(channels, min_timescale=1.0, max_timescale=1.0e4):
    """[D // 2] float32 frequencies of t2t's `get_timing_signal_1d`."""
    num_timescales = channels // 2
    log_increment = math.log(max_timescale / min_timescale) / max(num_timescales - 1, 1)
    return (min_timescale * np.exp(np.arange(num_timescales) * -log_increment)).astype(np.float32)


def timing_signal_at(positions, channels):
    """The timing signal of the given positions.

    tensor2tensor concatenates the sin half and the cos half instead of
    interleaving them as the paper writes PE(pos, 2i) / PE(pos, 2i+1), and
    spaces the timescales by log(1e4) / (channels/2 - 1). We follow t2t
    exactly. Computing from the positions themselves (not a slice of a full
    table) keeps one decoding step's shape static for XLA.

    Args:
      positions: int or float tensor [T].
      channels: D.
    Returns:
      float32 [T, D].
    """
    frequencies = ops.convert_to_tensor(_inverse_timescales(channels))  # [D // 2]
    scaled_time = ops.cast(positions, "float32")[:, None] * frequencies[None, :]  # [T, D // 2]
    signal = ops.concatenate([ops.sin(scaled_time), ops.cos(scaled_time)], axis=1)  # [T, 2*(D//2)]
    return ops.pad(signal, [[0, 0], [0, channels % 2]])


def timing_signal(length, channels):
    """The timing signal of positions 0 .. length-1: float32 [T, D]."""
    return timing_signal_at(ops.arange(length), channels)


@keras.saving.register_keras_serializable(package="t2t_lite")
class SinusoidalPosition(keras.layers.Layer):
    """Adds `timing_signal` to x [B, T, D]: of positions 0..T-1, or from `position` (an int scalar) on."""

    def call(self, x, position=None):
        positions = ops.arange(ops.shape(x)[1]) + (0 if position is None else position)  # [T]
        return x + ops.cast(timing_signal_at(positions, x.shape[-1]), x.dtype)[None]


@keras.saving.register_keras_serializable(package="t2t_lite")
class LearnedPosition(keras.layers.Layer):
    """Adds a trained embedding of each position (Table 3 row E): of 0..T-1, or from `position` on.

    Args:
      max_position: positions 0 .. max_position-1 are representable.
      d_model: D.
    """

    def __init__(self, max_position, d_model, **kwargs):
        super().__init__(**kwargs)
        self.max_position, self.d_model = max_position, d_model

    def build(self, input_shape):
        self.table = self.add_weight(
            name="table", shape=(self.max_position, self.d_model),
            initializer=keras.initializers.RandomNormal(stddev=self.d_model**-0.5),
            # `call` casts the rows it reads; as for SharedEmbedding's table, Keras
            # need not cast the whole table first under mixed precision.
            autocast=False)

    def call(self, x, position=None):
        rows = (self.table[: ops.shape(x)[1]] if position is None
                else ops.take(self.table, position + ops.arange(ops.shape(x)[1]), axis=0))  # [T, D]
        return x + ops.cast(rows, x.dtype)[None]

    def get_config(self):
        config = super().get_config()
        config.update(max_position=self.max_position, d_model=self.d_model)
        return config


@keras.saving.register_keras_serializable(package="t2t_lite")
class SharedEmbedding(keras.layers.Layer):
    """One [V, D] matrix for source and target embeddings and the output projection (paper 3.4).

    Embeddings are scaled by sqrt(D); weights start as N(0, D^-0.5) as in t2t,
    so scaled embeddings have unit variance like the timing signal.

    Args:
      vocab_size: V.
      d_model: D.
    """

    def __init__(self, vocab_size, d_model, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size, self.d_model = vocab_size, d_model

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.vocab_size, self.d_model),
            initializer=keras.initializers.RandomNormal(stddev=self.d_model**-0.5),
            # Under mixed precision Keras would cast the whole [V, D] table to the compute
            # dtype wherever a layer's call reads it: every decoding step, for a gather of
            # 128 rows (16.8M values at transformer_base). Every reader here casts what it uses.
            autocast=False)

    def call(self, ids):
        """ids int [B, T] -> [B, T, D], times sqrt(D)."""
        # Gather, then cast: under mixed precision only the looked-up rows are converted.
        vectors = ops.cast(ops.take(self.embeddings, ids, axis=0), self.compute_dtype)
        return vectors * math.sqrt(self.d_model)

    def logits(self, x, columns=None, product=None):
        """x [..., D] -> float32 logits [..., V] = x E^T (float32 for a stable softmax and loss).

        Args:
          columns: None, or some ids' output embeddings [B, C, D] (`column_embeddings`): then x is [B, R, D]
            and the logits [B, R, C] are those ids' only (a shortlist).
          product: None, or `prepared_logits`' (a decoding step's kernel), multiplying in place of the table.
        """
        if columns is not None:
            return tf.cast(tf.matmul(x, tf.cast(columns, x.dtype), transpose_b=True), "float32")  # [B, R, C]
        rows = tf.reshape(x, [-1, self.d_model])  # [R, D]
        if product is not None:
            logits = product(rows)
        elif rows.dtype == tf.float32:  # one GEMM over the [V, D] embedding with transpose_b, not a copy of it
            logits = tf.matmul(rows, tf.cast(self.embeddings, rows.dtype), transpose_b=True)  # [R, V]
        else:
            # Sums of D bfloat16 products rounded to bfloat16 would carry their rounding into the loss
            # and the softmax its gradient starts from.
            logits = float32_product(rows, tf.transpose(tf.cast(self.embeddings, rows.dtype)))
        logits = tf.reshape(logits, tf.concat([tf.shape(x)[:-1], [self.vocab_size]], axis=0))
        return tf.cast(logits, "float32")

    def column_embeddings(self, ids):
        """Some ids' output embeddings, int [B, C] -> [B, C, D] in the compute dtype: `logits`' columns."""
        return ops.cast(ops.take(self.embeddings, ids, axis=0), self.compute_dtype)

    def prepared_logits(self, prepare):
        """The output projection made once by `prepare` (layers/prepared.py), for `logits`' product."""
        return prepare(self.embeddings, transposed=True)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, d_model=self.d_model)
        return config
