"""The "words" target form of parsing (data/target_forms.py): the words in their brackets, no POS tags.

linearize_with_words / delinearize_with_words on the PTB sample, the registered variant's data and
vocabulary, and its output constraint accepting every gold target and nothing that drops a word's place.
"""
import random

import numpy as np
import pytest
import tensorflow as tf

import t2t_lite.problems  # noqa: F401  (registers the problems)
from t2t_lite.data.pieces import SentencePieceCodec
from t2t_lite.data.target_forms import (
    TARGET_FORMS,
    delinearize_with_words,
    linearize_with_words,
    placeholder_tag,
    without_tags,
)
from t2t_lite.data.trees import Tree, parse_tree_string, read_mrg, readable, strip_tree, tree_to_string
from t2t_lite.metrics.parse_f1 import score_corpus
from t2t_lite.problems.wsj_parsing import MAX_OPENS_IN_A_ROW, WORDS_TARGET_SYMBOLS, score_linearized
from t2t_lite.registry import problems
from shared_data import require_shared

CAT = "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)))"
CAT_WORDS = ["The", "cat", "sat", "."]
CAT_TOKENS = ["(S", "(NP", "The", "cat", ")NP", "(VP", "sat", ")VP", ".", ")S"]
WORDS = TARGET_FORMS["words"]


@pytest.fixture(scope="module")
def sample_trees():
    mrg_dir = require_shared("ptb_wsj_sample/mrg")
    return [strip_tree(tree) for path in sorted(mrg_dir.glob("wsj_*.mrg")) for tree in read_mrg(path)]


def test_the_reference_example_in_the_words_form():
    assert linearize_with_words(parse_tree_string(CAT)) == (CAT_WORDS, CAT_TOKENS)
    assert readable(delinearize_with_words(CAT_WORDS, CAT_TOKENS)) == (
        "(S (NP (XX The) (XX cat)) (VP (XX sat)) (. .))")


def test_every_sample_tree_round_trips_without_its_tags(sample_trees):
    assert len(sample_trees) > 3000
    for tree in sample_trees:
        words, tokens = linearize_with_words(tree)
        assert words == tree.words()
        assert delinearize_with_words(words, tokens) == without_tags(tree), tree_to_string(tree)


def test_the_sentence_fills_the_places_of_words_the_model_copied_wrongly():
    tokens = ["(S", "(NP", "A", "dog", ")NP", "(VP", "ran", ")VP", "!", ")S"]
    assert delinearize_with_words(CAT_WORDS, tokens) == delinearize_with_words(CAT_WORDS, CAT_TOKENS)


@pytest.mark.parametrize("tokens, expected", [
    # Too few places: leftover words join the top phrase.
    ("(S (NP The )NP )S", "(TOP (S (NP (XX The)) (XX cat) (XX sat) (. .)))"),
    # A close left out: the phrase closes with its parent.
    ("(S (NP The cat (VP sat )VP . )S", "(TOP (S (NP (XX The) (XX cat) (VP (XX sat)) (. .))))"),
    # A label outside PTB's set is a phrase because it was opened as one.
    ("(S (ZP The cat )ZP sat . )S", "(TOP (S (ZP (XX The) (XX cat)) (XX sat) (. .)))"),
    # Nothing: a flat tree.
    ("", "(TOP (XX The) (XX cat) (XX sat) (. .))"),
])
def test_malformed_outputs_are_repaired_into_trees_over_the_sentence(tokens, expected):
    assert delinearize_with_words(CAT_WORDS, tokens.split()) == parse_tree_string(expected)


def test_words_survive_random_corruption(sample_trees):
    rng = random.Random(0)
    for tree in sample_trees[:300]:
        words, tokens = linearize_with_words(tree)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(tokens) + 1)
            edit = rng.choice(["delete", "close", "open", "word", "truncate"])
            if edit == "delete" and at < len(tokens):
                del tokens[at]
            elif edit in ("close", "open", "word"):
                tokens.insert(at, {"close": ")NP", "open": "(VP", "word": "the"}[edit])
            else:
                del tokens[at:]
        repaired = delinearize_with_words(words, tokens)
        assert repaired.words() == words
        assert [leaf.label for leaf in repaired.preterminals()] == [placeholder_tag(word) for word in words]


