"""Decoding only the outputs a problem allows: a per-hypothesis automaton that forbids tokens.

An `OutputConstraint` is a small automaton run beside every hypothesis. `constrain` wraps a search's
symbols_to_logits_fn: each step it advances every row's automaton by the token that row chose last
(the row's previous id, the start id at step 0), runs the model, and sets the logits of every token the
automaton forbids to -inf. The automaton's state rides in the search state (in a SplitState's per-beam
part), so beam search reorders it with the beams and greedy search keeps it per row; neither search
knows it is there, and a row that dies in beam search can hold any state without harm.

A constraint that also says which ids each sentence can emit at all (`columns`) lets the model score only
those: `constrain` with `shortlist=True` (then the model function returns a search_state.Shortlist over
them), unless a step's `needs_whole_vocabulary`. A step then costs what the shortlist costs, not V.

A problem gives its own (Problem.output_constraint).
"""
from typing import Protocol

import tensorflow as tf

from t2t_lite.decoding.search_state import NEG_INF, Shortlist, SplitState, SymbolsToLogitsFn, columns_of, repeated_rows
from t2t_lite.errors import UserError


class OutputConstraint(Protocol):
    """What `constrain` needs: a start state per sentence, a step of the automaton, the allowed tokens."""

    def initial_state(self, inputs: tf.Tensor, max_lengths: tf.Tensor):
        """A nest of [B, ...] tensors from the inputs int32 [B, T_src] and max output lengths int32 [B]."""

    def advance(self, state, ids: tf.Tensor):
        """The state after each row emitted ids int32 [N] (the start id 0 leaves it unchanged)."""

    def allowed(self, state, step: tf.Tensor, tokens: tf.Tensor | None = None) -> tf.Tensor:
        """bool [N, V]: the tokens each row may emit at position `step` (never none); for a shortlist's
        columns (tokens int32 [B, W], the id each of a sentence's columns stands for), bool [N, W]."""

    def columns(self, inputs: tf.Tensor) -> tf.Tensor | None:
        """int32 [B, C]: each sentence's every possible output id, once each, PAD (0, never allowed) first and
        as padding; None: any id (no shortlist)."""

    def needs_whole_vocabulary(self, state) -> tf.Tensor:
        """bool scalar: whether some row may now emit an id outside its sentence's columns."""


def shortlist_columns(constraint: OutputConstraint, inputs, rows_per_sentence: int) -> tf.Tensor | None:
    """int32 [B, C]: the constraint's columns for `inputs`, padded with PAD to at least the 2K columns a beam
    search ranks per row; None when the constraint gives none."""
    # A constraint written before shortlists has no `columns`: it gets none.
    columns = getattr(constraint, "columns", lambda inputs: None)(inputs)
    return (None if columns is None
            else tf.pad(columns, [[0, 0], [0, tf.maximum(2 * rows_per_sentence - tf.shape(columns)[1], 0)]]))


def constrain(symbols_to_logits_fn: SymbolsToLogitsFn, initial_state, constraint: OutputConstraint,
              inputs, max_lengths, rows_per_sentence: int,
              shortlist: bool = False) -> tuple[SymbolsToLogitsFn, object]:
    """A search's model function and initial state with `constraint` applied to every step's logits.

    Args:
      symbols_to_logits_fn, initial_state: as beam_search and greedy_decode take them; a SplitState's
        per_beam part is already one row per beam, a plain state is one row per sentence.
      constraint: the automaton.
      inputs: int32 [B, T_src], the sentences being decoded.
      max_lengths: int32 [B], their max output lengths (counting the EOS).
      rows_per_sentence: the beam size K for beam search, 1 for greedy search and sampling.
      shortlist: symbols_to_logits_fn takes `whole_vocabulary` (bool scalar) and returns a Shortlist over
        each sentence's `shortlist_columns` unless it is true (then the logits of every id).
    Returns:
      (fn, state) to give the search in place of the two.
    """
    start = constraint.initial_state(inputs, tf.convert_to_tensor(max_lengths, tf.int32))  # [B, ...]
    # A SplitState's per-beam part has a row per beam already; a plain state the search repeats K times itself.
    if isinstance(initial_state, SplitState):
        start = repeated_rows(start, rows_per_sentence)  # [N, ...]

    def constrained_fn(ids, step, state):
        if isinstance(state, SplitState):
            (per_beam, automaton) = state.per_beam
            inner = state._replace(per_beam=per_beam)
        else:
            inner, automaton = state
        automaton = constraint.advance(automaton, ids[:, 0])
        if shortlist:
            whole = constraint.needs_whole_vocabulary(automaton)
            output, inner = symbols_to_logits_fn(ids, step, inner, whole_vocabulary=whole)
            logits, column_ids = columns_of(output)  # [N, W] and the ids they stand for
            allowed = tf.cond(whole, lambda: constraint.allowed(automaton, step),  # [N, V]
                              lambda: constraint.allowed(automaton, step, column_ids[::rows_per_sentence]))  # [N, W]
            logits = Shortlist(tf.where(allowed, logits, tf.constant(NEG_INF, logits.dtype)), column_ids)
        else:
            logits, inner = symbols_to_logits_fn(ids, step, inner)  # [N, V]
            logits = tf.where(constraint.allowed(automaton, step), logits, tf.constant(NEG_INF, logits.dtype))
        return logits, _with_automaton(inner, automaton)

    return constrained_fn, _with_automaton(initial_state, start)


def _with_automaton(state, automaton):
    """A search's state with the constraint's automaton: beside a SplitState's per-beam part, which the search
    gathers along the beams, or paired with a plain state."""
    return state._replace(per_beam=(state.per_beam, automaton)) if isinstance(state, SplitState) else (state, automaton)


def problem_constraint(problem, decode_hparams) -> OutputConstraint | None:
    """The constraint a Decoder of `problem` applies: its output_constraint() when decode_hparams ask for one.

    Raises:
      UserError: constrained decoding is asked of a problem without a constraint.
    """
    if not decode_hparams.constrained_decoding:
        return None
    constraint = problem.output_constraint()
    if constraint is None:
        raise UserError(f"`constrained_decoding`: problem {type(problem).__name__} has no output constraint "
                        "(parsing problems do: well-formed trees); decode without it")
    return constraint
