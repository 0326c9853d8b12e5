"""Constituency parsing of the WSJ Penn Treebank as translation (paper section 6.3).

Each tree becomes one example, as in tensor2tensor's `wsj_parsing.py`: traces
and function tags are removed (`strip_tree`), the inputs are the words and the
targets the linearised tree (`linearize`):

    (TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)))
    inputs:  The cat sat .
    targets: S NP DT NN /NP VP VBD /VP . /S

Sources, read from the .mrg files of treebank_3/parsed/mrg/wsj:
- `--tmp_dir=.../wsj`: the LDC layout, one directory per section 00-24, split
  as in the paper: sections 02-21 train, 22 dev, 23 test. tensor2tensor reads
  a problem's raw data from tmp_dir too.
- `--train_files --dev_files [--test_files]`: each a comma-separated list of
  .mrg files, globs, or directories (standing for the .mrg files inside).
"""
import functools
import glob
import os
from collections.abc import Iterator, Sequence

from t2t_lite.data.datagen_options import DatagenOptions
from t2t_lite.data.input_tokenizers import PENN_TREEBANK
from t2t_lite.data.shard_writer import PairSource
from t2t_lite.data.text_problem import SPLIT_ORDER, Text2TextProblem
from t2t_lite.data.target_forms import CLOSE_MARK, OPEN_MARK, TARGET_FORMS, TargetForm
from t2t_lite.data.trees import PTB_PHRASE_LABELS, PTB_POS_TAGS, read_mrg, strip_tree
from t2t_lite.errors import UserError
from t2t_lite.metrics.tree_report import score_linearized, tree_report
from t2t_lite.parsing.tree_constraint import TreeConstraint
from t2t_lite.registry import problems

# Sections of each split in the LDC layout (paper 6.3: dev = 22, test = 23).
LDC_SECTIONS = {"train": tuple(range(2, 22)), "dev": (22,), "test": (23,)}

# The POS tags that are not plain letters (Santorini 1990); "-NONE-" is gone with the traces.
PUNCTUATION_TAGS = ("#", "$", "''", ",", "-LRB-", "-RRB-", ".", ":", "``", "PRP$", "WP$")

# Target tokens the vocabulary keeps whole ("▁" is SentencePiece's space; a target token
# other than the first follows one). SentencePiece never merges across a change of
# Unicode script, so without these "/NP" is always "▁/" + "NP" and "PRP$" is "▁PRP" + "$":
# 1.31 pieces per target token on the PTB sample. (t2t's SubwordTextEncoder split them
# the same way, at its alphanumeric boundaries.) Alphabetic labels are left to BPE: as
# the corpus's most frequent strings they become single pieces anyway (1.003 pieces
# per target token with these symbols at V = 1000; only rare ones such as UCP split),
# whereas a forced "▁S" would cut every input word it begins, e.g. "▁S" + "ales".
TARGET_SYMBOLS = tuple("▁/" + label for label in sorted(PTB_PHRASE_LABELS)) + tuple(
    "▁" + tag for tag in PUNCTUATION_TAGS)

# The "words" form's brackets, each one piece: "(S" opens a target, "▁(S" opens a phrase after a space,
# "▁)S" closes one. Being user-defined symbols, no word piece can equal them.
WORDS_TARGET_SYMBOLS = tuple(OPEN_MARK + label for label in sorted(PTB_PHRASE_LABELS)) + tuple(
    "▁" + mark + label for mark in (OPEN_MARK, CLOSE_MARK) for label in sorted(PTB_PHRASE_LABELS))


def ldc_split_files(ptb_dir: str) -> dict[str, str]:
    """The --train_files, --dev_files and --test_files of the LDC layout under `ptb_dir`.

    Args:
      ptb_dir: the directory holding one directory per WSJ section, "00" to "24".
    Returns:
      {"train_files": "<ptb_dir>/02,...,<ptb_dir>/21", "dev_files": "<ptb_dir>/22",
      "test_files": "<ptb_dir>/23"}, absolute.
    Raises:
      UserError: a section directory is missing.
    """
    ptb_dir = os.path.abspath(os.path.expanduser(ptb_dir))
    sections = {split: [os.path.join(ptb_dir, f"{s:02d}") for s in numbers]
                for split, numbers in LDC_SECTIONS.items()}
    missing = [os.path.basename(d) for dirs in sections.values() for d in dirs if not os.path.isdir(d)]
    if missing:
        raise UserError(f"`tmp_dir` {ptb_dir} is not the LDC layout of the WSJ treebank (sections 02 to 23 as "
                        f"directories of .mrg files): {', '.join(missing)} missing; or name the files "
                        "with `train_files` and `dev_files`")
    return {f"{split}_files": ",".join(dirs) for split, dirs in sections.items()}


