"""Label-smoothed cross-entropy and per-token accuracy that ignore padding."""
import math

import tensorflow as tf


def smoothing_constant(vocab_size: int, smoothing: float) -> float:
    """The entropy of the smoothed target distribution.

    Subtracted from the cross-entropy so that a model predicting exactly the
    smoothed distribution scores 0 (as flax's wmt example does), which makes
    the logged loss comparable across smoothing values.
    """
    confidence = 1.0 - smoothing
    low = smoothing / (vocab_size - 1)
    return -(confidence * math.log(confidence) + (vocab_size - 1) * low * math.log(low + 1e-20))


def smoothed_cross_entropy(logits, labels, smoothing: float):
    """Summed label-smoothed cross-entropy over non-PAD target positions.

    The true class gets 1 - smoothing, every other class smoothing / (V - 1),
    as in tensor2tensor. Returns sums, not means, so callers can normalise by
    the global token count across replicas and accumulation steps.

    Args:
      logits: float [B, T, V] (cast to float32 here).
      labels: int [B, T], PAD = 0 positions ignored.
      smoothing: eps_ls.
    Returns:
      (loss_sum, token_count), float32 scalars.
    """
    logits = tf.cast(logits, tf.float32)
    vocab_size = tf.shape(logits)[-1]
    confidence = 1.0 - smoothing
    low = smoothing / tf.cast(vocab_size - 1, tf.float32)
    soft_targets = tf.one_hot(labels, vocab_size, on_value=confidence, off_value=low)  # [B, T, V]
    per_token = -tf.reduce_sum(soft_targets * tf.nn.log_softmax(logits), axis=-1)  # [B, T]
    per_token -= smoothing_constant(logits.shape[-1], smoothing)
    weights = tf.cast(tf.not_equal(labels, 0), tf.float32)
    return tf.reduce_sum(per_token * weights), tf.reduce_sum(weights)


def correct_tokens(logits, labels):
    """(number of non-PAD positions whose argmax equals the label, number of non-PAD positions)."""
    weights = tf.cast(tf.not_equal(labels, 0), tf.float32)
    hits = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=labels.dtype), labels), tf.float32)
    return tf.reduce_sum(hits * weights), tf.reduce_sum(weights)
