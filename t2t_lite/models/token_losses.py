"""What a model's output projection gives at the target's tokens: each token's log-probability, the
label-smoothed cross-entropy and whether the argmax was right, a slice of positions at a time.

The model's largest tensors are the logits over the vocabulary and what the loss and its gradient derive from
them: for transformer_base's 4096-token batches, several [~4000, 32768] float32 tensors of 0.5 GB each. Here
the positions go through the projection (any callable: the model's own `logits`) in slices, one after
another, and each slice's gradient is taken at once (softmax - smoothed targets, sent back through the
projection), so only one slice's logits are alive at a time. The work is what differentiating the plain form
costs.
"""
import math
import typing

import tensorflow as tf

from t2t_lite.normaliser import log_normaliser


class TokenLosses(typing.NamedTuple):
    # The label-smoothed cross-entropy summed over non-PAD positions, float32; differentiable.
    loss_sum: tf.Tensor
    # Non-PAD positions, float32.
    tokens: tf.Tensor
    # Non-PAD positions whose argmax is the label, float32.
    correct: tf.Tensor
    # log p(label) at each position [B, T], float32, 0 at PAD.
    log_probs: tf.Tensor


def smoothing_constant(vocab_size: int, smoothing: float) -> float:
    """The entropy of the smoothed target distribution.

    Subtracted from the cross-entropy so that a model predicting exactly the
    smoothed distribution scores 0 (as flax's wmt example does), which makes
    the logged loss comparable across smoothing values.
    """
    confidence = 1.0 - smoothing
    low = smoothing / (vocab_size - 1)
    return -(confidence * math.log(confidence) + (vocab_size - 1) * low * math.log(low + 1e-20))


def token_losses(project, states, labels, vocab_size: int, smoothing: float = 0.0, slices: int = 1,
                 differentiable: bool = False) -> TokenLosses:
    """TokenLosses of project(states) at labels, `slices` slices of the positions one after another.

    The true class gets 1 - smoothing, every other class smoothing / (V - 1), as in tensor2tensor. Sums, not
    means, so callers can normalise by the global token count across replicas and accumulation steps.

    Args:
      project: states [R, D] -> float32 logits [R, V]; its variables get their gradients here.
      states: [B, T, D] decoder outputs.
      labels: int [B, T], PAD = 0 positions ignored.
      vocab_size: V.
      smoothing: eps_ls.
      differentiable: give loss_sum a gradient (with respect to states and project's variables), computed
        alongside the loss; otherwise none is computed.
    """
    shape = tf.shape(labels)
    flat_labels = tf.reshape(labels, [-1])  # [B * T], as the states are flattened below
    confidence = 1.0 - smoothing
    low = smoothing / (vocab_size - 1)
    entropy = smoothing_constant(vocab_size, smoothing)

    def sliced(states):
        """states [N, D] -> (loss_sum, correct, log_probs [N], the gradient function or None)."""
        positions = tf.shape(states)[0]
        rows = (positions + slices - 1) // slices
        # Padded positions carry label 0 (PAD): they weigh nothing.
        padded_states = tf.pad(states, [[0, rows * slices - positions], [0, 0]])
        padded_labels = tf.pad(flat_labels, [[0, rows * slices - positions]])
        loss_sum, correct = tf.zeros([], tf.float32), tf.zeros([], tf.float32)
        variable_gradients, state_gradients, log_probs, watched = [], [], [], []
        for i in range(slices):
            # Each slice starts when the previous one is done, so the graph
            # runtime cannot hold several slices' logits at once.
            with tf.control_dependencies([loss_sum, correct] + variable_gradients):
                slice_states = padded_states[i * rows:(i + 1) * rows]
            slice_labels = padded_labels[i * rows:(i + 1) * rows][:, None]  # [rows, 1]
            weights = tf.cast(tf.not_equal(slice_labels, 0), tf.float32)  # [rows, 1]
            with tf.GradientTape(watch_accessed_variables=differentiable) as tape:
                tape.watch(slice_states)
                logits = project(slice_states)  # float32 [rows, V]
            # Every pass over [rows, V] costs about as much as the matmuls' share of
            # this loss, so the loss is written to need few: one fused softmax, one
            # argmax, one sum, one subtraction, and no one-hot targets. With
            # log p = z - lse, the smoothed targets' cross-entropy is
            #   -(low * (sum_v z_v - V lse) + (confidence - low) * (z_label - lse)),
            # with lse read off the softmax (normaliser.py).
            probs = tf.nn.softmax(logits)  # [rows, V]
            best = tf.argmax(logits, axis=1, output_type=tf.int32)[:, None]  # [rows, 1]
            lse = log_normaliser(logits, probs, best)  # [rows, 1]
            label_log_probs = tf.gather(logits, slice_labels, axis=1, batch_dims=1) - lse  # [rows, 1]
            sum_log_probs = tf.reduce_sum(logits, axis=1, keepdims=True) - vocab_size * lse
            per_token = -(low * sum_log_probs + (confidence - low) * label_log_probs) - entropy  # [rows, 1]
            loss_sum += tf.reduce_sum(per_token * weights)
            correct += tf.reduce_sum(tf.cast(tf.equal(best, slice_labels), tf.float32) * weights)
            log_probs.append(label_log_probs[:, 0] * weights[:, 0])
            if not differentiable:
                continue
            # d loss_sum / d logits = softmax - smoothed targets, on real positions: the
            # targets are low everywhere but the label; padded rows weigh nothing.
            label_cells = tf.concat([tf.range(rows)[:, None], slice_labels], axis=1)  # [rows, 2]
            logit_gradient = tf.tensor_scatter_nd_sub(probs - low, label_cells,
                                                      tf.fill([rows], confidence - low)) * weights  # [rows, V]
            watched = tape.watched_variables()
            state_gradient, *gradients = tape.gradient(logits, [slice_states, *watched],
                                                       output_gradients=logit_gradient,
                                                       unconnected_gradients=tf.UnconnectedGradients.ZERO)
            state_gradients.append(state_gradient)
            gradients = [tf.cast(tf.convert_to_tensor(g), tf.float32) for g in gradients]
            variable_gradients = gradients if not variable_gradients else [
                total + g for total, g in zip(variable_gradients, gradients)]
        outputs = (loss_sum, correct, tf.concat(log_probs, axis=0)[:positions])
        if not differentiable:
            return outputs, None
        state_gradient = tf.concat(state_gradients, axis=0)[:positions]
        by_variable = {v.ref(): g for v, g in zip(watched, variable_gradients)}

        def gradient(upstream, _correct, _log_probs, variables=()):
            return (tf.cast(tf.cast(state_gradient, tf.float32) * upstream, states.dtype),
                    [tf.cast(by_variable[v.ref()] * upstream, v.dtype) if v.ref() in by_variable else None
                     for v in variables])

        return outputs, gradient

    flat_states = tf.reshape(states, [-1, tf.shape(states)[-1]])
    if differentiable:
        loss_sum, correct, log_probs = tf.custom_gradient(sliced)(flat_states)
    else:
        (loss_sum, correct, log_probs), _ = sliced(flat_states)
    tokens = tf.reduce_sum(tf.cast(tf.not_equal(flat_labels, 0), tf.float32))
    return TokenLosses(loss_sum, tokens, tf.stop_gradient(correct), tf.reshape(tf.stop_gradient(log_probs), shape))