def expand_mrg_files(value: str, name: str) -> list[str]:
    """The .mrg files a comma-separated list of files, globs and directories names, in order.

    Args:
      value: e.g. "wsj/02,wsj/03/wsj_03*.mrg,extra.mrg"; a glob's or a
        directory's files are sorted by name.
      name: the option it came from, for messages, e.g. "train_files".
    Returns:
      The file paths.
    Raises:
      UserError: an item names no file.
    """
    paths = []
    for item in value.split(","):
        matched = sorted(glob.glob(os.path.join(glob.escape(item), "*.mrg") if os.path.isdir(item) else item))
        if not matched:
            raise UserError(f"`{name}`: no .mrg file at {item}")
        paths.extend(matched)
    return paths


def read_mrg_pairs(paths: Sequence[str], form: TargetForm = TARGET_FORMS["tags"]) -> Iterator[tuple[str, str]]:
    """(words, linearised tree) text pairs of every tree in the files, traces and function tags removed.

    Args:
      paths: .mrg files, read in order.
      form: how trees become targets.
    Returns:
      An iterator of ("The cat sat .", "S NP DT NN /NP VP VBD /VP . /S") (the "tags" form).
    Raises:
      UserError: a file is missing, not UTF-8, or holds malformed brackets.
    """
    for path in paths:
        try:
            examples = [form.linearize(strip_tree(tree)) for tree in read_mrg(path)]
        except (OSError, ValueError) as error:  # UnicodeDecodeError is a ValueError
            raise UserError(f"cannot read {path}: {error}") from None
        for words, tokens in examples:
            yield " ".join(words), " ".join(tokens)


MAX_OPENS_IN_A_ROW = 6


def phrase_tokens(pieces: Sequence[str], target_form: str) -> list[tuple[int | None, int | None, int | None]]:
    """The vocabulary's one table of phrase brackets, which the tree constraint and the open_phrases feature
    both read: per label of PTB_PHRASE_LABELS, sorted, the ids of (its open at a target's start, its open
    after a space, its close), None where the vocabulary holds no such whole token.

    Our vocabularies have no dummy prefix: a target's first bracket is "S" ("(S" in the words form), the ones
    after a space "▁S" ("▁(S"); a close is "▁/S" ("▁)S").
    """
    ids = {piece: i for i, piece in enumerate(pieces)}
    open_mark, close_mark = (OPEN_MARK, "▁" + CLOSE_MARK) if target_form == "words" else ("", "▁/")
    return [(ids.get(open_mark + label), ids.get("▁" + open_mark + label), ids.get(close_mark + label))
            for label in sorted(PTB_PHRASE_LABELS)]


