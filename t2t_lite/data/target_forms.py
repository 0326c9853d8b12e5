"""The target forms of parsing: how a tree is written as target tokens, and read back.

"tags" is tensor2tensor's linearisation (trees.linearize: POS tags, no words). "words" writes the tree's
brackets with the words in them and no POS tags, so the output is aligned to the input word by word
(Vinyals et al. 2015 normalise the tags away; EVALB ignores them):

    (TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)))
    targets: (S (NP The cat )NP (VP sat )VP . )S

PTB words never hold brackets (they are -LRB- and -RRB-), so "(X" and ")X" cannot be words.
"""
import dataclasses
from collections.abc import Callable, Sequence

from t2t_lite.data.trees import PLACEHOLDER_POS, PTB_PHRASE_LABELS, ROOT_LABEL, Tree, delinearize, linearize

OPEN_MARK, CLOSE_MARK = "(", ")"
# The tags of the punctuation EVALB (COLLINS.prm) deletes before it counts spans, by word, as the WSJ
# tags them (all but a handful of its ~10,000 such words): a "words" tree gets these back, so that it
# scores as its tagged tree would. Every other word gets PLACEHOLDER_POS.
PUNCTUATION_TAG_OF_WORD = {",": ",", ".": ".", "?": ".", "!": ".", ":": ":", ";": ":", "--": ":", "-": ":", "...": ":",
                           "``": "``", "`": "``", "''": "''"}


def placeholder_tag(word: str) -> str:
    """The tag a "words" tree gives `word`: its punctuation tag, else PLACEHOLDER_POS."""
    return PUNCTUATION_TAG_OF_WORD.get(word, PLACEHOLDER_POS)


def linearize_with_words(tree: Tree) -> tuple[list[str], list[str]]:
    """Turns a tree into a "words" example: its words, and its brackets with the words in place of the tags.

    Args:
      tree: e.g. (TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .))); an outer TOP is stripped as by
        `linearize`.
    Returns:
      (words, target_tokens), e.g. (["The", "cat", "sat", "."],
      ["(S", "(NP", "The", "cat", ")NP", "(VP", "sat", ")VP", ".", ")S"]).
    Raises:
      ValueError: a word holds a bracket, so it would read as a label.
    """
    words, tokens = [], []

    def walk(node: Tree) -> None:
        if node.is_preterminal:
            word = node.children[0]
            if OPEN_MARK in word or CLOSE_MARK in word:
                raise ValueError(f"word {word!r} holds a bracket; the PTB writes them -LRB- and -RRB-")
            words.append(word)
            tokens.append(word)
            return
        tokens.append(OPEN_MARK + node.label)
        for child in node.children:
            walk(child)
        tokens.append(CLOSE_MARK + node.label)

    strip_root = tree.label == ROOT_LABEL and not tree.is_preterminal
    for node in (tree.children if strip_root else (tree,)):
        walk(node)
    return words, tokens


def delinearize_with_words(words: Sequence[str], target_tokens: Sequence[str]) -> Tree:
    """Rebuilds a TOP-rooted tree from words and "words" target tokens, repairing as `delinearize` does.

    The target's own words only mark where a word goes: the sentence's `words` fill those places in
    order, so a word the model copied wrongly still lands where it belongs. Leaves get the tag
    `placeholder_tag` gives their word.

    Args:
      words: the sentence, e.g. ["The", "cat", "sat", "."].
      target_tokens: e.g. ["(S", "(NP", "The", "cat", ")NP", "(VP", "sat", ")VP", ".", ")S"].
    Returns:
      The tree, whose words are exactly `words`.
    """
    tags_form = [token[1:] if _is_bracket(token, OPEN_MARK) else "/" + token[1:] if _is_bracket(token, CLOSE_MARK)
                 else PLACEHOLDER_POS for token in target_tokens if token]
    opened = {token[1:] for token in target_tokens if _is_bracket(token, OPEN_MARK)}
    return without_tags(delinearize(words, tags_form, PTB_PHRASE_LABELS | opened))


def _is_bracket(token: str, marks: str = OPEN_MARK + CLOSE_MARK) -> bool:
    """Whether token is one of `marks` (by default either) followed by a label. A label holds no bracket: a
    model may write bracket-like words such as "(slightly)" or "((", which mark a word's place, not a phrase."""
    return len(token) > 1 and token[0] in marks and OPEN_MARK not in token[1:] and CLOSE_MARK not in token[1:]


def words_form_shape(target_tokens: Sequence[str]) -> list[str]:
    """The brackets of "words" target tokens with each word as PLACEHOLDER_POS: what makes them a tree,
    whatever words were written (delinearize_with_words puts the sentence's own back)."""
    return [token if _is_bracket(token) else PLACEHOLDER_POS for token in target_tokens]


def without_tags(tree: Tree) -> Tree:
    """The tree with every POS tag replaced by `placeholder_tag` of its word (what the "words" form keeps)."""
    return (Tree(placeholder_tag(tree.children[0]), tree.children) if tree.is_preterminal
            else Tree(tree.label, tuple(without_tags(child) for child in tree.children)))


@dataclasses.dataclass(frozen=True)
class TargetForm:
    """A way to write a tree as target tokens, and back: a parsing problem's target side (a TARGET_FORMS value).

    Attributes:
      linearize: Tree -> (words, target tokens).
      delinearize: (words, target tokens) -> TOP-rooted Tree, repairing malformed tokens.
      shape: target tokens -> what of them must be right for a well-formed tree (tokens equal in shape
        to the linearised tree delinearize rebuilt need no repair).
    """

    linearize: Callable[[Tree], tuple[list[str], list[str]]]
    delinearize: Callable[[Sequence[str], Sequence[str]], Tree]
    shape: Callable[[Sequence[str]], list[str]] = list


# "tags": tensor2tensor's, with POS tags and no words; "words": the words in the brackets, no POS tags.
TARGET_FORMS = {"tags": TargetForm(linearize, delinearize),
                "words": TargetForm(linearize_with_words, delinearize_with_words, words_form_shape)}