def test_words_trees_score_as_their_tagged_trees_under_evalb(sample_trees):
    # EVALB deletes punctuation by its tag before counting spans: the "words" form puts those tags back.
    counts = score_corpus(sample_trees, [without_tags(tree) for tree in sample_trees])
    assert counts.errors == 0 and counts.f1 > 99.99
    # EVALB deletes the words its punctuation tags mark: every one of them keeps its tag (and no other
    # word gets one) but for a handful in the ~10,000.
    deleted = {",", ":", "``", "''", "."}
    pairs = [(gold.label, kept.label) for tree in sample_trees
             for gold, kept in zip(tree.preterminals(), without_tags(tree).preterminals())]
    wrong = sum((gold in deleted) != (kept in deleted) or (gold in deleted and gold != kept) for gold, kept in pairs)
    assert sum(gold in deleted for gold, _ in pairs) > 10_000 and wrong < 80


def test_a_word_holding_a_bracket_is_refused():
    with pytest.raises(ValueError, match="-LRB-"):
        linearize_with_words(Tree("TOP", (Tree("S", (Tree("NN", ("a(b",)),)),)))


@pytest.fixture(scope="module")
def words_problem(tmp_path_factory):
    """parsing_ptb_sample_words prepared on the shared sample, vocabulary 1,000."""
    mrg_dir = require_shared("ptb_wsj_sample/mrg")
    data_dir = str(tmp_path_factory.mktemp("words"))
    problem = problems.get("parsing_ptb_sample_words")(data_dir)
    problem.generate_data(str(mrg_dir), vocab_size=1000, num_shards=1, log=lambda line: None)
    return problem


def dev_pairs(problem, count):
    pairs = []
    for example in problem.dataset("dev").take(count):
        pairs.append(tuple(problem.decode(example[name].numpy()) for name in ("inputs", "targets")))
    return pairs


def test_the_variant_writes_words_targets_with_brackets_as_single_pieces(words_problem):
    for words, target in dev_pairs(words_problem, 40):
        tree = WORDS.delinearize(words.split(), target.split())
        assert WORDS.linearize(tree) == (words.split(), target.split())
    pieces = SentencePieceCodec(words_problem.vocabulary.model).pieces
    assert set(WORDS_TARGET_SYMBOLS) <= set(pieces)
    assert [pieces[i] for i in words_problem.encode("(S (NP the )NP )S")] == ["(S", "▁(NP", "▁the", "▁)NP", "▁)S"]


def walk(constraint, inputs, targets, max_length=None):
    """Each target's tokens through the constraint: bool [B, T] whether each was allowed when emitted
    (max_length: the outputs', default just long enough)."""
    max_length = max_length or targets.shape[1] + 1
    state = constraint.initial_state(tf.constant(inputs), tf.fill([len(inputs)], max_length))
    ids = tf.zeros([len(inputs)], tf.int32)
    allowed = []
    for step in range(targets.shape[1]):
        state = constraint.advance(state, ids)
        ok = constraint.allowed(state, tf.constant(step)).numpy()
        allowed.append(ok[np.arange(len(inputs)), targets[:, step]])
        ids = tf.constant(targets[:, step])
    return np.stack(allowed, axis=1)


def padded(rows):
    out = np.zeros([len(rows), max(map(len, rows))], np.int32)
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out


