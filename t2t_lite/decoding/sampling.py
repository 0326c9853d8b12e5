"""One output per sentence, a token at a time, as one in-graph tf.while_loop: greedy or sampled.

Same `symbols_to_logits_fn(ids, step, state)` contract as `beam_search` with
N = B rows: ids int32 [B, 1] is each row's previous token (the start id 0 at
step 0), step the 0-based position being decoded. Each row stops at its own max
length or after emitting EOS, then emits PAD, so its result does not depend on
the batch it is in. Scores are the model's log-probs of the emitted tokens,
without a length penalty (untempered, over the whole vocabulary, when sampling).

Shapes: B batch, T = max over the batch of the max lengths, V vocab.
"""
import random
from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow as tf

from t2t_lite.decoding.request import SamplingSettings
from t2t_lite.decoding.search_state import (SymbolsToLogitsFn, columns_of, next_token_log_probs, read_position,
                                            state_shape_invariants, write_position)
from t2t_lite.decoding.top_k import top_k

# (log_probs float32 [B, V], step) -> the emitted ids int32 [B] (columns, for a Shortlist's [B, W]).
ChooseFn = Callable[[tf.Tensor, tf.Tensor], tf.Tensor]
HASH_BUCKETS = 2 ** 53  # a sampling draw's resolution: every bucket / 2^53 is exact in float64


def argmax_choice(log_probs, step):
    """Greedy: each row's most likely token (the lowest id on a tie); int32 [B]."""
    return tf.argmax(log_probs, axis=-1, output_type=tf.int32)


def sampled_choice(settings: SamplingSettings, row_keys) -> ChooseFn:
    """A ChooseFn drawing each row's token from softmax(log_probs / temperature) over its top_k tokens.

    Each row's draw at each step is a keyed hash (SipHash, keyed by the seed)
    of its key and the step, turned into a uniform in [0, 1) and inverted
    through the row's cumulative distribution. So a sentence's sample depends on
    the seed and the sentence alone, not on the batch or row it is decoded in
    (a seed per step shared by the batch would give row i of every batch the
    same random numbers); two copies of one sentence get the same sample.

    Args:
      settings: the temperature, top-k and seed (None: a random one, drawn now).
      row_keys: string [B], what tells the rows apart (e.g. the source ids).
    """
    seed = random.SystemRandom().getrandbits(63) if settings.seed is None else settings.seed % 2 ** 63
    hash_key = [seed, 0x7432746C69746531]  # SipHash takes two words (attrs, so below 2^63); the second is a fixed tag

    def choose(log_probs, step):
        if settings.top_k:
            width = log_probs.shape[-1]
            k = settings.top_k if width is None else min(settings.top_k, width)
            values, ids = top_k(log_probs, k)  # [B, k] best-first, the lower id first on a tie
        else:
            values, ids = log_probs, None  # [B, V]
        # float64: a cumulative sum over a 32k vocabulary in float32 can be off by more than a rare token's
        # probability. Tokens of probability 0 (-inf, a suppressed EOS) never come out: their step in
        # the cumulative distribution is empty.
        probs = tf.nn.softmax(tf.cast(values, tf.float64) / settings.temperature)  # [B, k|V]
        cumulative = tf.math.cumsum(probs, axis=-1)  # [B, k|V]
        draw = tf.strings.to_hash_bucket_strong(tf.strings.join([row_keys, tf.strings.as_string(step)], "|"),
                                                HASH_BUCKETS, hash_key)  # [B] int64
        uniform = tf.cast(draw, tf.float64) / HASH_BUCKETS  # [B] in [0, 1)
        # The first column whose cumulative probability exceeds the draw (scaled by the row's total, which
        # rounding leaves near but not at 1).
        column = tf.reduce_sum(tf.cast(cumulative <= (uniform * cumulative[:, -1])[:, None], tf.int32), axis=-1)
        column = tf.minimum(column, tf.shape(probs)[-1] - 1)  # [B]
        return column if ids is None else tf.gather(ids, column, batch_dims=1)  # [B]

    return choose


class _Rows(NamedTuple):
    """Loop variables of the decoder."""

    ids: tf.Tensor  # int32 [B, T], PAD after the last decoded position and after EOS
    scores: tf.Tensor  # float32 [B] summed log-probs of the emitted tokens
    finished: tf.Tensor  # bool [B] the row emitted EOS
    state: Any  # nest of [B, ...]


def greedy_decode(symbols_to_logits_fn: SymbolsToLogitsFn, initial_state, batch_size, max_decode_lengths,
                  eos_id: int = 1, min_decode_lengths=None,
                  choose_fn: ChooseFn = argmax_choice) -> tuple[tf.Tensor, tf.Tensor]:
    """Decodes one token per step: the most likely one, or the one `choose_fn` picks (`sampled_choice`).

    Args:
      symbols_to_logits_fn: (ids [B, 1], step, state) -> (logits [B, V], state).
      initial_state: nest of [B, ...] tensors (caches; every dimension but the last may change between steps).
      batch_size: B.
      max_decode_lengths: int32 [B], per-row max output length counting the EOS.
      eos_id: the end-of-sentence id.
      min_decode_lengths: int32 [B] or None; EOS is impossible before this length.
      choose_fn: (log_probs float32 [B, V], step) -> ids int32 [B]; the log-probs have EOS at -inf
        while a row is too short.
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
        output, state = symbols_to_logits_fn(prev_ids, step, rows.state)
        logits, column_ids = columns_of(output)  # [B, V], or [B, W] for a Shortlist's ids [B, W]
        log_probs = next_token_log_probs(logits, step, min_lengths, eos_id, column_ids)  # [B, V]
        active = is_active(step, rows)  # [B]
        chosen = choose_fn(log_probs, step)  # [B] a column
        log_prob = tf.gather(log_probs, chosen, axis=1, batch_dims=1)  # [B]
        if column_ids is not None:
            chosen = tf.gather(column_ids, chosen, batch_dims=1)  # [B] its id
        ids = tf.where(active, chosen, 0)  # [B] PAD once a row is done
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
