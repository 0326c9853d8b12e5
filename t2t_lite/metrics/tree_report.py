"""Scoring decoded linearised trees against gold trees: EVALB's bracket F1 and its report.

Plain Python (no TensorFlow), so a CTranslate2 export's parses are scored where only CTranslate2 runs.
"""
import re
from collections.abc import Sequence

from t2t_lite.data.target_forms import TARGET_FORMS, TargetForm
from t2t_lite.data.trees import Tree, parse_tree_string, strip_tree
from t2t_lite.errors import UserError
from t2t_lite.metrics.parse_f1 import BracketCounts, score_corpus


def is_bracketed_tree(line: str) -> bool:
    """Whether a reference line is a PTB bracketed tree, "(S (NP (DT The) ...)" or "( (S ...) )", rather
    than a linearised target (neither form's targets open with "(" and close with a bare ")")."""
    line = line.strip()
    return line.startswith("(") and line.endswith(")") and re.search(r"\)[^\s)]", line) is None


def gold_tree(reference: str, words: list[str], form: TargetForm, number: int) -> Tree:
    """The gold tree of a reference line: a bracketed tree as users have them (traces and function tags
    stripped), or a linearised target in `form`.

    Raises:
      UserError: the line is neither, or its words are not the source's.
    """
    if is_bracketed_tree(reference):
        try:
            tree = strip_tree(parse_tree_string(reference))
        except ValueError as error:
            raise UserError(f"reference line {number} is not a bracketed tree: {error}") from None
        if tree.words() != words:
            raise UserError(f"reference line {number}'s tree has the words {' '.join(tree.words())[:80]!r}, "
                            f"source line {number} {' '.join(words)[:80]!r}; they must be the same")
        return tree
    tree = form.delinearize(words, reference.split())
    if form.linearize(tree)[1] != reference.split():
        raise UserError(f"reference line {number} is neither a bracketed tree nor a linearised tree over the "
                        f"{len(words)} words of source line {number}: {reference[:80]!r}")
    return tree


def score_linearized(outputs: Sequence[str], references: Sequence[str], sources: Sequence[str],
                     form: TargetForm = TARGET_FORMS["tags"]) -> tuple[BracketCounts, int]:
    """EVALB counts of predicted linearised trees against gold ones over the same words.

    Args:
      outputs: predicted target strings, e.g. "S NP DT NN /NP VP VBD /VP . /S".
      references: gold trees: target strings as this problem writes them, or bracketed trees
        ("(S (NP (DT The) (NN cat)) ...)", one per line, traces and function tags allowed).
      sources: the input sentences, words separated by spaces.
      form: the target form of outputs and references.
    Returns:
      (counts, repaired): `score_corpus` of the trees `form.delinearize` rebuilds,
      and how many outputs were malformed, so that their trees are repairs (in the "words" form, a
      word written wrongly is not: the sentence's own words go in its place).
    Raises:
      UserError: the lists differ in length, or a reference is not a tree over its sentence's words.
    """
    if not len(outputs) == len(references) == len(sources):
        raise UserError(f"got {len(outputs)} outputs, {len(references)} references and "
                        f"{len(sources)} source sentences; they must match line for line")
    gold = [gold_tree(reference, source.split(), form, number)
            for number, (reference, source) in enumerate(zip(references, sources), 1)]
    predicted = [form.delinearize(source.split(), output.split()) for output, source in zip(outputs, sources)]
    repaired = sum(form.shape(form.linearize(tree)[1]) != form.shape(output.split())
                   for tree, output in zip(predicted, outputs))
    return score_corpus(gold, predicted), repaired


def tree_report(outputs: Sequence[str], references: Sequence[str], sources: Sequence[str],
                form: TargetForm) -> list[str]:
    """EVALB (COLLINS.prm) bracket scores of decoded linearised trees against the references.

    Args:
      outputs: decoded target strings in `form`, one per sentence.
      references: gold trees, linearised or bracketed (score_linearized).
      sources: the decoded input sentences, whose words the trees are over.
    Returns:
      The summary block of EVALB's report (lines such as "Bracketing FMeasure       =  91.30"), the number
      of malformed outputs repaired, the share of outputs that were well-formed trees before any repair, and
      the share identical to their reference tree.
    """
    counts, repaired = score_linearized(outputs, references, sources, form)
    targets = [form.linearize(strip_tree(parse_tree_string(reference)))[1] if is_bracketed_tree(reference)
               else reference.split() for reference in references]
    exact = sum(output.split() == target for output, target in zip(outputs, targets))
    total = max(len(outputs), 1)
    return [
        f"Number of sentence        = {counts.sentences:6d}",
        f"Number of Error sentence  = {counts.errors:6d}",
        f"Number of Skip  sentence  = {counts.skipped:6d}",
        f"Number of Valid sentence  = {counts.sentences - counts.errors - counts.skipped:6d}",
        f"Bracketing Recall         = {counts.recall:6.2f}",
        f"Bracketing Precision      = {counts.precision:6.2f}",
        f"Bracketing FMeasure       = {counts.f1:6.2f}",
        f"Matched / gold / test brackets = {counts.matched} / {counts.gold} / {counts.predicted}",
        f"Malformed outputs repaired = {repaired}",
        f"Well-formed before repair  = {100 * (len(outputs) - repaired) / total:6.2f} %",
        f"Exact tree match           = {100 * exact / total:6.2f} %"]
