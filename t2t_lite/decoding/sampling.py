"""The greedy decoder, as one in-graph tf.while_loop.

Same `symbols_to_logits_fn(ids, step, state)` contract as `beam_search` with
N = B rows: ids int32 [B, 1] is each row's previous token (the start id 0 at
step 0), step the 0-based position being decoded. Each row stops at its own max
length or after emitting EOS, then emits PAD, so its result does not depend on
the batch it is in. Scores are the model's log-probs of the emitted tokens,
without a length penalty.

Shapes: B batch, T = max over the batch of the max lengths, V vocab.
"""
from typing import Any, NamedTuple

import tensorflow as tf

from t2t_lite.decoding.beam_search import (
    SymbolsToLogitsFn,
    next_token_log_probs,
    read_position,
    state_shape_invariants,
    write_position,
)


class _Rows(NamedTuple):
    """Loop variables of the decoder."""

    ids: tf.Tensor  # int32 [B, T], PAD after the last decoded position and after EOS
    scores: tf.Tensor  # float32 [B] summed log-probs of the emitted tokens
    finished: tf.Tensor  # bool [B] the row emitted EOS
    state: Any  # nest of [B, ...]


def greedy_decode(symbols_to_logits_fn: SymbolsToLogitsFn, initial_state, batch_size, max_decode_lengths,
                  eos_id: int = 1, min_decode_lengths=None) -> tuple[tf.Tensor, tf.Tensor]:
    """Decodes the most likely token at every step.

    Args:
      symbols_to_logits_fn: (ids [B, 1], step, state) -> (logits [B, V], state).
      initial_state: nest of [B, ...] tensors (caches; every dimension but the last may change between steps).
      batch_size: B.
      max_decode_lengths: int32 [B], per-row max output length counting the EOS.
      eos_id: the end-of-sentence id.
      min_decode_lengths: int32 [B] or None; EOS is impossible before this length.
    Returns:
      ids: int32 [B, T], T = max(max_decode_lengths); EOS kept, PAD (0) after it.
      scores: float32 [B] summed log-probs.
    """
    max_lengths = tf.convert_to_tensor(max_decode_lengths, tf.int32)  # [B]
    min_lengths = None if min_decode_lengths is None else tf.convert_to_tensor(min_decode_lengths, tf.int32)  # [B]

    def is_active(step, rows):
        return (step < max_lengths) & ~rows.finished  # [B]

    def body(step, rows):
        prev_ids = read_position(rows.ids, step - 1)[:, None]  # [B, 1] start id 0 at step 0
        logits, state = symbols_to_logits_fn(prev_ids, step, rows.state)  # [B, V]
        log_probs = next_token_log_probs(logits, step, min_lengths, eos_id)  # [B, V]
        active = is_active(step, rows)  # [B]
        best = tf.argmax(log_probs, axis=-1, output_type=tf.int32)  # [B]
        ids = tf.where(active, best, 0)  # [B] PAD once a row is done
        log_prob = tf.gather(log_probs, ids, axis=1, batch_dims=1)  # [B]
        return step + 1, _Rows(
            ids=write_position(rows.ids, step, ids),  # [B, T]
            scores=rows.scores + tf.where(active, log_prob, 0.0),  # [B]
            finished=rows.finished | (active & tf.equal(ids, eos_id)),  # [B]
            state=state,  # [B, ...] rows already done run on, their output is ignored
        )

    rows = _Rows(tf.zeros([batch_size, tf.reduce_max(max_lengths)], tf.int32), tf.zeros([batch_size]),
                 tf.zeros([batch_size], tf.bool), initial_state)
    invariants = tf.nest.map_structure(lambda t: t.shape, rows)._replace(state=state_shape_invariants(rows.state))
    _, rows = tf.while_loop(lambda step, rows: tf.reduce_any(is_active(step, rows)), body,
                            (tf.constant(0), rows), shape_invariants=(tf.TensorShape([]), invariants))
    return rows.ids, rows.scores
