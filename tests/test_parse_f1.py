"""Tests for t2t_lite.metrics.parse_f1: EVALB (COLLINS.prm) bracket scoring.

Expected numbers are hand-computed in the comments; spans are [start, end) over
the words left after deleting punctuation.
"""
from __future__ import annotations

import pytest
from shared_data import require_shared

from t2t_lite.data.trees import (
    delinearize,
    linearize,
    parse_tree_string,
    read_mrg,
    strip_tree,
)
from t2t_lite.metrics.parse_f1 import (
    BracketCounts,
    evalb_brackets,
    score_corpus,
    score_trees,
)

# Words: The cat sat on the mat . -> scored positions 0..5 (the "." is deleted).
# Gold brackets: S[0,6) NP[0,2) VP[2,6) PP[3,6) NP[4,6) = 5; TOP and POS tags are
# not brackets.
GOLD = parse_tree_string(
    "(TOP (S (NP (DT The) (NN cat))"
    " (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat))))"
    " (. .)))")


def tree(text: str):
    return parse_tree_string(text)


@pytest.fixture(scope="module")
def raw_sample_trees():
    mrg_dir = require_shared("ptb_wsj_sample/mrg")
    return [t for path in sorted(mrg_dir.glob("wsj_*.mrg")) for t in read_mrg(path)]


@pytest.fixture(scope="module")
def stripped_sample_trees(raw_sample_trees):
    """strip_tree of every sample tree, made once for the tests that score them."""
    return [strip_tree(t) for t in raw_sample_trees]


def test_gold_brackets_ignore_top_pos_and_punctuation():
    words, brackets = evalb_brackets(GOLD)
    assert words == ["The", "cat", "sat", "on", "the", "mat"]
    assert sorted(brackets.elements()) == sorted(
        [("S", 0, 6), ("NP", 0, 2), ("VP", 2, 6), ("PP", 3, 6), ("NP", 4, 6)])


def test_three_of_four_predicted_match_three_of_five_gold():
    # Predicted: S[0,6) NP[0,2) VP[2,6) PP[3,5): S, NP, VP match; PP[3,5) does not.
    # P = 3/4 = 75, R = 3/5 = 60, F1 = 2*75*60/135 = 66.67.
    predicted = tree(
        "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (DT the)) (NN mat))"
        " (. .)))")
    counts = score_trees(GOLD, predicted)
    assert (counts.matched, counts.predicted, counts.gold) == (3, 4, 5)
    assert counts.precision == pytest.approx(75.0)
    assert counts.recall == pytest.approx(60.0)
    assert counts.f1 == pytest.approx(66.6667, abs=1e-3)


def test_missing_bracket_lowers_recall_only():
    # Predicted: S[0,6) NP[0,2) VP[2,6) NP[4,6), no PP: 4 of 4 match, 4 of 5 gold.
    # P = 100, R = 80, F1 = 2*100*80/180 = 88.89.
    predicted = tree(
        "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (IN on) (NP (DT the) (NN mat)))"
        " (. .)))")
    counts = score_trees(GOLD, predicted)
    assert (counts.precision, counts.recall) == (100.0, 80.0)
    assert counts.f1 == pytest.approx(88.8889, abs=1e-3)


def test_brackets_match_as_a_multiset():
    # Gold: S[0,2) NP[0,1) NP[0,1) VP[1,2) = 4; predicted has one NP[0,1): 3 brackets,
    # all matched. P = 100, R = 75, F1 = 2*100*75/175 = 85.71.
    gold = tree("(TOP (S (NP (NP (NNS Dogs))) (VP (VBP bark))))")
    predicted = tree("(TOP (S (NP (NNS Dogs)) (VP (VBP bark))))")
    counts = score_trees(gold, predicted)
    assert (counts.matched, counts.predicted, counts.gold) == (3, 3, 4)
    assert counts.f1 == pytest.approx(85.7143, abs=1e-3)
    assert score_trees(predicted, gold).precision == pytest.approx(75.0)


def test_corpus_scores_add_brackets_not_sentence_f1():
    # Sentence A: 3 matched, 4 predicted, 5 gold (above). Sentence B: 3, 3, 4 (above).
    # Corpus: P = 6/7 = 85.71, R = 6/9 = 66.67, F1 = 2PR/(P+R) = 75.00 exactly
    # (the mean of the sentence F1s would be (66.67 + 85.71) / 2 = 76.19).
    a_pred = tree(
        "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (DT the)) (NN mat))"
        " (. .)))")
    b_gold = tree("(TOP (S (NP (NP (NNS Dogs))) (VP (VBP bark))))")
    b_pred = tree("(TOP (S (NP (NNS Dogs)) (VP (VBP bark))))")
    counts = score_corpus([GOLD, b_gold], [a_pred, b_pred])
    assert counts == score_trees(GOLD, a_pred) + score_trees(b_gold, b_pred)
    assert (counts.matched, counts.predicted, counts.gold) == (6, 7, 9)
    assert counts.sentences == 2
    assert counts.precision == pytest.approx(85.7143, abs=1e-3)
    assert counts.recall == pytest.approx(66.6667, abs=1e-3)
    assert counts.f1 == pytest.approx(75.0)


