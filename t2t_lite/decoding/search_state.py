"""What every search over a model shares: the model function's contract, its state, and the steps' ids.

`symbols_to_logits_fn(ids, step, state) -> (logits, new_state)` is the model:
  ids    int32 [N, 1]: each row's previous token; the start id 0 (t2t's
         shifted-right PAD) at step 0.
  step   int32 scalar: the 0-based position being decoded (where a cache
         writes this step's key/value).
  state  nest of [N, ...] tensors (caches); returned updated, every dimension
         but the last free to change. A search repeats a plain state K times
         and reorders it every step; a `SplitState`'s per-sentence part is
         never repeated or reordered. Per-sentence tensors the function
         captures instead of carrying stop beam search from dropping finished
         sentences (beam_search's compact_finished).
  logits [N, V], any float dtype; log-softmax runs in float32. Or a `Shortlist`: logits [N, W] for
         only the ids each row's columns stand for (every id outside them impossible).

Beam search (beam_search.py) and greedy search and sampling (sampling.py) use it.
"""
from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow as tf

from t2t_lite.normaliser import log_normaliser

SymbolsToLogitsFn = Callable[[tf.Tensor, tf.Tensor, Any], tuple[tf.Tensor, Any]]

# Log-prob / score of an impossible hypothesis: an empty beam or finished slot,
# a suppressed EOS. t2t uses -1e7; a true -inf can never be mistaken for a real
# (if unlikely) hypothesis, and every op below keeps it NaN-free (no inf - inf).
NEG_INF = float("-inf")


def repeated_rows(nest, times):
    """Every tensor of `nest` [B, ...] with each row repeated `times` times in place, [B*times, ...]: row b
    becomes rows b*times .. b*times + times - 1, as tf.repeat(t, times, axis=0) gives.

    One index serves every tensor: a gather is one graph op where a tf.repeat is about twenty, which every
    trace builds again. times: int or int32 scalar.
    """
    tensors = tf.nest.flatten(nest)
    if not tensors:
        return nest
    index = tf.range(tf.shape(tensors[0])[0] * times) // times
    return tf.nest.map_structure(lambda t: tf.gather(t, index), nest)


class SplitState(NamedTuple):
    """A decoding state in two parts, for a function that keeps a sentence's K beams together.

    Reordering a large state (key/value caches) copies all of it every step.
    A function can instead keep its caches per sentence, with a slot for each
    beam, and record per beam which slot holds each position of its history:
    then only that small record follows the beams.

    per_beam: nest of [N, ...] tensors, already one row per beam (not repeated);
      reordered with the beams every step, like a plain state.
    per_sentence: nest of tensors carried from step to step as the function
      returns them, never repeated or reordered.
    """

    per_beam: Any
    per_sentence: Any


class Shortlist(NamedTuple):
    """A model function's logits for some ids only: what a row's columns stand for, every other id impossible.

    An output constraint that allows each sentence only a few of the vocabulary's ids lets the model score
    just those (decoding/constraints.py), and the search rank just those: a step's work then grows with
    the shortlist, not with V. An id appears once in a row's columns; padding columns hold ids the row
    can never emit (-inf logits).
    """

    logits: tf.Tensor  # [N, W] any float dtype
    ids: tf.Tensor  # int32 [N, W]: the id each column stands for


def columns_of(output):
    """A model function's output as (logits [N, W], the ids of their columns int32 [N, W], or None when the
    columns are the vocabulary's ids 0..V-1)."""
    return (output.logits, output.ids) if isinstance(output, Shortlist) else (output, None)


def allowed_logits(logits, step, min_decode_lengths, eos_id, column_ids=None):
    """Float32 logits with EOS impossible (-inf) while the output would be too short.

    Args:
      logits: [N, V] any float dtype (bfloat16 under mixed precision), or [N, W] of a Shortlist.
      step: int32 scalar, the position being decoded; EOS here gives length step + 1.
      min_decode_lengths: int32 [N] or None; EOS needs step + 1 >= min length.
      eos_id: int.
      column_ids: the Shortlist's ids [N, W], or None.
    Returns:
      float32 [N, V] (or [N, W]).
    """
    logits = tf.cast(logits, tf.float32)  # [N, V] softmax in float32 under mixed precision
    if min_decode_lengths is None:
        return logits
    too_short = step + 1 < min_decode_lengths  # [N]
    ids = tf.range(tf.shape(logits)[1])[None, :] if column_ids is None else column_ids  # [1, V] or [N, W]
    return tf.where(too_short[:, None] & tf.equal(ids, eos_id), NEG_INF, logits)  # [N, V]


def next_token_log_probs(logits, step, min_decode_lengths, eos_id, column_ids=None):
    """Float32 log-softmax of `allowed_logits`: renormalised over the allowed tokens; [N, V] (or [N, W]).

    Computed as logits - log_normaliser(...), the arithmetic beam search
    applies to its top tokens, so greedy and beam 1 give bit-identical scores.
    """
    logits = allowed_logits(logits, step, min_decode_lengths, eos_id, column_ids)
    best_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)[:, None]  # [N, 1]
    return logits - log_normaliser(logits, tf.nn.softmax(logits), best_ids)


def read_position(ids, position):
    """ids[..., position], or 0 (the start id) when position is -1; XLA-friendly one-hot read.

    Args:
      ids: int32 [..., T].
      position: int32 scalar in [-1, T).
    Returns:
      int32 [...].
    """
    return tf.reduce_sum(ids * tf.one_hot(position, tf.shape(ids)[-1], dtype=ids.dtype), axis=-1)


def write_position(ids, position, values):
    """ids with `values` written at `position`, which must still hold 0 (PAD); no growing concat.

    Args:
      ids: int32 [..., T].
      position: int32 scalar in [0, T).
      values: int32 [...].
    Returns:
      int32 [..., T].
    """
    return ids + tf.one_hot(position, tf.shape(ids)[-1], dtype=ids.dtype) * values[..., None]


def state_shape_invariants(state):
    """tf.while_loop shape invariants for a decoding state: each tensor keeps its rank and, if it has
    two dimensions or more, its last one (the first, rows, may change when sentences are dropped)."""
    return tf.nest.map_structure(lambda t: tf.TensorShape([None] * (t.shape.rank - 1) + t.shape[-1:])
                                 if t.shape.rank and t.shape.rank > 1 else rows_free(t), state)


def rows_free(t):
    """A loop variable's shape invariant with its first (sentence or row) dimension free."""
    return tf.TensorShape([None] + t.shape[1:]) if t.shape.rank else t.shape
