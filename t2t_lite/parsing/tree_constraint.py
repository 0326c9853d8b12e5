"""A parser's output constraint (decoding/constraints.py's OutputConstraint): outputs that are bracketed
linearised trees over the input's words, tensor2tensor's parsing targets ("S NP DT NN /NP VP VBD /VP . /S",
a POS tag per word) or the words themselves in their brackets ("(S (NP The cat )NP (VP sat )VP . )S", a word
of one or more pieces each).
"""
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from t2t_lite.data.problem import PAD_ID
from t2t_lite.decoding.search_state import repeated_rows

# Token kinds in TreeConstraint's table; OTHER covers PAD (the start id), EOS and everything else.
OTHER, OPEN, CLOSE, LEAF, CONTINUATION = 0, 1, 2, 3, 4
INSIDE_OPEN, ROOT_OPEN = 8, 16  # flags added to a kind in TreeConstraint.code: an open token inside the tree, a root's


class TreeConstraint:
    """Outputs that are linearised trees over the input's words: labelled brackets balanced, a leaf per word.

    A phrase opens with its label's token and ends with that label's close token; a leaf (a POS tag, or
    a word's first piece) stands for one input word, and continuations (a word's later pieces) may follow
    a leaf. The tokens allowed next:
      before anything, a root's open token, or EOS for an input without words;
      inside a phrase, a leaf or an open token while fewer leaves than words were emitted; the close
        of the innermost open phrase once it has a child, and for the root once every word has its leaf;
      right after a leaf or a continuation, also a continuation;
      after the root closed, EOS only.
    With copy_words, the words are the input's own pieces in order: the only leaf allowed is the input's
    next word-start piece, and a word once begun must be finished with the input's continuation pieces
    (nothing else may come between). A text's first word has no "▁" in the input but has one in the
    output, so that word alone is free (any leaf, then any continuations).
    Each also needs room: after it, the shortest way to finish (a leaf per word left, or with copy_words
    a piece per input piece left; a close per open phrase; the EOS) must fit the sentence's max length,
    so no hypothesis is cut off half a tree.

    Args:
      vocab_size: V.
      phrases: (open id, close id) of each phrase label inside the tree.
      leaves: the ids of leaf tokens.
      continuations: the ids of tokens that may only follow a leaf or another continuation, and do not
        count as a word (a word's pieces after its first); none for one-token leaves.
      word_starts: the ids of input pieces that begin a word (SentencePiece's "▁" pieces): an input's
        word count is how many it holds, plus one when its first piece is another (a model trained
        without SentencePiece's dummy prefix begins a text without "▁").
      roots: (open id, close id) of the labels that may open the tree, for the same reason often
        other pieces than inside it ("S" first, "▁S" after a space); None: the phrases.
      eos_id: the end-of-sentence id.
      max_depth: phrases open at once at most (opening one more is refused).
      copy_words: leaves and continuations copy the input's pieces (see above).
      max_opens_in_a_row: phrases opened one after another at most before a word; None: no limit. A
        model that would write another word than the one it must copy otherwise opens phrase after
        phrase instead, until the sentence's length runs out.
    """

    def __init__(self, vocab_size: int, phrases: Sequence[tuple[int, int]], leaves: Sequence[int],
                 word_starts: Sequence[int], roots: Sequence[tuple[int, int]] | None = None, eos_id: int = 1,
                 max_depth: int = 64, continuations: Sequence[int] = (), copy_words: bool = False,
                 max_opens_in_a_row: int | None = None):
        roots = phrases if roots is None else roots
        if not phrases or not roots or not len(leaves):
            raise ValueError("a tree constraint needs at least one phrase label, one root label and one leaf token")
        kind = np.full([vocab_size], OTHER, np.int32)
        close_of = np.zeros([vocab_size], np.int32)
        for open_id, close_id in [*phrases, *roots]:
            kind[open_id], kind[close_id], close_of[open_id] = OPEN, CLOSE, close_id
        kind[list(leaves)] = LEAF
        kind[list(continuations)] = CONTINUATION
        ids = np.arange(vocab_size)
        inside_open, root_open = (np.isin(ids, [open_id for open_id, _ in labels]) for labels in (phrases, roots))
        self.vocab_size, self.eos_id, self.max_depth, self.copy_words = vocab_size, eos_id, max_depth, copy_words
        self.max_opens_in_a_row = max_opens_in_a_row or max_depth
        self.kind, self.close_of = tf.constant(kind), tf.constant(close_of)  # [V]
        self.is_word_start = tf.constant(np.isin(ids, list(word_starts)))  # [V]
        # The three tables in one, for a shortlist's columns: one lookup a step instead of three.
        self.code = tf.constant(kind + INSIDE_OPEN * inside_open + ROOT_OPEN * root_open)  # [V]
        # The ids any sentence may emit, whatever its words: PAD (the start id, column 0) and EOS first, then
        # the brackets; without copy_words every leaf and continuation too (with it, a sentence's own pieces).
        fixed = [PAD_ID, eos_id, *sorted({i for pair in [*phrases, *roots] for i in pair})]
        if not copy_words:
            fixed += sorted(set(leaves) | set(continuations))
        self.fixed_ids = tf.constant(list(dict.fromkeys(fixed)), tf.int32)  # [F], each id once
        self.in_fixed = tf.constant(np.isin(ids, fixed))  # [V]

    def initial_state(self, inputs, max_lengths):
        inputs = tf.convert_to_tensor(inputs, tf.int32)
        starts = tf.gather(self.is_word_start, inputs)  # [B, T_src]
        # The words of each input: its word-start pieces, and its first if that is another piece.
        first = inputs[:, 0]  # [B]; PAD only in an empty batch row, EOS for an empty input
        unmarked_first = (first != PAD_ID) & (first != self.eos_id) & ~starts[:, 0]
        words = tf.reduce_sum(tf.cast(starts, tf.int32), axis=1) + tf.cast(unmarked_first, tf.int32)  # [B]
        batch = tf.shape(words)[0]
        state = {
            "depth": tf.zeros([batch], tf.int32),  # phrases open
            "leaves_left": words,  # words still without a leaf
            "closes": tf.zeros([batch, self.max_depth], tf.int32),  # the close id of each open phrase, outermost first
            "has_child": tf.zeros([batch], tf.bool),  # whether the innermost open phrase has a child yet
            "in_word": tf.zeros([batch], tf.bool),  # the last token was a leaf or a continuation
            "opens_in_a_row": tf.zeros([batch], tf.int32),  # phrases opened since the last other token
            "done": tf.zeros([batch], tf.bool),  # the root has closed
            "max_length": tf.convert_to_tensor(max_lengths, tf.int32),
        }
        if self.copy_words:
            free_first = ~starts[:, 0]  # the first word has no "▁" (or there is no word)
            # The first piece to copy: the first word's, or the second word's when the first is free.
            later = tf.concat([tf.zeros_like(starts[:, :1]), starts[:, 1:]], axis=1)  # [B, T_src]
            second_start = tf.argmax(tf.cast(later, tf.int32), axis=1, output_type=tf.int32)  # [B]
            # [B] the second word's first piece, or the last position (EOS or PAD) when there is no second word.
            first_later = tf.where(tf.reduce_any(later, axis=1), second_start, tf.shape(inputs)[1] - 1)
            pointer = tf.where(free_first, first_later, 0)  # [B]
            pieces = (inputs != PAD_ID) & (inputs != self.eos_id)  # [B, T_src]
            after_pointer = tf.range(tf.shape(inputs)[1])[None, :] >= pointer[:, None]  # [B, T_src]
            free_first = free_first & (words > 0)
            state.update({
                "source": tf.concat([inputs, tf.zeros_like(inputs[:, :1])], axis=1),  # [B, T_src + 1], PAD after
                "pointer": pointer,  # the next input piece to copy
                # Pieces still to write: those to copy, and the free first word's first.
                "pieces_left": tf.reduce_sum(tf.cast(pieces & after_pointer, tf.int32), axis=1)
                + tf.cast(free_first, tf.int32),
                "words": words,
                "free_first": free_first,
                "in_free_word": tf.zeros([batch], tf.bool),  # inside the free first word
            })
        return state

    def advance(self, state, ids):
        kind = tf.gather(self.kind, ids)  # [N]
        is_open, is_close, is_leaf, is_continuation = kind == OPEN, kind == CLOSE, kind == LEAF, kind == CONTINUATION
        depth = state["depth"]
        # A dead beam may hold a forbidden token; clipping keeps its state in range (its outputs never count).
        slot = tf.one_hot(tf.minimum(depth, self.max_depth - 1), self.max_depth, dtype=tf.int32)  # [N, D]
        opened_close = slot * tf.gather(self.close_of, ids)[:, None]  # [N, D]: the new phrase's close at its depth
        closes = tf.where(is_open[:, None], state["closes"] * (1 - slot) + opened_close, state["closes"])
        depth = tf.clip_by_value(depth + tf.cast(is_open, tf.int32) - tf.cast(is_close, tf.int32), 0, self.max_depth)
        advanced = {
            **state,  # what never changes: the max length, and with copy_words the source, words and free_first
            "depth": depth,
            "leaves_left": state["leaves_left"] - tf.cast(is_leaf, tf.int32),
            "closes": closes,
            "has_child": tf.where(is_open, False, state["has_child"] | is_close | is_leaf),
            "in_word": is_leaf | is_continuation,
            "opens_in_a_row": tf.where(is_open, state["opens_in_a_row"] + 1, 0),
            "done": state["done"] | (is_close & (depth == 0)),
        }
        if self.copy_words:
            free_leaf = is_leaf & state["free_first"] & (state["leaves_left"] == state["words"])  # [N]
            free = free_leaf | (is_continuation & state["in_free_word"])  # [N]: a piece of the free first word
            copied = (is_leaf | is_continuation) & ~free
            advanced.update(pointer=state["pointer"] + tf.cast(copied, tf.int32), in_free_word=free,
                            pieces_left=state["pieces_left"] - tf.cast(copied | free_leaf, tf.int32))
        return advanced

    def columns(self, inputs) -> tf.Tensor:
        """int32 [B, C]: every id each sentence's outputs can hold, each once, PAD (0) first; more PAD pads.

        The brackets, PAD and EOS, and either every leaf and continuation or (copy_words) the sentence's own
        pieces. With copy_words a free first word may be any word (needs_whole_vocabulary says when).
        """
        inputs = tf.convert_to_tensor(inputs, tf.int32)
        fixed = tf.tile(self.fixed_ids[None, :], [tf.shape(inputs)[0], 1])  # [B, F]
        if not self.copy_words:
            return fixed
        width = tf.shape(inputs)[1]
        # A piece counts once: not where it is a fixed id, nor where an earlier position holds it.
        earlier = tf.range(width)[None, :] < tf.range(width)[:, None]  # [T_src, T_src]: j < i
        repeated = tf.reduce_any((inputs[:, :, None] == inputs[:, None, :]) & earlier[None], axis=2)  # [B, T_src]
        pieces = tf.where(repeated | tf.gather(self.in_fixed, inputs), PAD_ID, inputs)  # [B, T_src]
        return tf.concat([fixed, pieces], axis=1)

    def needs_whole_vocabulary(self, state) -> tf.Tensor:
        """bool scalar: whether some row may emit an id outside its sentence's `columns`: it is in a free
        first word (copy_words), which may be any word."""
        if not self.copy_words:
            return tf.constant(False)
        before_its_leaf = state["free_first"] & (state["leaves_left"] == state["words"])  # [N]
        return tf.reduce_any(before_its_leaf | state["in_free_word"])

    def allowed(self, state, step, tokens=None):
        """bool [N, V]: the tokens each row may emit at `step`; for a shortlist's columns (tokens, int32
        [B, W], the id each of a sentence's columns stands for, shared by its rows), bool [N, W]."""
        depth, leaves_left, done = state["depth"], state["leaves_left"], state["done"]
        inside = depth > 0
        # Positions left after this token, and the fewest tokens that finish a tree after it (EOS included).
        room = state["max_length"] - step - 1  # [N]
        # After a leaf or a close; an open adds its close: + 2. Copying, every piece left counts.
        shortest_finish = (state["pieces_left"] if self.copy_words else leaves_left) + depth
        at_start = ~inside & ~done
        open_ok = ((leaves_left > 0) & (depth < self.max_depth) & (state["opens_in_a_row"] < self.max_opens_in_a_row)
                   & (shortest_finish + 2 <= room))
        leaf_ok = inside & (leaves_left > 0) & (shortest_finish <= room)
        close_ok = inside & state["has_child"] & ((depth > 1) | (leaves_left == 0)) & (shortest_finish <= room)
        innermost_close = tf.gather(state["closes"], tf.maximum(depth - 1, 0), batch_dims=1)  # [N]
        if tokens is None:
            token, code = tf.range(self.vocab_size)[None, :], self.code[None, :]  # [1, V]
        else:  # looked up per sentence, then repeated for its rows (beams)
            rows_per_sentence = tf.shape(depth)[0] // tf.shape(tokens)[0]
            token, code = repeated_rows((tokens, tf.gather(self.code, tokens)), rows_per_sentence)
        kind = code % INSIDE_OPEN  # [1|N, V|W]
        leaves = kind == LEAF
        continuation_ok = state["in_word"] & (shortest_finish + 1 <= room)  # a piece more than a word's first
        continuations = (kind == CONTINUATION) & continuation_ok[:, None]  # [N, V]
        if self.copy_words:
            leaves, continuations, open_ok, close_ok = self._copy(state, token, leaves, continuations, open_ok,
                                                                  close_ok, shortest_finish <= room)
        is_eos = token == self.eos_id
        allowed = ((((code & INSIDE_OPEN) > 0) & (inside & open_ok)[:, None])
                   | (((code & ROOT_OPEN) > 0) & (at_start & open_ok)[:, None])
                   | (leaves & leaf_ok[:, None])
                   | continuations
                   | ((token == innermost_close[:, None]) & close_ok[:, None])
                   | (is_eos & (done | (at_start & (leaves_left == 0)))[:, None]))  # [N, V]
        # A row with nothing left (a dead beam, or a max length too short for any tree) may end: a row of
        # -inf logits would make NaN log-probs.
        stuck = ~tf.reduce_any(allowed, axis=1)  # [N]
        return allowed | (is_eos & stuck[:, None])

    def _copy(self, state, token, leaves, continuations, open_ok, close_ok, copy_fits):
        """`allowed`'s leaves and continuations [N, V], and open_ok and close_ok [N], when words are copied;
        token [1, V] or [N, W], the ids the columns stand for; copy_fits [N]: whether the tree can still be
        finished after copying one more piece (pieces_left counts it already, so it needs no more room than
        a leaf)."""
        width = tf.shape(state["source"])[1]
        next_piece = tf.gather(state["source"], tf.minimum(state["pointer"], width - 1), batch_dims=1)  # [N]
        is_next = token == next_piece[:, None]  # [N, V]
        next_kind = tf.gather(self.kind, next_piece)  # [N]
        first_free = state["free_first"] & (state["leaves_left"] == state["words"])  # [N]
        in_free_word = state["in_free_word"]
        # A copied word begun and not finished: only its next piece may follow.
        finishing = state["in_word"] & ~in_free_word & (next_kind == CONTINUATION)  # [N]
        leaves = leaves & (first_free[:, None] | (is_next & ~finishing[:, None]))
        continuations = (continuations & in_free_word[:, None]) | (is_next & (finishing & copy_fits)[:, None])
        return leaves, continuations, open_ok & ~finishing, close_ok & ~finishing