def test_advp_and_prt_are_equal_but_other_labels_are_not():
    # Gold: S[0,3) NP[0,1) VP[1,3) PRT[2,3). ADVP[2,3) counts as PRT: F1 = 100.
    gold = tree("(TOP (S (NP (PRP They)) (VP (VBD gave) (PRT (RP up)))))")
    as_advp = tree("(TOP (S (NP (PRP They)) (VP (VBD gave) (ADVP (RB up)))))")
    assert score_trees(gold, as_advp).f1 == 100.0
    # PP[2,3) does not: 3 of 4 both ways, P = R = F1 = 75.
    as_pp = tree("(TOP (S (NP (PRP They)) (VP (VBD gave) (PP (IN up)))))")
    counts = score_trees(gold, as_pp)
    assert (counts.matched, counts.precision, counts.f1) == (3, 75.0, 75.0)


def test_punctuation_attachment_is_ignored():
    # The period inside the VP would make it VP[2,7) if punctuation counted;
    # deleted, the VP is [2,6) as in gold, so F1 = 100.
    period_in_vp = tree(
        "(TOP (S (NP (DT The) (NN cat))"
        " (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))"
        " (. .))))")
    assert score_trees(GOLD, period_in_vp).f1 == 100.0
    # A bracket over punctuation alone spans no word and is not scored.
    punct_bracket = tree(
        "(TOP (S (NP (DT The) (NN cat))"
        " (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat))))"
        " (FRAG (. .))))")
    assert score_trees(GOLD, punct_bracket).predicted == 5


def test_function_tags_and_traces_are_scored_as_stripped():
    raw = tree("( (S (NP-SBJ-1 (PRP He)) (VP (VBD left) (NP (-NONE- *T*-1))) (. .)) )")
    # Raw: the trace NP spans no word, NP-SBJ-1 is cut to NP: S[0,2) NP[0,1) VP[1,2).
    assert sorted(evalb_brackets(raw)[1]) == [("NP", 0, 1), ("S", 0, 2), ("VP", 1, 2)]
    assert score_trees(raw, strip_tree(raw)).f1 == 100.0


def test_mistagged_punctuation_is_deleted_by_the_gold_tags():
    # "." tagged NN: the 2006 EVALB deletes it by its gold tag, so the brackets still match.
    mistagged = tree(
        "(TOP (S (NP (DT The) (NN cat))"
        " (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat))))"
        " (NN .)))")
    assert score_trees(GOLD, mistagged) == score_trees(GOLD, GOLD)
    assert score_trees(GOLD, mistagged).errors == 0


def test_sentences_with_different_words_are_errors_not_scored():
    other_words = tree(
        "(TOP (S (NP (DT The) (NN dog))"
        " (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat))))"
        " (. .)))")
    assert score_trees(GOLD, other_words) == BracketCounts(sentences=1, errors=1)
    # The corpus score leaves the error sentence out, as EVALB does.
    counts = score_corpus([GOLD, GOLD], [GOLD, other_words])
    assert (counts.sentences, counts.errors, counts.f1) == (2, 1, 100.0)


def test_sentence_of_only_punctuation_is_skipped():
    assert score_trees(tree("(TOP (X (. .)))"), tree("(TOP (. .))")) == BracketCounts(
        sentences=1, skipped=1)


def test_empty_counts_score_zero_not_nan():
    empty = BracketCounts()
    assert empty.f1 == empty.precision == empty.recall == 0.0


def test_score_corpus_rejects_unequal_lengths():
    with pytest.raises(ValueError, match="2 gold trees but 1 predicted"):
        score_corpus([GOLD, GOLD], [GOLD])


def test_gold_against_itself_is_100_on_sample(stripped_sample_trees):
    stripped = stripped_sample_trees
    counts = score_corpus(stripped, stripped)
    assert counts.errors == counts.skipped == 0
    assert counts.matched == counts.gold == counts.predicted > 10_000
    assert counts.f1 == 100.0


def test_delinearized_gold_scores_100_on_sample(stripped_sample_trees):
    gold = stripped_sample_trees
    rebuilt = [delinearize(*linearize(t)) for t in gold]
    assert score_corpus(gold, rebuilt).f1 == 100.0


def test_raw_and_stripped_trees_score_alike_on_sample(raw_sample_trees, stripped_sample_trees):
    # EVALB's zero-width and label-cutting rules reproduce strip_tree, except for
    # the PTB's undecided "ADVP|PRT", which strip_tree alone resolves to ADVP.
    for raw, stripped in zip(raw_sample_trees, stripped_sample_trees):
        if "|" not in str(raw):
            assert evalb_brackets(raw) == evalb_brackets(stripped), str(raw)