@problems.register("wsj_parsing")
class WsjParsing(Text2TextProblem):
    """WSJ constituency parsing with a shared BPE vocabulary of 2^14, as t2t's parsing_english_ptb16k.

    The paper's WSJ-only vocabulary is "16K"; t2t's problem for it asks for
    approx_vocab_size 2**14. Inputs and targets share it, as in translation.
    """

    name = "wsj_parsing"
    model_type = "bpe"
    default_vocab_size = 2**14
    user_defined_symbols = TARGET_SYMBOLS
    # A treebank's sentences are Penn Treebank tokens ("did n't", "-LRB-"): raw text is split as they were, so
    # that a tree's leaves are the tokens the model learned from.
    input_tokenizer = PENN_TREEBANK
    # How trees are written as targets: a key of TARGET_FORMS ("tags": tensor2tensor's; "words": the words
    # in their brackets, tags dropped). A variant with another form also sets its user_defined_symbols.
    target_form = "tags"

    @property
    def form(self) -> TargetForm:
        return TARGET_FORMS[self.target_form]

    def generate_data(self, tmp_dir: str | None, **kwargs) -> dict:
        """As Text2TextProblem's; with no --*_files, the splits are the LDC sections under tmp_dir.

        Args:
          tmp_dir: the LDC layout's directory, when no files are named.
          **kwargs: Text2TextProblem.generate_data's `log` and DatagenOptions.
        Returns:
          The saved problem config; its options record the files read.
        """
        if tmp_dir is not None and not any(kwargs.get(f"{split}_files") for split in SPLIT_ORDER):
            kwargs.update(ldc_split_files(tmp_dir))
        return super().generate_data(tmp_dir, **kwargs)

    def pair_source(self, split: str, options: DatagenOptions, tmp_dir: str | None) -> PairSource | None:
        files = getattr(options, f"{split}_files")
        if files is None:
            if split == "test":
                return None
            raise UserError(f"{self.name} needs `tmp_dir`=<the LDC wsj directory holding sections 00-24>, "
                            f"or `train_files` and `dev_files` naming .mrg files; `{split}_files` is missing")
        # Expanded once here, so both reads of the source see the same files.
        return functools.partial(read_mrg_pairs, expand_mrg_files(files, f"{split}_files"), self.form)

    def score(self, outputs: list[str], references: list[str], sources: list[str]) -> list[str]:
        """EVALB (COLLINS.prm) bracket scores of decoded linearised trees against the references.

        Args:
          outputs: decoded target strings, one per sentence.
          references: gold trees, linearised or bracketed (score_linearized).
          sources: the decoded input sentences, whose words the trees are over.
        Returns:
          EVALB's summary lines, the number of malformed outputs repaired, the share of outputs that were
          well-formed trees before any repair, and the share identical to their reference tree.
        """
        return tree_report(outputs, references, sources, self.form)

    def output_constraint(self) -> TreeConstraint:
        """Decoding that emits only well-formed trees, a POS tag (or a word) per input word (--constrained_decoding).

        Phrases are PTB_PHRASE_LABELS, each usable when the vocabulary holds its tokens whole. In the tags form
        the leaves are PTB_POS_TAGS, usable likewise (a tag BPE split, rare ones such as "SYM" on a small
        vocabulary, cannot be emitted). In the words form, whose user-defined symbols hold every bracket whole,
        a word is a word-start piece (word_start_ids: a leaf) followed by pieces that do not begin with "▁" and
        are not brackets (continuations); the words are the input's own pieces, in order (TreeConstraint's
        copy_words), so the output never loses its place in the sentence.
        """
        pieces = self.vocabulary.codec.pieces
        word_starts = self.word_start_ids()
        table = phrase_tokens(pieces, self.target_form)
        phrases = [(inner, close) for _, inner, close in table if inner is not None and close is not None]
        roots = [(start, close) for start, _, close in table if start is not None and close is not None]
        if self.target_form == "words":
            not_continuations = {*WORDS_TARGET_SYMBOLS, "<pad>", "</s>", "<unk>", "<s>"}
            return TreeConstraint(
                len(pieces), phrases, leaves=word_starts, word_starts=word_starts, roots=roots,
                continuations=[i for i, piece in enumerate(pieces)
                               if not piece.startswith("▁") and piece not in not_continuations],
                copy_words=True, max_opens_in_a_row=MAX_OPENS_IN_A_ROW)
        ids = {piece: i for i, piece in enumerate(pieces)}
        leaves = [ids["▁" + tag] for tag in sorted(PTB_POS_TAGS) if "▁" + tag in ids]
        return TreeConstraint(len(pieces), phrases, leaves, word_starts, roots=roots or phrases)

    def word_start_ids(self) -> list[int]:
        """The pieces that begin a word, for the tree constraint and the word_pointer feature alike: those
        beginning with "▁" (a space), except the words form's brackets ("▁(NP", "▁)NP"), which no word holds.
        The tags form's labels stay: "▁S" is also the first piece of the word "S&P"."""
        brackets = set(WORDS_TARGET_SYMBOLS) if self.target_form == "words" else set()
        return [i for i, piece in enumerate(self.vocabulary.codec.pieces)
                if piece.startswith("▁") and piece not in brackets]

    def phrase_brackets(self) -> list[tuple[list[int], int]]:
        """Each phrase label's opening tokens (at a target's start and after a space) and closing token, for
        the open_phrases decoder feature; a label the vocabulary holds no whole tokens for is left out."""
        table = phrase_tokens(self.vocabulary.codec.pieces, self.target_form)
        return [([i for i in (start, inner) if i is not None], close) for start, inner, close in table
                if close is not None and (start is not None or inner is not None)]

    def dev_metric(self, outputs: list[str], references: list[str], sources: list[str]) -> tuple[str, float]:
        """EVALB's bracketing F1 (0 to 100) of the decoded trees, malformed ones repaired as `score` does."""
        counts, _ = score_linearized(outputs, references, sources, self.form)
        return "bracket F1", counts.f1


class WordsTarget:
    """A parsing problem's variant with the words in the target and no POS tags:
    "(S (NP The cat )NP (VP sat )VP . )S".

    The model copies each word where its leaf goes, so its output stays aligned to the sentence and
    constrained decoding only has to count words; EVALB ignores the tags it no longer predicts (trees
    come back with the tag XX).
    """

    user_defined_symbols = WORDS_TARGET_SYMBOLS
    target_form = "words"


@problems.register("wsj_parsing_words")
class WsjParsingWords(WordsTarget, WsjParsing):
    """wsj_parsing in the "words" target form (WordsTarget)."""

    name = "wsj_parsing_words"
