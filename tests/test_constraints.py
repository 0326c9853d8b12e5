"""Constrained decoding (decoding/constraints.py): a parser's TreeConstraint (parsing/tree_constraint.py) against a
plain-Python reference, and beam and greedy search with it giving only well-formed trees where the same model
unconstrained does not."""
import dataclasses

import keras
import numpy as np
import pytest
import t2t_lite.hparams  # noqa: F401
import tensorflow as tf

from t2t_lite import config
from t2t_lite.data.trees import delinearize, linearize
from t2t_lite.decoding.beam_search import beam_search
from t2t_lite.decoding.constraints import constrain
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.decoding.sampling import SamplingSettings, greedy_decode
from t2t_lite.decoding.search_state import SplitState
from t2t_lite.models import build_model
from t2t_lite.parsing.tree_constraint import TreeConstraint
from t2t_lite.registry import hparams_sets

# A toy vocabulary: PAD, EOS, phrase opens and closes, leaves, input words, a word-internal piece.
# As a model trained without SentencePiece's dummy prefix has them: a text's first piece has no "▁"
# ("S" opens the tree, "Sat" begins the sentence), the pieces after a space do.
PIECES = ["<pad>", "</s>", "▁S", "▁NP", "▁VP", "▁/S", "▁/NP", "▁/VP", "▁DT", "▁NN", "▁VBD",
          "▁the", "▁cat", "▁sat", "s", "S", "NP", "Sat"]
ID = {piece: i for i, piece in enumerate(PIECES)}
PHRASES = [(ID["▁S"], ID["▁/S"]), (ID["▁NP"], ID["▁/NP"]), (ID["▁VP"], ID["▁/VP"])]
ROOTS = [(ID["S"], ID["▁/S"]), (ID["NP"], ID["▁/NP"])]
LEAVES = [ID["▁DT"], ID["▁NN"], ID["▁VBD"]]
WORD_STARTS = [i for i, piece in enumerate(PIECES) if piece.startswith("▁")]
V = len(PIECES)
MAX_DEPTH = 4


def reference_allowed(prefix: list[int], words: int, max_length: int, continuations=()) -> set[int]:
    """The tokens a linearised tree over `words` words may continue `prefix` with, by a plain stack walk;
    `continuations` may follow a leaf or another continuation (a word's later pieces)."""
    close_of = dict(PHRASES + ROOTS)
    stack: list[int] = []  # close ids of the open phrases
    leaves_left, has_child, done = words, False, False
    for token in prefix:
        if token in close_of:
            stack.append(close_of[token])
            has_child = False
        elif token in LEAVES:
            leaves_left -= 1
            has_child = True
        elif stack and token == stack[-1]:
            stack.pop()
            has_child = True
            done = not stack
    room = max_length - len(prefix) - 1
    if done:
        return {1}
    allowed = set()
    if leaves_left > 0 and len(stack) < MAX_DEPTH and leaves_left + len(stack) + 2 <= room:
        allowed.update(open_id for open_id, _ in (PHRASES if stack else ROOTS))
    if stack and leaves_left > 0 and leaves_left + len(stack) <= room:
        allowed.update(LEAVES)
    if stack and has_child and (len(stack) > 1 or leaves_left == 0) and leaves_left + len(stack) <= room:
        allowed.add(stack[-1])
    in_word = bool(prefix) and (prefix[-1] in LEAVES or prefix[-1] in continuations)
    if in_word and leaves_left + len(stack) + 1 <= room:
        allowed.update(continuations)
    if not stack and not prefix and words == 0:
        allowed.add(1)
    return allowed or {1}


def constraint(continuations=()):
    return TreeConstraint(V, PHRASES, LEAVES, WORD_STARTS, roots=ROOTS, eos_id=1, max_depth=MAX_DEPTH,
                          continuations=continuations)


def inputs_with_words(counts: list[int]) -> np.ndarray:
    """Inputs with counts[b] words (alternating whole words and two-piece words), EOS and PAD after.

    The first word of every other row begins without "▁", as a text's first word does without a dummy prefix.
    """
    width = 2 * max(counts) + 2
    rows = np.zeros([len(counts), width], np.int32)
    for b, count in enumerate(counts):
        pieces = []
        for w in range(count):
            pieces += [ID["▁cat"], ID["s"]] if w % 2 else [ID["▁the"]]
        if count and b % 2:
            pieces[0] = ID["Sat"]
        rows[b, :len(pieces) + 1] = pieces + [1]
    return rows


