"""Penn Treebank trees: reading, trace stripping and tensor2tensor's linearisation.

Parsing as translation (Vinyals et al. 2014, arXiv 1412.7449; tensor2tensor's
`wsj_parsing.py`) maps the words of a sentence to a bracket sequence:

    (TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)))
    words:   The cat sat .
    targets: S NP DT NN /NP VP VBD /VP . /S

`linearize` produces that pair; `delinearize` rebuilds the tree from a model's
output, repairing malformed sequences instead of failing.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT_LABEL = "TOP"
TRACE_LABEL = "-NONE-"
PLACEHOLDER_POS = "XX"
# The phrase labels of the PTB bracketing guidelines (Bies et al. 1995). A
# malformed sequence cannot show whether an unclosed label was a phrase or a POS
# tag; `delinearize` looks it up here.
PTB_PHRASE_LABELS = frozenset({
    "ADJP", "ADVP", "CONJP", "FRAG", "INTJ", "LST", "NAC", "NP", "NX", "PP", "PRN", "PRT", "QP", "RRC", "S", "SBAR",
    "SBARQ", "SINV", "SQ", "UCP", "VP", "WHADJP", "WHADVP", "WHNP", "WHPP", "X"})

# The POS tags of the PTB tagging guidelines (Santorini 1990), without -NONE- (traces are stripped):
# the leaves of a linearised tree, one per word.
PTB_POS_TAGS = frozenset({
    "CC", "CD", "DT", "EX", "FW", "IN", "JJ", "JJR", "JJS", "LS", "MD", "NN", "NNS", "NNP", "NNPS", "PDT",
    "POS", "PRP", "PRP$", "RB", "RBR", "RBS", "RP", "SYM", "TO", "UH", "VB", "VBD", "VBG", "VBN", "VBP",
    "VBZ", "WDT", "WP", "WP$", "WRB", "#", "$", "''", ",", "-LRB-", "-RRB-", ".", ":", "``"})

_TOKEN_RE = re.compile(r"\(|\)|[^\s()]+")
# A bracket inside a word or label would read back as a bracket of the tree: the word "(slightly)" as a phrase
# "slightly)" without a word, so the word would vanish. The PTB writes them as names, and so do we.
_BRACKET_NAMES = str.maketrans({"(": "-LRB-", ")": "-RRB-"})


@dataclasses.dataclass(frozen=True)
class Tree:
    """An immutable constituent: a label over child trees, or a POS tag over one word.

    Attributes:
      label: constituent or POS label, e.g. "NP" or "DT".
      children: child Trees; for a preterminal, exactly one word (a str).
    """

    label: str
    children: tuple[Tree | str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "children", tuple(self.children))
        if not isinstance(self.label, str) or not self.label:
            raise ValueError(f"Tree label must be a non-empty str, got {self.label!r}")
        for child in self.children:
            if not isinstance(child, (Tree, str)):
                raise TypeError(f"Tree children must be Tree or str, got {child!r}")
        if len(self.children) > 1 and any(isinstance(c, str) for c in self.children):
            raise ValueError(f"a word must be the only child of its POS tag; {self.label!r} has children "
                             f"{self.children!r}")

    @property
    def is_preterminal(self) -> bool:
        """True for a POS tag over its word, the tree's only kind of leaf parent."""
        return len(self.children) == 1 and isinstance(self.children[0], str)

    def preterminals(self) -> list[Tree]:
        """Returns the POS-tag nodes in sentence order."""
        return [self] if self.is_preterminal else [pos for child in self.children for pos in child.preterminals()]

    def words(self) -> list[str]:
        """Returns the words in sentence order."""
        return [pos.children[0] for pos in self.preterminals()]

    def __str__(self) -> str:
        return tree_to_string(self)


def tree_to_string(tree: Tree) -> str:
    """Formats a tree as a one-line PTB bracket string, as EVALB reads it.

    Args:
      tree: the tree to format.
    Returns:
      e.g. "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)))". A bracket in a word or label is written
      -LRB- or -RRB- ("(slightly)" as "-LRB-slightly-RRB-"), so the string reads back as the same tree.
    """
    inner = " ".join(c.translate(_BRACKET_NAMES) if isinstance(c, str) else tree_to_string(c) for c in tree.children)
    label = tree.label.translate(_BRACKET_NAMES)
    return f"({label} {inner})" if inner else f"({label})"


