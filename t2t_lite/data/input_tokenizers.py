"""How a problem's raw input becomes the tokens its model reads (Problem.input_tokenizer names one of these).

A translation model reads raw text: its SentencePiece vocabulary does the splitting, inside TensorFlow. A
parser cannot: its examples are a treebank's tokens, and a tree's leaves are exactly the tokens it was given,
so raw text must be split the way the treebank was first:

    "Prices rose (slightly) in May, didn't they?"
    -> Prices rose -LRB- slightly -RRB- in May , did n't they ?

PENN_TREEBANK is NLTK's TreebankWordTokenizer (the Penn Treebank's own conventions, brackets written -LRB-,
-RSB-, ...; no data to download). A library's rather than one written here: the treebank's conventions are
many and easy to get subtly wrong (sacremoses' penn_tokenize, the other candidate, raises AttributeError in
its current release).
"""
import functools
from collections.abc import Callable

from t2t_lite.errors import UserError

PENN_TREEBANK = "penn_treebank"
INPUT_TOKENIZERS = (PENN_TREEBANK,)


@functools.cache
def _penn_treebank() -> Callable[[str], list[str]]:
    # Imported when first used: NLTK costs about a second to import, which no translation model needs.
    try:
        from nltk.tokenize import TreebankWordTokenizer
    except ImportError:
        raise UserError("a parser tokenizes raw text with NLTK, which is not installed; pip install nltk, or give "
                        "tokenized input (`input_tokenized`)") from None
    return functools.partial(TreebankWordTokenizer().tokenize, convert_parentheses=True)


def check_input_tokenizer(name: str | None) -> None:
    """Refuses a name that is not one of INPUT_TOKENIZERS (None, no tokenizer, is one's right).

    Raises:
      UserError: e.g. an export written by a later t2t-lite that knows a tokenizer this one does not.
    """
    if name is not None and name not in INPUT_TOKENIZERS:
        raise UserError(f"input tokenizer must be one of {', '.join(INPUT_TOKENIZERS)} or None, got {name!r}")


def tokenize_lines(name: str | None, lines: list[str]) -> list[str]:
    """Raw lines as space-separated tokens of the tokenizer `name` (None: the lines as they are).

    Args:
      name: one of INPUT_TOKENIZERS, or None.
      lines: e.g. ["The cat sat on the mat.", ""].
    Returns:
      e.g. ["The cat sat on the mat .", ""]: an empty (or blank) line gives an empty line.
    """
    check_input_tokenizer(name)
    if name is None:
        return list(lines)
    tokenize = _penn_treebank()
    return [" ".join(tokenize(line)) for line in lines]