def test_the_constraint_allows_every_gold_target_and_no_word_out_of_place(words_problem):
    examples = list(words_problem.dataset("dev").take(60))
    inputs = padded([e["inputs"].numpy() for e in examples])
    targets = padded([e["targets"].numpy() for e in examples])
    constraint = words_problem.output_constraint()
    allowed = walk(constraint, inputs, targets)
    assert allowed[targets > 0].all()
    # A word's later piece straight after a bracket, and a word too many, are refused.
    pieces = SentencePieceCodec(words_problem.vocabulary.model).pieces
    ids = {piece: i for i, piece in enumerate(pieces)}
    continuation = next(i for i, p in enumerate(pieces[3:], 3) if not p.startswith("▁") and p not in WORDS_TARGET_SYMBOLS)
    one_word = padded([words_problem.encode("the") + [1]])
    # (A refused token leaves the automaton where no gold output goes, so each walk ends at its refusal.)
    assert walk(constraint, one_word, np.array([[ids["(S"], continuation]]), 10)[0].tolist() == [True, False]
    two_words = np.array([[ids["(S"], ids["▁the"], ids["▁the"]]])
    assert walk(constraint, one_word, two_words, 10)[0].tolist() == [True, True, False]
    assert walk(constraint, one_word, np.array([[ids["(S"], ids["▁the"], ids["▁)S"], 1]]), 10)[0].all()


def test_gold_against_gold_scores_100_and_a_wrong_bracket_scores_what_evalb_gives(words_problem):
    pairs = dev_pairs(words_problem, 30)
    sources, references = [p[0] for p in pairs], [p[1] for p in pairs]
    counts, repaired = score_linearized(references, references, sources, WORDS)
    assert (counts.f1, repaired) == (100.0, 0)
    # "(S (NP The cat )NP (VP sat )VP . )S" against "(S (NP The cat sat )NP . )S": S matches, NP does not
    # (its span differs), VP is missing: recall 1/3, precision 1/2.
    counts, _ = score_linearized(["(S (NP The cat sat )NP . )S"], [" ".join(CAT_TOKENS)], [" ".join(CAT_WORDS)], WORDS)
    assert (counts.matched, counts.gold, counts.predicted) == (1, 3, 2)


def test_random_walks_through_the_constraint_copy_the_sentence_and_end_as_trees(words_problem):
    # Whatever the model prefers, a finished output is a tree whose words are the input's own pieces in
    # order (the first word, which has no "▁" in the input, only counted), with at most MAX_OPENS_IN_A_ROW
    # phrases opened before a word.
    examples = list(words_problem.dataset("dev").take(16))
    inputs = padded([e["inputs"].numpy() for e in examples])
    max_length = inputs.shape[1] + 60
    constraint = words_problem.output_constraint()
    rng = np.random.default_rng(0)
    state = constraint.initial_state(tf.constant(inputs), tf.fill([len(inputs)], max_length))
    ids = np.zeros([len(inputs)], np.int32)
    outputs = [[] for _ in examples]
    for step in range(max_length):
        state = constraint.advance(state, tf.constant(ids))
        allowed = constraint.allowed(state, tf.constant(step)).numpy()
        for row, output in enumerate(outputs):
            ids[row] = rng.choice(np.flatnonzero(allowed[row]))
            if not output or output[-1] != 1:
                output.append(int(ids[row]))
    pieces = SentencePieceCodec(words_problem.vocabulary.model).pieces
    for example, output in zip(examples, outputs):
        assert output[-1] == 1, "ran out of length"
        words = words_problem.decode(example["inputs"].numpy()).split()
        # The output's tokens from its pieces (its text could split a random byte piece as a space).
        tokens = []
        for piece in (pieces[i] for i in output[:-1]):
            if piece in WORDS_TARGET_SYMBOLS or piece.startswith("▁"):
                tokens.append(piece.removeprefix("▁"))
            else:
                tokens[-1] += piece
        tree = WORDS.delinearize(words, tokens)
        assert WORDS.shape(WORDS.linearize(tree)[1]) == WORDS.shape(tokens)
        assert [t for t in tokens if WORDS.shape([t]) == ["XX"]][1:] == words[1:]
        runs = "".join("(" if t.startswith("(") else "." for t in tokens).split(".")
        assert max(map(len, runs)) <= MAX_OPENS_IN_A_ROW
