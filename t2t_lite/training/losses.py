"""Label-smoothed cross-entropy and per-token accuracy that ignore padding."""
import math

import tensorflow as tf

from t2t_lite.normaliser import log_normaliser
from t2t_lite.ops.float32_product import float32_product


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


# A slice's [rows, V] float32 logits (and each tensor the loss derives from them) stay under this many bytes.
SLICE_BYTES = 32 * 2**20
MAX_SLICES = 8


def loss_slices(positions: int, vocab_size: int) -> int:
    """How many slices projected_smoothed_cross_entropy should take `positions` positions in: enough to keep a
    slice's logits under SLICE_BYTES, at most MAX_SLICES. Each slice is written into the graph again, so a
    small vocabulary's one slice traces and runs fastest."""
    return min(MAX_SLICES, max(1, math.ceil(positions * vocab_size * 4 / SLICE_BYTES)))


def projected_smoothed_cross_entropy(states, kernel, labels, smoothing: float, chunks: int = MAX_SLICES):
    """smoothed_cross_entropy(states @ kernel, labels, smoothing), without holding [B, T, V] logits.

    Training's largest tensors are the logits over the vocabulary and what the
    loss and its gradient derive from them: for transformer_base's 4096-token
    batches, several [~4000, 32768] float32 tensors of 0.5 GB each. Here the
    positions go through the projection and the loss in `chunks` slices, one
    after another, and each slice's gradient with respect to its states and
    to the kernel is taken at once (softmax - smoothed targets), so only one
    slice's logits are alive at a time. The work is the same three matmuls per
    position as differentiating the plain form.

    Args:
      states: [B, T, D] decoder outputs, in the compute dtype.
      kernel: [D, V] output projection, in the same dtype.
      labels: int [B, T], PAD = 0 positions ignored.
      smoothing: eps_ls.
      chunks: slices of the B * T positions (loss_slices chooses them for a batch size).
    Returns:
      (loss_sum, token_count), float32 scalars; loss_sum differentiable with
      respect to states and kernel.
    """
    labels = tf.reshape(labels, [-1])  # [B * T], as the states are flattened below

    @tf.custom_gradient
    def loss_with_gradient(states, kernel):
        """states [N, D], kernel [D, V] -> loss_sum, with a gradient computed alongside the loss."""
        positions, vocab_size = tf.shape(states)[0], tf.shape(kernel)[1]
        rows = (positions + chunks - 1) // chunks
        # Padded positions carry label 0 (PAD): they weigh nothing.
        padded_states = tf.pad(states, [[0, rows * chunks - positions], [0, 0]])
        padded_labels = tf.pad(labels, [[0, rows * chunks - positions]])
        confidence = 1.0 - smoothing
        low = smoothing / tf.cast(vocab_size - 1, tf.float32)
        entropy = smoothing_constant(kernel.shape[-1], smoothing)
        loss_sum = tf.zeros([], tf.float32)
        kernel_gradient = tf.zeros(tf.shape(kernel), tf.float32)
        state_gradients = []
        for i in range(chunks):
            # Each slice starts when the previous one is done, so the graph
            # runtime cannot hold several slices' logits at once.
            with tf.control_dependencies([loss_sum, kernel_gradient]):
                chunk_states = padded_states[i * rows:(i + 1) * rows]
            chunk_labels = padded_labels[i * rows:(i + 1) * rows][:, None]  # [rows, 1]
            weights = tf.cast(tf.not_equal(chunk_labels, 0), tf.float32)  # [rows, 1]
            # In float32 whatever the operands' dtype: bfloat16 logits would carry their
            # rounding into the loss and into the softmax the gradient starts from.
            logits = float32_product(chunk_states, kernel)  # [rows, V]
            # Every pass over [rows, V] costs about as much as the matmuls' share of
            # this loss, so the loss is written to need few: one fused softmax, one
            # argmax, one sum, one subtraction, and no one-hot targets. With
            # log p = z - lse, the smoothed targets' cross-entropy is
            #   -(low * (sum_v z_v - V lse) + (confidence - low) * (z_label - lse)),
            # with lse read off the softmax (normaliser.py).
            probs = tf.nn.softmax(logits)  # [rows, V]
            best = tf.argmax(logits, axis=1, output_type=tf.int32)[:, None]  # [rows, 1]
            lse = log_normaliser(logits, probs, best)  # [rows, 1]
            label_log_probs = tf.gather(logits, chunk_labels, axis=1, batch_dims=1) - lse  # [rows, 1]
            sum_log_probs = tf.reduce_sum(logits, axis=1, keepdims=True) - tf.cast(vocab_size, tf.float32) * lse
            per_token = -(low * sum_log_probs + (confidence - low) * label_log_probs) - entropy  # [rows, 1]
            loss_sum += tf.reduce_sum(per_token * weights)
            # d loss_sum / d logits = softmax - smoothed targets, on real positions: the
            # targets are low everywhere but the label; padded rows are zeroed on the
            # [rows, D] sides of the two matmuls, not on [rows, V].
            label_cells = tf.concat([tf.range(rows)[:, None], chunk_labels], axis=1)  # [rows, 2]
            logit_gradient = tf.tensor_scatter_nd_sub(probs - low, label_cells,
                                                      tf.fill([rows], confidence - low))  # [rows, V]
            logit_gradient = tf.cast(logit_gradient, kernel.dtype)
            state_gradients.append(tf.matmul(logit_gradient, kernel, transpose_b=True)
                                   * tf.cast(weights, kernel.dtype))  # [rows, D]
            kernel_gradient += tf.cast(tf.matmul(chunk_states * tf.cast(weights, chunk_states.dtype), logit_gradient,
                                                 transpose_a=True), tf.float32)
        state_gradient = tf.concat(state_gradients, axis=0)[:positions]

        def gradient(upstream):
            return (tf.cast(tf.cast(state_gradient, tf.float32) * upstream, states.dtype),
                    tf.cast(kernel_gradient * upstream, kernel.dtype))

        return loss_sum, gradient

    loss_sum = loss_with_gradient(tf.reshape(states, [-1, tf.shape(states)[-1]]), kernel)
    return loss_sum, tf.reduce_sum(tf.cast(tf.not_equal(labels, 0), tf.float32))
