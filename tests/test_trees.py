"""Tests for t2t_lite.data.trees: reading, stripping, linearising, repairing."""
from __future__ import annotations

import dataclasses
import random
import re

import pytest
from shared_data import require_shared

from t2t_lite.data.trees import (
    PLACEHOLDER_POS,
    Tree,
    delinearize,
    linearize,
    parse_tree_string,
    parse_trees,
    read_mrg,
    strip_label,
    strip_tree,
    tree_to_string,
)

# The REFERENCE.md example (t2t's linearisation, after Vinyals et al. 2014).
CAT = "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)))"
CAT_WORDS = ["The", "cat", "sat", "."]
CAT_TOKENS = ["S", "NP", "DT", "NN", "/NP", "VP", "VBD", "/VP", ".", "/S"]


@pytest.fixture(scope="module")
def raw_sample() -> list[tuple[str, list[Tree]]]:
    """(file text, trees read from it) for every file of the PTB WSJ sample."""
    mrg_dir = require_shared("ptb_wsj_sample/mrg")
    paths = sorted(mrg_dir.glob("wsj_*.mrg"))
    return [(path.read_text(encoding="utf-8"), read_mrg(path)) for path in paths]


@pytest.fixture(scope="module")
def sample_trees(raw_sample) -> list[Tree]:
    """Every tree of the sample, traces and function tags stripped."""
    return [strip_tree(tree) for _, trees in raw_sample for tree in trees]


def t2t_words_and_tags(tree_string: str) -> tuple[list[str], list[str]]:
    """tensor2tensor's wsj_parsing.words_and_tags_from_wsj_tree, as an oracle."""
    stack, tags, words = [], [], []
    for tok in tree_string.strip().split():
        if tok[0] == "(":
            tags.append(tok[1:])
            stack.append(tok[1:])
        else:
            stack.pop()  # the POS tag
            while tok[-2] == ")":
                tags.append("/" + stack.pop())
                tok = tok[:-1]
            words.append(tok[:-1])
    return words, tags[1:-1]  # t2t strips TOP and /TOP


def test_reference_example_linearizes_exactly():
    assert linearize(parse_tree_string(CAT)) == (CAT_WORDS, CAT_TOKENS)


def test_reference_example_delinearizes_exactly():
    assert delinearize(CAT_WORDS, CAT_TOKENS) == parse_tree_string(CAT)


def test_tree_to_string_round_trips():
    tree = parse_tree_string(CAT)
    assert tree_to_string(tree) == CAT
    assert parse_tree_string(tree_to_string(tree)) == tree


def test_unlabelled_outer_bracket_becomes_top():
    text = "( (S (NP (PRP He)) (VP (VBD ran))) )\n((S (NP (PRP She)) (VP (VBD hid))))"
    first, second = parse_trees(text)
    assert first.label == second.label == "TOP"
    assert first.children[0].label == "S"
    assert second.words() == ["She", "hid"]


