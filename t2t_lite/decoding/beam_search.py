"""Beam search with tensor2tensor / GNMT semantics, as one in-graph tf.while_loop.

Follows tensor2tensor's `beam_search.py`: per sentence, K alive and K finished
hypotheses; each step takes the 2K best one-token extensions (top-k over K*V),
the K best that did not emit EOS stay alive and the EOS ones compete for the K
finished slots with the GNMT length penalty; decoding stops early on t2t's
`_is_not_finished` bound. Unlike t2t, every sentence has its own maximum length
and stops on its own, so its result does not depend on the batch it is in; and
it stops as soon as the hypotheses its caller will use are final (`final_beams`).

The ids are preallocated to [B, K, T] and written with one-hot updates; the
state may change shape between steps (a cache that grows by one position per
step). With a fixed-shape state the loop runs inside `tf.function(jit_compile=True)`.

Shapes: B batch, K beam, T = max over the batch of the max lengths, V vocab,
N = B*K model rows, beam-major within a sentence (row b*K + k).

The model function and its state: search_state.py.
"""
from typing import Any, NamedTuple

import tensorflow as tf

from t2t_lite.decoding.search_state import (NEG_INF, SplitState, SymbolsToLogitsFn, allowed_logits, columns_of,
                                            read_position, repeated_rows, rows_free, state_shape_invariants,
                                            write_position)
from t2t_lite.decoding.length_penalty import length_penalty as gnmt_length_penalty
from t2t_lite.decoding.top_k import top_k
from t2t_lite.normaliser import log_normaliser


def length_penalty(length, alpha):
    """The GNMT length penalty (decoding/length_penalty.py) of int lengths counting the EOS: float32, shaped
    like `length`."""
    return gnmt_length_penalty(tf.cast(length, tf.float32), alpha)


def _gather_beams(x, index):
    """x[b, index[b, k]] for every sentence b and output slot k.

    Args:
      x: [B, M, ...].
      index: int32 [B, M'] in [0, M).
    Returns:
      [B, M', ...].
    """
    return tf.gather(x, index, axis=1, batch_dims=1)


def _taken(nest, index):
    """Every tensor of `nest` at the rows `index` (int32 [R]): [R, ...] each."""
    return tf.nest.map_structure(lambda t: tf.gather(t, index), nest)


def _keep_if_done(active, new, old):
    """new for active sentences, old for done ones, which stay frozen.

    Args:
      active: bool [B].
      new, old: [B, ...] of one shape.
    Returns:
      [B, ...].
    """
    mask = tf.reshape(active, [-1] + [1] * (new.shape.rank - 1))  # [B, 1, ...]
    return tf.where(mask, new, old)


class _Beams(NamedTuple):
    """Loop variables of the search."""

    alive_seq: tf.Tensor  # int32 [B, K, T] best-first, PAD after the last decoded position
    alive_log_probs: tf.Tensor  # float32 [B, K] summed log-probs, -inf for an empty beam
    finished_seq: tf.Tensor  # int32 [B, K, T] best-first, each ending in EOS
    finished_scores: tf.Tensor  # float32 [B, K] length-penalised, -inf for an empty slot
    state: Any  # nest of [N, ...] (row b*K + k belongs to alive_seq[b, k]), or a SplitState
    max_lengths: tf.Tensor  # int32 [B]
    min_lengths: tf.Tensor  # int32 [N], zeros when the search has none
    sentence: tf.Tensor  # int32 [B] each sentence's index in the batch searched (B shrinks as sentences finish)
    length: tf.Tensor  # int32 [B] positions decoded so far: the tokens of each of the sentence's alive beams


class _Candidates(NamedTuple):
    """The 2K best one-token extensions of a sentence's alive beams (t2t `grow_topk`)."""

    seq: tf.Tensor  # int32 [B, 2K, T]
    log_probs: tf.Tensor  # float32 [B, 2K] best-first
    is_eos: tf.Tensor  # bool [B, 2K]
    beam: tf.Tensor  # int32 [B, 2K] the alive beam each one extends


