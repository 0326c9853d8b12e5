"""What datagen is asked for (DatagenOptions), and those options validated with a problem's defaults filled in.

Text2TextProblem.generate_data resolves them once, saves them in problem_config.json and compares a rerun's
with them field by field.
"""
import dataclasses
import os

from t2t_lite.data.cleaning import NOT_CLEANED, CleaningRules
from t2t_lite.data.vocabulary_making import resolve_vocabularies
from t2t_lite.errors import UserError


@dataclasses.dataclass(frozen=True)
class DatagenOptions:
    """What datagen was asked for; saved in problem_config.json and checked on a rerun."""

    # Comma-separated input files of each split, as the problem reads them
    # (translation: "SRC,TGT"; .gz is read as gzip). None: the problem's default source.
    train_files: str | None = None
    dev_files: str | None = None
    test_files: str | None = None
    # V, the shared source-target vocabulary size; None: the problem's default.
    vocab_size: int | None = None
    # Shards of the train split; dev and test are small and get one each.
    num_shards: int = 10
    # Sentences (both sides count) sampled uniformly from the training text to
    # train the vocabulary, so memory and time stay bounded on WMT-sized corpora.
    max_vocab_sentences: int = 1_000_000
    # An existing vocabulary to encode with instead of training one (vocabulary_source.vocabulary_from: a
    # data_dir, a run directory or an export), as an absolute path; vocab_size is then its size.
    vocab_from: str | None = None
    # A SentencePiece model trained elsewhere, adopted with PAD 0 and EOS 1 (vocabulary_file.py), as an
    # absolute path; vocab_size is then the adopted model's size.
    vocab_file: str | None = None
    # A vocabulary per side instead of the shared one (vocabulary_sides.py): each side's made as the shared one
    # is, of a size, adopted from a file or copied from a vocabulary's place (as vocab_from, that side's). Any of
    # these asks for two; a side given none trains one of the problem's default size. Not with the shared three.
    source_vocab_size: int | None = None
    target_vocab_size: int | None = None
    source_vocab_file: str | None = None
    target_vocab_file: str | None = None
    source_vocab_from: str | None = None
    target_vocab_from: str | None = None
    # Cleaning of the train split (cleaning.py); None: the problem's `default_cleaning`. A data_dir
    # from before these fields reads as not cleaned (cleaning.NOT_CLEANED).
    # Drop pairs whose longer side has more than this many times the shorter's characters; 0: off.
    max_length_ratio: float | None = None
    # Drop pairs whose source equals their target.
    drop_copies: bool | None = None
    # Drop repeats of a pair seen earlier in the train split (64-bit hashes; the first is kept).
    drop_duplicates: bool | None = None

    def cleaning(self) -> CleaningRules:
        return CleaningRules(self.max_length_ratio or 0.0, bool(self.drop_copies), bool(self.drop_duplicates))


# The cleaning fields of DatagenOptions, as a config without them reads them.
NOT_CLEANED_OPTIONS = dataclasses.asdict(NOT_CLEANED)


def resolve_options(options: dict, default_vocab_size: int, default_cleaning: CleaningRules) -> DatagenOptions:
    """`options` (DatagenOptions fields by name) validated, a problem's defaults filled in (its vocabulary size
    and train-split cleaning) and file paths made absolute."""
    fields = [f.name for f in dataclasses.fields(DatagenOptions)]
    unknown = sorted(set(options) - set(fields))
    if unknown:
        raise UserError(f"unknown datagen options {unknown}; valid: {', '.join(fields)}")
    opts = DatagenOptions(**options)
    files = {name: _absolute_files(getattr(opts, name), name)
             for name in ("train_files", "dev_files", "test_files")}
    files.update(resolve_vocabularies(opts, default_vocab_size))
    cleaning = {name: getattr(default_cleaning, name) if getattr(opts, name) is None else getattr(opts, name)
                for name in NOT_CLEANED_OPTIONS}
    cleaning["max_length_ratio"] = float(cleaning["max_length_ratio"])
    if 0 < cleaning["max_length_ratio"] < 1 or cleaning["max_length_ratio"] < 0:
        raise UserError(f"`max_length_ratio` must be 0 (off) or at least 1, got {cleaning['max_length_ratio']}")
    opts = dataclasses.replace(opts, **files, **cleaning)
    for name in ("num_shards", "max_vocab_sentences"):
        if getattr(opts, name) < 1:
            raise UserError(f"`{name}` must be at least 1, got {getattr(opts, name)}")
    return opts


def _absolute_files(value: str | None, name: str) -> str | None:
    """"a,b" -> the same files with absolute paths, so a rerun from elsewhere compares equal."""
    if value is None:
        return None
    paths = value.split(",")
    if not all(p.strip() for p in paths):
        raise UserError(f"`{name}` has an empty file name: {value!r}")
    return ",".join(os.path.abspath(os.path.expanduser(p.strip())) for p in paths)
