"""Labelled bracket precision, recall and F1, scored as EVALB does with COLLINS.prm.

EVALB (Sekine & Collins 1997, `evalb.c`) is the standard constituency parsing
metric; these are the rules of its COLLINS.prm parameter file:
  * DELETE_LABEL TOP -NONE- , : `` '' . -- a word under one of these POS tags is
    removed before spans are counted, and a bracket with one of these labels is
    not scored;
  * EQ_LABEL ADVP PRT -- the two labels match each other;
  * a bracket that spans no word once those words are gone is not scored;
  * preterminals (POS tags) are not brackets.
Bracket labels are cut at the first "-" or "=" (`evalb.c` modify_label), so raw
trees with traces and function tags score like stripped ones. Brackets match as a
multiset of (label, start, end). Sentences whose words differ are not scored but
counted as errors, as EVALB does.
"""
from __future__ import annotations

import dataclasses
import itertools
import re
from collections import Counter
from collections.abc import Sequence

from t2t_lite.data.trees import Tree, strip_tree

DELETE_LABELS = frozenset({"TOP", "-NONE-", ",", ":", "``", "''", "."})
_EQUIVALENT_LABELS = {"PRT": "ADVP"}  # EQ_LABEL ADVP PRT: score PRT as ADVP

Bracket = tuple[str, int, int]  # (label, first word, one past the last word)


@dataclasses.dataclass(frozen=True)
class BracketCounts:
    """Counts of one or more sentence pairs; `a + b` gives the counts of both.

    Attributes:
      matched: brackets found in both trees (same label and span, as a multiset).
      gold: scored brackets of the gold trees.
      predicted: scored brackets of the predicted trees.
      sentences: sentence pairs seen (EVALB "Number of sentence").
      errors: pairs whose words differ after deletions, e.g. different lengths
        (EVALB "Error sentence"); their brackets are not counted.
      skipped: pairs whose predicted tree has no word left after deletions
        (EVALB "Skip sentence"); their brackets are not counted.
    """

    matched: int = 0
    gold: int = 0
    predicted: int = 0
    sentences: int = 0
    errors: int = 0
    skipped: int = 0

    def __add__(self, other: BracketCounts) -> BracketCounts:
        if not isinstance(other, BracketCounts):
            return NotImplemented
        return BracketCounts(*(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other))))

    @property
    def precision(self) -> float:
        """Matched / predicted brackets in percent (EVALB "Bracketing Precision")."""
        return 100.0 * self.matched / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        """Matched / gold brackets in percent (EVALB "Bracketing Recall")."""
        return 100.0 * self.matched / self.gold if self.gold else 0.0

    @property
    def f1(self) -> float:
        """Harmonic mean of corpus precision and recall (EVALB "Bracketing FMeasure").

        Returns:
          F1 in percent; 0.0 when precision and recall are both 0 (EVALB prints nan).
        """
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def score_trees(gold: Tree, predicted: Tree) -> BracketCounts:
    """Scores one predicted tree against its gold tree.

    Which words are punctuation (deleted before spans are counted) is decided
    by the GOLD tags for both trees, as the 2006 EVALB does: a parser that
    mis-tags one comma still gets its brackets scored. The 1997 EVALB instead
    counted such a sentence as an error and left it out, which flatters a
    parser that predicts its own tags.

    Args:
      gold: the reference tree, raw (traces, function tags) or stripped.
      predicted: the parser's tree over the same sentence.
    Returns:
      The counts of this one pair (sentences=1); an error if its words differ
      from the gold words, a skip if no word is left after deletion.
    """
    # Traces are words of the raw gold tree only; EVALB deletes them like punctuation.
    gold, predicted = strip_tree(gold), strip_tree(predicted)
    if gold.words() != predicted.words():
        return BracketCounts(sentences=1, errors=1)
    deleted = deleted_positions(gold)
    if len(deleted) == len(gold.words()):
        return BracketCounts(sentences=1, skipped=1)  # nothing left to score
    gold_brackets, predicted_brackets = (evalb_brackets(tree, deleted)[1] for tree in (gold, predicted))
    return BracketCounts(matched=sum((gold_brackets & predicted_brackets).values()), gold=sum(gold_brackets.values()),
                         predicted=sum(predicted_brackets.values()), sentences=1)


def score_corpus(gold: Sequence[Tree], predicted: Sequence[Tree]) -> BracketCounts:
    """Scores parallel lists of trees and adds up their counts.

    Args:
      gold: reference trees.
      predicted: one predicted tree per reference tree, in the same order.
    Returns:
      The summed counts; read `.f1` for EVALB's corpus-level FMeasure.
    Raises:
      ValueError: if the lists differ in length (EVALB: "Number of lines unmatch").
    """
    if len(gold) != len(predicted):
        raise ValueError(f"got {len(gold)} gold trees but {len(predicted)} predicted trees")
    return sum(map(score_trees, gold, predicted), BracketCounts())


def deleted_positions(tree: Tree) -> set[int]:
    """Positions of the words whose POS tag is in DELETE_LABELS (punctuation, traces)."""
    return {i for i, node in enumerate(tree.preterminals()) if node.label in DELETE_LABELS}


def evalb_brackets(tree: Tree, deleted: set[int] | None = None) -> tuple[list[str], Counter[Bracket]]:
    """Lists the words and scored brackets of a tree as EVALB sees them.

    Args:
      tree: any tree; its root is scored unless labelled TOP.
      deleted: word positions to delete; default the tree's own DELETE_LABELS tags.
    Returns:
      (words, brackets): the words left after deletion, and a multiset of
      (label, start, end) with end exclusive, counted over those words.
    """
    deleted = deleted_positions(tree) if deleted is None else deleted
    all_words = tree.words()
    # kept_before[i]: how many kept words precede word i (evalb.c: a deleted
    # word occupies no span position).
    kept_before = list(itertools.accumulate((i not in deleted for i in range(len(all_words))), initial=0))
    brackets: Counter[Bracket] = Counter()
    _collect(tree, 0, kept_before, brackets)
    return [w for i, w in enumerate(all_words) if i not in deleted], brackets


def _collect(node: Tree, first_word: int, kept_before: list[int], brackets: Counter[Bracket]) -> int:
    """Counts the scored brackets under `node`, whose first word is `first_word`; returns its word count."""
    if node.is_preterminal:
        return 1
    count = 0
    for child in node.children:
        count += _collect(child, first_word + count, kept_before, brackets)
    start, end = kept_before[first_word], kept_before[first_word + count]
    label = re.split(r"[-=]", node.label, maxsplit=1)[0]  # evalb.c modify_label
    # evalb.c massage_data: zero-width brackets and deleted labels are not scored.
    if end > start and label not in DELETE_LABELS:
        brackets[(_EQUIVALENT_LABELS.get(label, label), start, end)] += 1
    return count