class _BeamSearch:
    """The loop's cond and body, sharing the search's settings (the per-sentence lengths are in the beams)."""

    def __init__(self, symbols_to_logits_fn, beam_size, vocab_size, alpha, eos_id, final_beams,
                 has_min_lengths):
        self.fn = symbols_to_logits_fn
        self.beam_size, self.vocab_size = beam_size, vocab_size
        self.final_beams, self.has_min_lengths = final_beams, has_min_lengths
        self.alpha, self.eos_id = alpha, eos_id

    def initial_beams(self, initial_state, batch_size, max_lengths, min_lengths):
        """One live empty hypothesis per sentence; the state is repeated K times (t2t does the same).

        Args:
          max_lengths: int32 [B]; min_lengths: int32 [N] or None.
        """
        batch, beam = batch_size, self.beam_size
        seq = tf.zeros([batch, beam, tf.reduce_max(max_lengths)], tf.int32)  # [B, K, T]
        # All K beams hold the same empty prefix: only beam 0 is live, else step 0
        # would fill the beam with K copies of one extension (t2t's initial_log_probs).
        alive_log_probs = tf.tile(tf.constant([[0.0] + [NEG_INF] * (beam - 1)]), [batch, 1])  # [B, K]
        finished_scores = tf.fill([batch, beam], NEG_INF)  # [B, K]
        # A SplitState's per_beam part is [N, ...] already.
        state = (initial_state if isinstance(initial_state, SplitState)
                 else repeated_rows(initial_state, beam))  # [N, ...]
        min_lengths = tf.zeros([batch * beam], tf.int32) if min_lengths is None else min_lengths
        return _Beams(seq, alive_log_probs, seq, finished_scores, state, max_lengths, min_lengths,
                      tf.range(batch), tf.zeros([batch], tf.int32))

    def is_active(self, step, beams):
        """Sentences still decoding (t2t `_is_not_finished`, per sentence): bool [B]."""
        # Log-probs only fall as tokens are added, and the penalty only grows up to
        # the max length, so this bounds every score an alive beam can reach (alpha >= 0).
        best_alive = (tf.reduce_max(beams.alive_log_probs, axis=1)
                      / length_penalty(beams.max_lengths, self.alpha))  # [B]
        # Against the final_beams-th best finished score (-inf until that many have finished;
        # finished_scores are best-first): once no alive beam can beat it, the final_beams best
        # hypotheses can no longer change. final_beams = K is t2t's stop_early=False (all K
        # returned hypotheses final); 1 is its default, which fixes only the best, in fewer steps.
        last_final = beams.finished_scores[:, self.final_beams - 1]  # [B]
        return (step < beams.max_lengths) & ~(last_final > best_alive)  # [B]

    def step(self, step, beams):
        """One decoding step; sentences already done keep their beams unchanged."""
        candidates, state = self._grow_topk(step, beams)
        alive_seq, alive_log_probs, source_beam = self._grow_alive(candidates)
        finished_seq, finished_scores = self._grow_finished(step, beams, candidates)
        active = self.is_active(step, beams)  # [B]
        return beams._replace(
            alive_seq=_keep_if_done(active, alive_seq, beams.alive_seq),  # [B, K, T]
            alive_log_probs=_keep_if_done(active, alive_log_probs, beams.alive_log_probs),  # [B, K]
            finished_seq=_keep_if_done(active, finished_seq, beams.finished_seq),  # [B, K, T]
            finished_scores=_keep_if_done(active, finished_scores, beams.finished_scores),  # [B, K]
            state=self._gather_state(state, source_beam),  # [N, ...]
            length=tf.where(active, step + 1, beams.length),  # [B]
        )

    def compact(self, beams, active):
        """The beams of the sentences still decoding (active, bool [B]) only: B' = sum(active) rows.

        Every per-sentence tensor goes with them: the beams' arrays, the lengths, and the state (a
        plain one and a SplitState's per_beam part by row, its per_sentence part by sentence).
        """
        keep = tf.cast(tf.where(active)[:, 0], tf.int32)  # [B']
        rows = tf.reshape(keep[:, None] * self.beam_size + tf.range(self.beam_size)[None, :], [-1])  # [N']
        state = beams.state
        state = (SplitState(per_beam=_taken(state.per_beam, rows), per_sentence=_taken(state.per_sentence, keep))
                 if isinstance(state, SplitState) else _taken(state, rows))
        # The other fields have a row per sentence; min_lengths, as the state, one per beam.
        return _taken(beams._replace(state=(), min_lengths=()), keep)._replace(
            state=state, min_lengths=tf.gather(beams.min_lengths, rows))

    def _grow_topk(self, step, beams):
        """Runs the model on every alive beam and keeps the 2K best extensions (t2t `grow_topk`).

        In two stages, which pick exactly what one top-k over all K*V extensions
        picks, ties included: each beam's 2K best tokens, then the 2K best of
        those K*2K. Log-softmax is monotone within a row, so the first stage
        ranks the raw logits and only the 2K winners per row are normalised.
        """
        batch, beam = tf.shape(beams.alive_log_probs)[0], self.beam_size
        prev_ids = tf.reshape(read_position(beams.alive_seq, step - 1), [batch * beam, 1])  # [N, 1]
        output, state = self.fn(prev_ids, step, beams.state)
        logits, column_ids = columns_of(output)  # [N, V], or [N, W] for a Shortlist's ids [N, W]
        min_lengths = beams.min_lengths if self.has_min_lengths else None
        logits = allowed_logits(logits, step, min_lengths, self.eos_id, column_ids)  # [N, V]
        # R: a whole row when V < 2K. A shortlist has at least 2K columns (its padding impossible).
        per_row = 2 * beam if column_ids is not None else min(2 * beam, self.vocab_size)
        row_top_logits, row_top_ids = top_k(logits, k=per_row)  # [N, R] exact, via block maxima
        row_log_probs = row_top_logits - log_normaliser(logits, tf.nn.softmax(logits), row_top_ids[:, :1])  # [N, R]
        if column_ids is not None:
            row_top_ids = tf.gather(column_ids, row_top_ids, batch_dims=1)  # [N, R] the columns' ids
        log_probs = tf.reshape(row_log_probs, [batch, beam, per_row]) + beams.alive_log_probs[:, :, None]
        top_log_probs, top_index = tf.nn.top_k(tf.reshape(log_probs, [batch, beam * per_row]), k=2 * beam)  # [B, 2K]
        # t2t ranks log_probs / penalty(step + 1); one positive penalty for the whole
        # step gives the same order, and keeping log-probs avoids t2t's score * penalty round trip.
        source_beam = top_index // per_row  # [B, 2K]
        ids = tf.gather(tf.reshape(row_top_ids, [batch, beam * per_row]), top_index, batch_dims=1)  # [B, 2K]
        seq = write_position(_gather_beams(beams.alive_seq, source_beam), step, ids)  # [B, 2K, T]
        return _Candidates(seq, top_log_probs, tf.equal(ids, self.eos_id), source_beam), state

    def _grow_alive(self, candidates):
        """The K best candidates that did not emit EOS (t2t `grow_alive`): seq, log-probs, source beam."""
        # At most K of the 2K candidates are EOS (one per beam), so K others remain.
        log_probs = tf.where(candidates.is_eos, NEG_INF, candidates.log_probs)  # [B, 2K]
        log_probs, pick = tf.nn.top_k(log_probs, k=self.beam_size)  # [B, K]
        return _gather_beams(candidates.seq, pick), log_probs, _gather_beams(candidates.beam, pick)

    def _grow_finished(self, step, beams, candidates):
        """Merges this step's EOS candidates into the K best finished hypotheses (t2t `grow_finished`)."""
        beam = self.beam_size
        # Deviation from t2t, as fairseq and Hugging Face do: EOS ends a hypothesis only
        # when it ranks in the top K of the 2K candidates, i.e. inside the beam; the other
        # K only refill alive beams. t2t also admits ranks K..2K-1, so its beam 1 is not greedy.
        in_beam = tf.range(2 * beam) < beam  # [2K]
        finishes = candidates.is_eos & in_beam[None, :] & (candidates.log_probs > NEG_INF)  # [B, 2K]
        scores = tf.where(finishes, candidates.log_probs / length_penalty(step + 1, self.alpha), NEG_INF)  # [B, 2K]
        seq = tf.concat([beams.finished_seq, candidates.seq], axis=1)  # [B, 3K, T]
        # Old finished hypotheses come first, so on a tie the earlier one stays (as t2t).
        scores, pick = tf.nn.top_k(tf.concat([beams.finished_scores, scores], axis=1), k=beam)  # [B, K]
        return _gather_beams(seq, pick), scores

    def _gather_state(self, state, source_beam):
        """Reorders the state rows to follow the surviving alive beams: one tf.gather per tensor.

        t2t gathers the state to the 2K candidates, then to the K alive; composing the
        two indices gathers once. Done sentences are gathered too: their frozen beams
        never read the state again.
        """
        beam = self.beam_size
        rows = tf.reshape(source_beam + beam * tf.range(tf.shape(source_beam)[0])[:, None], [-1])  # [N] b*K + source
        return (state._replace(per_beam=_taken(state.per_beam, rows)) if isinstance(state, SplitState)
                else _taken(state, rows))  # [N, ...]

    def results(self, beams):
        """Each sentence's K hypotheses: the finished ones, best first, then the best alive ones in the slots
        left (as fairseq, Marian and OpenNMT-tf give); ids [B, K, T], scores [B, K].

        An alive hypothesis scores as a finished one of its length would (log-prob / penalty of its tokens), so
        where fewer than K finished (the best one at step 0, the others never within the max length) the alive
        ones fill the list: an n-best list holds n, and a finished hypothesis stays ahead of every cut-off one
        (as in t2t, whose search returns the finished alone).
        """
        beam = self.beam_size
        alive_scores = beams.alive_log_probs / length_penalty(beams.length, self.alpha)[:, None]  # [B, K]
        finished_scores, finished_pick = tf.nn.top_k(beams.finished_scores, k=beam)  # [B, K]
        alive_scores, alive_pick = tf.nn.top_k(alive_scores, k=beam)
        finished = tf.reduce_sum(tf.cast(finished_scores > NEG_INF, tf.int32), axis=1, keepdims=True)  # [B, 1]
        slot = tf.range(beam)[None]  # [1, K]
        from_alive = slot >= finished  # [B, K]
        alive_slot = tf.minimum(slot - finished, beam - 1) * tf.cast(from_alive, tf.int32)  # [B, K], 0 unused
        pick = tf.where(from_alive, beam + tf.gather(alive_pick, alive_slot, batch_dims=1), finished_pick)  # [B, K]
        scores = tf.where(from_alive, tf.gather(alive_scores, alive_slot, batch_dims=1), finished_scores)
        ids = _gather_beams(tf.concat([beams.finished_seq, beams.alive_seq], axis=1), pick)  # [B, K, T]
        # A slot with no hypothesis (score -inf: an empty finished slot or alive beam) is all PAD.
        return tf.where(scores[:, :, None] > NEG_INF, ids, 0), scores