# Without continuations "s" is an OTHER token, never allowed; with them, the word-internal piece may
# follow a leaf (the "words" target form, where a leaf is a word's first piece).
@pytest.mark.parametrize("continuations", [(), (ID["s"],)], ids=["one-token leaves", "with continuations"])
def test_allowed_tokens_match_the_reference_along_random_walks(continuations):
    rng = np.random.default_rng(0)
    words = [0, 1, 2, 3, 5, 1, 4, 2]
    max_lengths = [8, 5, 12, 30, 30, 3, 9, 7]  # some too short for every tree, some tight
    tree = constraint(continuations)
    state = tree.initial_state(tf.constant(inputs_with_words(words)), tf.constant(max_lengths))
    prefixes: list[list[int]] = [[] for _ in words]
    ids = np.zeros([len(words)], np.int32)  # the start id
    for step in range(30):
        state = tree.advance(state, tf.constant(ids))
        allowed = tree.allowed(state, tf.constant(step)).numpy()
        for row, prefix in enumerate(prefixes):
            expected = reference_allowed(prefix, words[row], max_lengths[row], continuations)
            assert set(np.flatnonzero(allowed[row])) == expected, (row, step, [PIECES[t] for t in prefix])
            ids[row] = rng.choice(sorted(expected))
            prefix.append(int(ids[row]))


def toy_model(bias: np.ndarray):
    """A model function whose logits depend on the previous token and the step, and a state it carries."""
    rng = np.random.default_rng(1)
    table = tf.constant(rng.normal(size=[V, V]).astype(np.float32) + bias[None, :])

    def fn(ids, step, state):
        logits = tf.gather(table, ids[:, 0]) + 0.3 * tf.sin(tf.cast(step, tf.float32) + tf.range(V, dtype=tf.float32))
        return logits, tf.nest.map_structure(lambda t: t + 1, state)

    return fn


def trees_of(ids: np.ndarray) -> list[list[str]]:
    """Each output's tokens up to its EOS, without the "▁"; None where it never ended."""
    outputs = []
    for row in ids:
        tokens = [int(t) for t in row]
        outputs.append([PIECES[t].removeprefix("▁") for t in tokens[:tokens.index(1)]] if 1 in tokens else None)
    return outputs


def is_tree_over(tokens, words: int) -> bool:
    """Whether tokens are a linearised tree over `words` words: the scorer would need no repair."""
    sentence = [f"w{i}" for i in range(words)]
    return tokens is not None and linearize(delinearize(sentence, tokens))[1] == tokens


# Leaves and closes likely, opens rare, EOS likely early: unconstrained outputs are rarely trees.
BIAS = np.zeros([V], np.float32)
BIAS[[ID["▁/NP"], ID["▁NN"], 1]] = 2.0


@pytest.mark.parametrize("beams", [1, 4])
def test_search_with_the_constraint_gives_trees_the_same_model_does_not(beams):
    counts = [1, 3, 6, 2]
    inputs = inputs_with_words(counts)
    max_lengths = tf.constant([c * 4 + 6 for c in counts])
    fn = toy_model(BIAS)
    state = tf.zeros([len(counts), 2])
    if beams > 1:
        state = SplitState(per_beam=tf.zeros([len(counts) * beams, 1]), per_sentence=state)

    def search(fn, state):
        if beams == 1:
            ids, _ = greedy_decode(fn, state, len(counts), max_lengths)
            return ids.numpy()[:, None]
        return beam_search(fn, state, len(counts), beams, V, max_lengths, alpha=0.6)[0].numpy()

    free = search(fn, state)
    assert not all(is_tree_over(tokens, count) for tokens, count in zip(trees_of(free[:, 0]), counts))
    constrained = search(*constrain(fn, state, constraint(), tf.constant(inputs), max_lengths, beams))
    for k in range(beams):
        for tokens, count in zip(trees_of(constrained[:, k]), counts):
            assert is_tree_over(tokens, count), tokens


# Beam 1 searches greedily or samples through one path (greedy_decode), and an ensemble's mean is taken inside
# the model function the constraint wraps: beam search and sampling cover the decoder's two searches.
@pytest.mark.parametrize("search", ["beam", "sampling"])
def test_the_decoder_with_a_constraint_gives_only_trees(search):
    # One layer each side: the search and the constraint do not depend on the depth, and each layer adds tracing.
    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(),
                                     f"vocab_size={V},num_encoder_layers=1,num_decoder_layers=1")
    keras.utils.set_random_seed(1)
    models = build_model(hparams)
    decode = dataclasses.replace(hparams.decode, beam_size=1 if search == "sampling" else 3,
                                 extra_length=12)
    sampling = SamplingSettings(temperature=1.0, seed=7) if search == "sampling" else None
    counts = [1, 2, 4, 3, 5]
    inputs = inputs_with_words(counts)
    free = Decoder(models, decode, sampling=sampling).decode(inputs)[0].numpy()
    assert not all(is_tree_over(tokens, count) for tokens, count in zip(trees_of(free[:, 0]), counts))
    ids = Decoder(models, decode, sampling=sampling, constraint=constraint()).decode(inputs)[0].numpy()
    for k in range(ids.shape[1]):
        for tokens, count in zip(trees_of(ids[:, k]), counts):
            assert is_tree_over(tokens, count), tokens