def parse_trees(text: str) -> list[Tree]:
    """Parses every bracketed tree in `text`; an unlabelled outermost bracket is TOP.

    Args:
      text: PTB brackets, e.g. the contents of a `.mrg` file, where each tree is
        wrapped in "( ... )".
    Returns:
      The trees in order.
    Raises:
      ValueError: on unbalanced brackets, a word outside any bracket, or a
        bracket mixing a word with other children.
    """
    tokens = _TOKEN_RE.findall(text)
    trees: list[Tree] = []
    stack: list[list] = []  # open [label, children]; a label is the token right after its "("
    for pos, token in enumerate(tokens):
        if token == "(":
            stack.append(["", []])
        elif token == ")":
            if not stack:
                raise ValueError(f"unbalanced ')' at token {pos} of {text[:80]!r}...")
            label, children = stack.pop()
            (stack[-1][1] if stack else trees).append(Tree(label if stack else label or ROOT_LABEL, tuple(children)))
        elif not stack:
            raise ValueError(f"word {token!r} outside any bracket in {text[:80]!r}...")
        elif tokens[pos - 1] == "(":
            stack[-1][0] = token
        else:
            stack[-1][1].append(token)
    if stack:
        raise ValueError(f"{len(stack)} unclosed '(' at the end of {text[:80]!r}...")
    return trees


def parse_tree_string(text: str) -> Tree:
    """Parses exactly one bracketed tree.

    Args:
      text: e.g. "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)))".
    Returns:
      The tree.
    Raises:
      ValueError: if `text` is malformed or holds other than one tree.
    """
    trees = parse_trees(text)
    if len(trees) != 1:
        raise ValueError(f"expected exactly one tree, got {len(trees)} in {text[:80]!r}")
    return trees[0]


def read_mrg(path: str | Path) -> list[Tree]:
    """Reads all trees of a PTB `.mrg` file, traces and function tags included.

    Args:
      path: the file, e.g. ".../wsj_0001.mrg".
    Returns:
      The trees, each rooted at TOP.
    """
    return parse_trees(Path(path).read_text(encoding="utf-8"))


def strip_label(label: str) -> str:
    """Drops function tags, indices and alternatives: NP-SBJ-1, NP=2 -> NP.

    Args:
      label: a PTB label. Labels wrapped in dashes (-NONE-, -LRB-, -RRB-) are
        names rather than tagged labels and come back unchanged.
    Returns:
      The bare category. For the PTB's few undecided labels ("ADVP|PRT") the
      first alternative is kept, so every label is one used elsewhere.
    """
    named = len(label) > 1 and label.startswith("-") and label.endswith("-")
    return label if named else re.split(r"[-=|]", label, maxsplit=1)[0] or label


def strip_tree(tree: Tree) -> Tree:
    """Removes -NONE- traces, constituents they leave empty, and function tags.

    This is the preprocessing EVALB's COLLINS.prm implies (README of EVALB:
    `(SBAR (-NONE- 0) (S (-NONE- *T*-1)))` disappears entirely).

    Args:
      tree: a tree as read from a `.mrg` file.
    Returns:
      The stripped tree; the root is kept even if no word is left under it.
    """
    return _strip(tree) or Tree(strip_label(tree.label))


def _strip(node: Tree) -> Tree | None:
    """Returns the stripped node, or None if nothing but traces was under it."""
    if node.is_preterminal:
        return None if node.label == TRACE_LABEL else Tree(strip_label(node.label), node.children)
    children = tuple(c for c in map(_strip, node.children) if c is not None)
    return Tree(strip_label(node.label), children) if children else None


def linearize(tree: Tree) -> tuple[list[str], list[str]]:
    """Turns a tree into tensor2tensor's parsing example: words and target tokens.

    Follows t2t's `words_and_tags_from_wsj_tree`: every opening label is
    emitted, POS tags included; words are dropped; only non-POS constituents
    get a closing "/LABEL"; the outer TOP is stripped (only when the root is
    labelled TOP, where t2t strips the first and last tag unconditionally).

    Args:
      tree: e.g. (TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .))).
    Returns:
      (words, target_tokens), e.g. (["The", "cat", "sat", "."],
      ["S", "NP", "DT", "NN", "/NP", "VP", "VBD", "/VP", ".", "/S"]).
    Raises:
      ValueError: if a label starts with "/" and so would read as a close.
    """
    words: list[str] = []
    tokens: list[str] = []
    strip_root = tree.label == ROOT_LABEL and not tree.is_preterminal
    for node in (tree.children if strip_root else (tree,)):
        _linearize_into(node, words, tokens)
    return words, tokens


def _linearize_into(node: Tree, words: list[str], tokens: list[str]) -> None:
    """Appends the words and target tokens of `node` (pre-order)."""
    if node.label.startswith("/"):
        raise ValueError(f"label {node.label!r} starts with '/', which marks closes")
    tokens.append(node.label)
    if node.is_preterminal:
        words.append(node.children[0])
        return
    for child in node.children:
        _linearize_into(child, words, tokens)
    tokens.append("/" + node.label)