def beam_search(symbols_to_logits_fn: SymbolsToLogitsFn, initial_state, batch_size, beam_size: int,
                vocab_size: int, max_decode_lengths, alpha: float, eos_id: int = 1,
                min_decode_lengths=None, final_beams: int | None = None,
                compact_finished: bool = False) -> tuple[tf.Tensor, tf.Tensor]:
    """Beam search over `symbols_to_logits_fn`; each sentence stops on its own.

    Args:
      symbols_to_logits_fn: (ids [N, 1], step, state) -> (logits [N, V], state); see the module doc.
      initial_state: nest of [B, ...] tensors (caches); each is repeated K times
        (tf.repeat, so row b*K + k) and gathered along the beams every step.
        Or a SplitState: its per_beam part is [N, ...] and only it is gathered.
      batch_size: B.
      beam_size: K >= 1.
      vocab_size: V >= 2.
      max_decode_lengths: int32 [B], per-sentence max output length counting the EOS.
      alpha: length penalty exponent >= 0 (paper: 0.6); the early-stop bound assumes it.
      eos_id: the end-of-sentence id.
      min_decode_lengths: int32 [B] or None; EOS is impossible before this length
        (t2t's force_decode_length when min == max).
      final_beams: how many of a sentence's best hypotheses must be final (beyond the reach
        of every alive beam) before it stops, 1 <= final_beams <= K; None: K, all of them.
        1 gives the same best hypothesis and score in fewer steps, for callers that use only it.
      compact_finished: drop sentences that are done from the rows the model runs on, once at
        most COMPACT_WHEN of them are still decoding, so later steps cost what the unfinished
        ones need. Needs a function whose every per-sentence tensor is in its state (per row, or
        a SplitState's per_sentence part, one row per sentence): the state is gathered to the
        sentences kept, so nothing captured may still hold the dropped ones. Same results.
    Returns:
      ids: int32 [B, K, T], T = max(max_decode_lengths): a sentence's finished hypotheses best first
        (EOS kept, PAD (0) after it), then the best alive ones it stopped with (no EOS) in the slots
        left, so K of them wherever K are possible; a slot with none is all PAD with score -inf.
        No start id. Only the first final_beams are sure to be the search's final ones.
      scores: float32 [B, K] summed log-probs / length_penalty(length, alpha), the length counting
        the EOS of a finished hypothesis.
    """
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be at least 2 (2K candidates come from K*V), got {vocab_size}")
    final_beams = beam_size if final_beams is None else final_beams  # the request has checked 1 <= it <= K
    max_lengths = tf.convert_to_tensor(max_decode_lengths, tf.int32)  # [B]
    min_lengths = (None if min_decode_lengths is None
                   else tf.repeat(tf.convert_to_tensor(min_decode_lengths, tf.int32), beam_size))  # [N]
    search = _BeamSearch(symbols_to_logits_fn, beam_size, vocab_size, alpha, eos_id, final_beams,
                         has_min_lengths=min_lengths is not None)
    beams = search.initial_beams(initial_state, batch_size, max_lengths, min_lengths)
    # The results of every sentence of the batch, written as sentences leave it (compact_finished) and at the end.
    results = search.results(beams)  # [B, K, T], [B, K]

    def body(step, beams, results):
        beams = search.step(step, beams)
        if not compact_finished:
            return step + 1, beams, results
        active = search.is_active(step + 1, beams)  # [B]: the sentences the next step decodes
        still = tf.reduce_sum(tf.cast(active, tf.int32))
        worth_it = (still > 0) & (tf.cast(still, tf.float32) <= COMPACT_WHEN * tf.cast(tf.size(active), tf.float32))

        def compact():
            return search.compact(beams, active), _written(results, beams.sentence, search.results(beams))

        beams, results = tf.cond(worth_it, compact, lambda: (beams, results))
        return step + 1, beams, results

    # Without compact_finished the beams keep their shapes (only a state may grow): a fixed-shape state's loop
    # compiles with XLA.
    invariants = tf.nest.map_structure(rows_free if compact_finished else lambda t: t.shape, beams)._replace(
        state=state_shape_invariants(beams.state))
    _, beams, results = tf.while_loop(
        lambda step, beams, results: tf.reduce_any(search.is_active(step, beams)), body,
        (tf.constant(0), beams, results),
        shape_invariants=(tf.TensorShape([]), invariants, tf.nest.map_structure(lambda t: t.shape, results)),
    )
    return _written(results, beams.sentence, search.results(beams))


# compact_finished drops done sentences once at most this share of the batch is still decoding: each
# drop copies the caches once, so it waits until a quarter of the rows can go.
COMPACT_WHEN = 0.75


def _written(results, sentence, found):
    """results (ids [B0, K, T], scores [B0, K]) with rows `sentence` [B] replaced by found ([B, K, T], [B, K])."""
    return tuple(tf.tensor_scatter_nd_update(whole, sentence[:, None], part) for whole, part in zip(results, found))