def test_tree_is_immutable_and_validated():
    tree = Tree("NP", [Tree("DT", ["the"])])
    assert isinstance(tree.children, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        tree.label = "VP"
    with pytest.raises(ValueError, match="only child"):
        Tree("NN", ("a", "b"))
    with pytest.raises(ValueError, match="non-empty"):
        Tree("", ())


@pytest.mark.parametrize("text", [
    "(S (NP (NN x))",          # unclosed
    "(S (NP (NN x))))",        # extra close
    "word (S (NN x))",         # word outside brackets
    "(S (NP (NN x)) stray)",   # word beside a subtree
])
def test_parse_rejects_malformed_text(text):
    with pytest.raises(ValueError):
        parse_trees(text)


def test_parse_tree_string_wants_exactly_one_tree():
    with pytest.raises(ValueError, match="exactly one tree, got 2"):
        parse_tree_string("(A (B b)) (C (D d))")


@pytest.mark.parametrize("label, expected", [
    ("NP-SBJ-1", "NP"),
    ("NP=2", "NP"),
    ("NP-SBJ=1", "NP"),
    ("PP-LOC-CLR", "PP"),
    ("S-TPC-1", "S"),
    ("ADVP|PRT", "ADVP"),
    ("-LRB-", "-LRB-"),
    ("-RRB-", "-RRB-"),
    ("-NONE-", "-NONE-"),
    ("PRP$", "PRP$"),
    (",", ","),
])
def test_strip_label(label, expected):
    assert strip_label(label) == expected


def test_strip_tree_removes_traces_and_emptied_constituents():
    # The EVALB README's example: the SBAR holds only traces and disappears.
    raw = parse_tree_string(
        "( (S (NP-SBJ-1 (PRP He)) (VP (VBD reported) (SBAR (-NONE- 0) "
        "(S (-NONE- *T*-1)))) (. .)) )")
    expected = parse_tree_string("(TOP (S (NP (PRP He)) (VP (VBD reported)) (. .)))")
    assert strip_tree(raw) == expected


def test_strip_tree_keeps_bracket_pos_tags():
    raw = parse_tree_string("(TOP (PRN-1 (-LRB- -LRB-) (NP=2 (NN x)) (-RRB- -RRB-)))")
    stripped = strip_tree(raw)
    assert [pos.label for pos in stripped.preterminals()] == ["-LRB-", "NN", "-RRB-"]
    assert stripped.children[0].label == "PRN"


def test_read_mrg_reads_every_tree(raw_sample):
    for text, trees in raw_sample:
        # Oracle: count the brackets opened at depth 0 in the raw text.
        depth, outermost = 0, 0
        for char in text:
            outermost += char == "(" and depth == 0
            depth += {"(": 1, ")": -1}.get(char, 0)
        assert len(trees) == outermost > 0
        assert all(tree.label == "TOP" for tree in trees)


def test_strip_tree_on_sample(raw_sample):
    for text, trees in raw_sample:
        # Oracle from the raw text: every (POS word) pair that is not a trace.
        pairs = re.findall(r"\(([^\s()]+) ([^\s()]+)\)", text)
        expected_words = [word for pos, word in pairs if pos != "-NONE-"]
        stripped = [strip_tree(tree) for tree in trees]
        assert [w for tree in stripped for w in tree.words()] == expected_words
        for tree in stripped:
            labels = re.findall(r"\(([^\s()]+)", tree_to_string(tree))
            assert "-NONE-" not in labels
            assert all(label == strip_label(label) for label in labels)


def test_linearize_matches_t2t_on_sample(sample_trees):
    for tree in sample_trees:
        assert linearize(tree) == t2t_words_and_tags(tree_to_string(tree))


def test_round_trip_every_sample_tree(sample_trees):
    assert len(sample_trees) > 3000
    for tree in sample_trees:
        words, tokens = linearize(tree)
        assert delinearize(words, tokens) == tree, tree_to_string(tree)


@pytest.mark.parametrize("tokens, expected", [
    # Missing closes at the end: open phrases close there.
    ("S NP DT NN /NP VP VBD .",
     "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (. .))))"),
    # Stray closes (nothing open with that label) are ignored.
    ("S NP DT NN /NP /PP VP VBD /VP . /S /S", CAT),
    # A close mismatching the innermost phrase: /VP is stray, /S closes NP too.
    ("S NP DT NN /VP VBD . /S",
     "(TOP (S (NP (DT The) (NN cat) (VBD sat) (. .))))"),
    # A label closed only by an outer close stays a phrase (it is in PTB's set).
    ("S NP DT NN VP VBD /VP . /S",
     "(TOP (S (NP (DT The) (NN cat) (VP (VBD sat)) (. .))))"),
    # A label outside PTB's set is a phrase when it is closed.
    ("S ZP DT NN /ZP VBD . /S",
     "(TOP (S (ZP (DT The) (NN cat)) (VBD sat) (. .)))"),
    # Too few POS slots: leftover words get XX at the end of the top phrase.
    ("S NP DT /NP /S",
     "(TOP (S (NP (DT The)) (XX cat) (XX sat) (XX .)))"),
    # Too few POS slots and no top-level phrase: leftovers join TOP.
    ("DT NN", "(TOP (DT The) (NN cat) (XX sat) (XX .))"),
    # Too many POS slots: the extra trailing slot is dropped.
    ("S NP DT NN NN /NP VP VBD /VP . /S",
     "(TOP (S (NP (DT The) (NN cat) (NN sat)) (VP (VBD .))))"),
    # Empty sequence: a flat tree.
    ("", "(TOP (XX The) (XX cat) (XX sat) (XX .))"),
])
def test_delinearize_repairs(tokens, expected):
    tree = delinearize(CAT_WORDS, tokens.split())
    assert tree == parse_tree_string(expected), tree_to_string(tree)
    assert tree.words() == CAT_WORDS


def test_delinearize_drops_phrases_left_without_words():
    tree = delinearize(["The"], ["S", "NP", "DT", "/NP", "VP", "VBD", "/VP", "/S"])
    assert tree == parse_tree_string("(TOP (S (NP (DT The))))")


def test_delinearize_of_nothing_is_an_empty_root():
    assert delinearize([], []) == Tree("TOP")


def test_delinearize_keeps_words_under_random_corruption(sample_trees):
    rng = random.Random(0)
    for tree in sample_trees[:400]:
        words, tokens = linearize(tree)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(tokens) + 1)
            edit = rng.choice(["delete", "insert_close", "insert_label", "truncate"])
            if edit == "delete" and at < len(tokens):
                del tokens[at]
            elif edit == "insert_close":
                tokens.insert(at, rng.choice(["/NP", "/VP", "/S", "/PP", "/XYZ"]))
            elif edit == "insert_label":
                tokens.insert(at, rng.choice(["NP", "VP", "NN", "DT", "XYZ"]))
            else:
                del tokens[at:]
        repaired = delinearize(words, tokens)
        assert repaired.words() == words, (tokens, tree_to_string(repaired))
        pos_labels = {pos.label for pos in repaired.preterminals()}
        assert pos_labels <= set(tokens) | {PLACEHOLDER_POS}


def test_linearize_rejects_labels_that_read_as_closes():
    with pytest.raises(ValueError, match="'/X'"):
        linearize(Tree("TOP", (Tree("/X", (Tree("NN", ("x",)),)),)))