@dataclasses.dataclass
class _Draft:
    """A phrase under construction, over phrases and the preterminals of the words already placed."""

    label: str
    children: list[_Draft | Tree] = dataclasses.field(default_factory=list)


def delinearize(words: Sequence[str], target_tokens: Sequence[str],
                phrase_labels: frozenset[str] = PTB_PHRASE_LABELS) -> Tree:
    """Rebuilds a TOP-rooted tree from words and target tokens, repairing bad input.

    The exact inverse of `linearize` on its output. Model output may be
    malformed; this policy repairs it so that the words always come back in
    order:
      * A label opens a phrase if a later "/LABEL" closes it (each close takes
        the nearest still-open label equal to it) or if it is in
        `phrase_labels`; any other label is a POS slot.
      * A close with no open label to take is stray and ignored. A close that
        takes a label below the top of the stack also closes the phrases
        opened after it; phrases still open at the end close there.
      * Words fill POS slots left to right. Extra slots are dropped, and so are
        phrases left without words. Extra words get the POS `PLACEHOLDER_POS`
        and join the end of the last top-level phrase (or of TOP, if none).
      * Empty tokens are ignored, so an empty sequence gives a flat tree.

    Args:
      words: the sentence, e.g. ["The", "cat", "sat", "."].
      target_tokens: e.g. ["S", "NP", "DT", "NN", "/NP", "VP", "VBD", "/VP", ".", "/S"].
      phrase_labels: labels taken as phrases even when never closed.
    Returns:
      The tree, whose words are exactly `words`.
    """
    tokens = [token for token in target_tokens if token]
    remaining = iter(words)
    tree = _frozen(_draft_tree(tokens, _match_closes(tokens), phrase_labels, remaining)) or Tree(ROOT_LABEL)
    return _append_words(tree, [Tree(PLACEHOLDER_POS, (word,)) for word in remaining])


def _match_closes(tokens: list[str]) -> dict[int, int]:
    """Maps the index of each close "/X" to that of the nearest open X it closes."""
    pairs: dict[int, int] = {}
    still_open: list[int] = []
    for i, token in enumerate(tokens):
        if not token.startswith("/"):
            still_open.append(i)
            continue
        for depth in range(len(still_open) - 1, -1, -1):
            if tokens[still_open[depth]] == token[1:]:
                pairs[i] = still_open[depth]
                del still_open[depth:]  # labels opened after it never closed: POS slots
                break
    return pairs


def _draft_tree(tokens: list[str], pairs: dict[int, int], phrase_labels: frozenset[str],
                words: Iterator[str]) -> _Draft:
    """Builds the phrases, following the repair policy, each POS slot taking the next word (none once they run
    out)."""
    root = _Draft(ROOT_LABEL)
    stack = [(root, -1)]  # (open phrase, index of the token that opened it)
    closed_opens = set(pairs.values())
    for i, token in enumerate(tokens):
        if i in pairs:
            while stack[-1][1] != pairs[i]:
                stack.pop()  # phrases left open inside the one being closed
            stack.pop()
        elif token.startswith("/"):
            continue  # stray close
        elif i in closed_opens or token in phrase_labels:
            phrase = _Draft(token)
            stack[-1][0].children.append(phrase)
            stack.append((phrase, i))
        elif (word := next(words, None)) is not None:  # a POS slot; one past the last word is dropped
            stack[-1][0].children.append(Tree(token, (word,)))
    return root


def _frozen(draft: _Draft) -> Tree | None:
    """The draft as a Tree, without the phrases no word landed under; None if none landed under `draft`."""
    children = [child if isinstance(child, Tree) else _frozen(child) for child in draft.children]
    children = tuple(child for child in children if child is not None)
    return Tree(draft.label, children) if children else None


def _append_words(root: Tree, extra: list[Tree]) -> Tree:
    """Appends leftover preterminals to the last top-level phrase, else to the root."""
    if root.children and not root.children[-1].is_preterminal:
        *before, last = root.children
        return Tree(root.label, (*before, Tree(last.label, last.children + tuple(extra))))
    return Tree(root.label, root.children + tuple(extra))


def readable(tree: Tree) -> str:
    """The one-line bracketed tree a user reads: an outer TOP over a single phrase is left out.

    e.g. "(S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .))".
    """
    if tree.label == ROOT_LABEL and len(tree.children) == 1 and isinstance(tree.children[0], Tree):
        tree = tree.children[0]
    return tree_to_string(tree)
