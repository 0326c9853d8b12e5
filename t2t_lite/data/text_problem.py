"""Text-to-text problems prepared on disk: a SentencePiece vocabulary and sharded TFRecords.

`generate_data` (what t2t-lite-datagen runs) leaves in data_dir:
  vocab.model                          the SentencePiece model (vocabulary.py), shared by source and target,
  (source_vocab.model)                 or the target's beside the source's (vocabulary_sides.py)
  train-0000k-of-0000n.tfrecord, dev-..., test-...   the examples (shards.py)
  problem_config.json                  the options and counts, so the trainer and
                                       decoder need only --data_dir
Order of work, so that nothing half-written is ever mistaken for finished:
read every input once (validating it, counting pairs, sampling the vocabulary's
training text), and only then create data_dir; write the vocabularies, then
problem_config.json, then the shards. A rerun with the same options finds the
config and skips to the shards still missing. Each split's length histogram,
counted while encoding, is added to the config once known (for train, before its
shards are written), so how many examples are too long needs no read of the data.

The train split is cleaned (cleaning.py: length ratio, copies, duplicates; each rule a DatagenOptions
field, on by default for the translation problems). Both passes build a fresh cleaning.PairFilter over
the same pairs in the same order, so they keep the same pairs: the vocabulary sample never sees a
dropped pair, and the counts of the first pass are the examples the second writes. Dev and test are
never cleaned. The counts per rule are the train split's "cleaning" in problem_config.json.

The train shards hold the corpus in a seeded random order (shuffle.write_shuffled_shards),
so any stretch of training examples mixes the corpus's parts; dev and test keep
their file order, so decoding them stays line-aligned with the references.
"""
import dataclasses
import functools
import hashlib
import json
import os
from collections.abc import Iterator

import numpy as np
import tensorflow as tf

from t2t_lite.data.batching import example_length
from t2t_lite.data.cleaning import NOT_CLEANED, CleaningRules, PairFilter, report_line
from t2t_lite.data import datagen_options
from t2t_lite.data.datagen_options import NOT_CLEANED_OPTIONS, DatagenOptions
from t2t_lite.data.problem import EOS_ID, Problem
from t2t_lite.data.shard_writer import LengthHistogram, PairSource, count_longer, log_to_stderr, write_shards
from t2t_lite.data.shards import read_records, shard_paths
from t2t_lite.data.shuffle import write_shuffled_shards
from t2t_lite.data.vocabulary import SentenceSample, Vocabulary
from t2t_lite.data.vocabulary_making import make_model, plan_sample
from t2t_lite.data.vocabulary_sides import (CONFIG_KEYS, FILES, SHARED, SOURCE, TARGET, config_entry, fingerprint,
                                            plans_of)
from t2t_lite.data.vocabulary_source import CONFIG_FILE
from t2t_lite.errors import UserError
from t2t_lite.files import atomic_write_bytes, atomic_write_text, read_json

SPLIT_ORDER = ("train", "dev", "test")
# "train_order" in problem_config.json: how the train shards order the examples (dev and
# test are always in file order). Configs from before the shuffled order have none.
SHUFFLED, FILE_ORDER = "shuffled", "file"
# A split's key in problem_config.json for its shard_writer.LengthHistogram; configs from before it have none.
LENGTHS = "lengths"


def is_usable(src: str, tgt: str) -> bool:
    """Whether both sides hold more than whitespace: a pair with an empty side teaches nothing."""
    return bool(src.strip() and tgt.strip())


class Text2TextProblem(Problem):
    """A problem whose examples come from (source text, target text) pairs.

    Subclasses name themselves, pick the vocabulary type and size, and say
    where each split's text comes from (`pair_source`). Constructed as
    `cls(data_dir=...)`; everything else is read from data_dir's config.
    """

    name = ""  # the registered name, for messages
    model_type = "bpe"
    default_vocab_size = 8000
    # Strings the vocabulary keeps as single pieces (train_sentencepiece's user_defined_symbols).
    user_defined_symbols: tuple[str, ...] = ()
    # The train split's cleaning unless options say otherwise (translations: cleaning.TRANSLATION_CLEANING).
    default_cleaning: CleaningRules = NOT_CLEANED

    def pair_source(self, split: str, options: DatagenOptions, tmp_dir: str | None) -> PairSource | None:
        """Where `split`'s text comes from; None when the problem has no such split.

        The source is read twice (to count and sample, then to write), and must
        give the same pairs in the same order both times.
        """
        raise NotImplementedError

    def resolve_options(self, options: dict) -> DatagenOptions:
        """Validated options with this problem's defaults filled in and file paths made absolute."""
        return datagen_options.resolve_options(options, self.default_vocab_size, self.default_cleaning)

    def generate_data(self, tmp_dir: str | None, log=log_to_stderr, **options) -> dict:
        """Builds (or finishes building) the vocabulary and the TFRecord shards in data_dir.

        Args:
          tmp_dir: where downloads go (tensorflow-datasets' data_dir); None: its default.
          log: receives progress lines.
          **options: DatagenOptions fields.
        Returns:
          The saved problem config: {"problem", "options", "splits": {split:
          {"examples", "skipped_empty", "num_shards", "lengths", "cleaning"}}, "train_order": "shuffled", "vocab": {...}}
          ("lengths": the split's shard_writer.LengthHistogram, absent when unknown; "cleaning", train's
          only: {"rules", "read", "kept", "dropped": {"length_ratio", "copies", "duplicates"}}).
        """
        if not self.data_dir:
            raise UserError("datagen needs `data_dir`")
        opts = self.resolve_options(options)
        sources = {split: source for split in SPLIT_ORDER
                   if (source := self.pair_source(split, opts, tmp_dir)) is not None}
        config = self._existing_config(opts) or self._prepare(opts, sources, log)
        encode = (functools.partial(_encode_with_eos, self.source_vocabulary),
                  functools.partial(_encode_with_eos, self.vocabulary))
        for split, source in sources.items():
            counts = config["splits"][split]
            prefix = os.path.join(self.data_dir, split)
            if split == "train" and config.get("train_order", FILE_ORDER) != SHUFFLED:
                if not all(os.path.exists(p) for p in shard_paths(prefix, counts["num_shards"])):
                    raise UserError(f"`data_dir` {self.data_dir} holds train shards in file order, written by an "
                                    "earlier t2t-lite; finishing them in shuffled order would repeat examples, "
                                    "so regenerate into a new `data_dir`")
                continue
            write = write_shuffled_shards if split == "train" else write_shards
            rules = opts.cleaning() if split == "train" else None
            write(functools.partial(_usable_pairs, source, rules), encode, prefix, counts["examples"],
                  counts["num_shards"], log, on_lengths=functools.partial(self._save_lengths, config, split))
        return config

    def _save_lengths(self, config: dict, split: str, lengths: LengthHistogram) -> None:
        """Adds a split's length histogram to the config file, unless it holds one (the same: same options)."""
        counts = config["splits"][split]
        if LENGTHS not in counts:
            counts[LENGTHS] = lengths
            atomic_write_text(self._config_path(), json.dumps(config, indent=2) + "\n")

    def count_longer_than(self, split: str, max_length: int) -> int:
        """How many examples of a split training drops as longer than `max_length` (see batching.batch_by_length):
        those with max(len(inputs), len(targets)) > max_length.

        From the length histogram datagen recorded; data_dirs without one are read through.
        """
        histogram = self.config["splits"][split].get(LENGTHS)
        if histogram is not None:
            return count_longer(histogram, max_length)
        # Counted in batches in numpy: Dataset.reduce calls its function once per example, which is
        # several times slower on large splits.
        lengths = self.dataset(split).map(example_length, num_parallel_calls=tf.data.AUTOTUNE).batch(8192)
        return sum(int(np.count_nonzero(batch > max_length)) for batch in lengths.as_numpy_iterator())

    def _prepare(self, opts: DatagenOptions, sources: dict[str, PairSource], log) -> dict:
        """Reads the inputs once, trains the vocabularies, then writes them and the config."""
        plans = plans_of(opts)
        # An adopted model's round trip is checked on a small sample; a copied one was checked where it was
        # made. Two vocabularies share the sentence budget, each sampling its own side.
        per_side = opts.max_vocab_sentences if len(plans) == 1 else max(1, opts.max_vocab_sentences // 2)
        samples = {plan.side: plan_sample(plan, per_side) for plan in plans}
        sides = (samples[SHARED],) * 2 if len(plans) == 1 else (samples[SOURCE], samples[TARGET])
        splits = {split: {**_scan(split, source, sides if split == "train" else (None, None), log,
                                  opts.cleaning() if split == "train" else None),
                          "num_shards": opts.num_shards if split == "train" else 1}
                  for split, source in sources.items()}
        train = splits.get("train", {"examples": 0, "skipped_empty": 0})
        if train["examples"] == 0:
            where = f" (`train_files`={opts.train_files})" if opts.train_files else ""
            dropped = train.get("cleaning", {}).get("dropped", {})
            if any(dropped.values()):
                raise UserError(f"the training text{where} keeps no pair: {train['skipped_empty']:,} with an empty "
                                f"side, and cleaning dropped {dropped['length_ratio']:,} by length ratio, "
                                f"{dropped['copies']:,} copies, {dropped['duplicates']:,} duplicates; turn rules off "
                                "with `max_length_ratio`=0, `drop_copies`=false, `drop_duplicates`=false")
            raise UserError(f"the training text{where} holds no pair with two non-empty sides ("
                            f"{train['skipped_empty']:,} pairs with an empty side); pass non-empty parallel files")
        models = {plan.side: make_model(plan, samples[plan.side], self.model_type, self.user_defined_symbols, log)
                  for plan in plans}
        os.makedirs(self.data_dir, exist_ok=True)
        for side, model in models.items():
            atomic_write_bytes(os.path.join(self.data_dir, FILES[side]), model)
        config = {"problem": self.name, "options": dataclasses.asdict(opts), "splits": splits, "train_order": SHUFFLED,
                  **{CONFIG_KEYS[plan.side]: config_entry(plan.side, plan.size, models[plan.side])
                     for plan in plans}}
        atomic_write_text(self._config_path(), json.dumps(config, indent=2) + "\n")
        self.config = config
        for name in ("vocabulary", "source_vocabulary"):  # one read before now would be of an earlier model
            vars(self).pop(name, None)
        return config

    def _existing_config(self, opts: DatagenOptions) -> dict | None:
        """The config of an earlier run with the same options, None for a fresh data_dir."""
        if not os.path.exists(self._config_path()):
            if tf.io.gfile.glob(os.path.join(self.data_dir, "*.tfrecord")):
                raise UserError(f"`data_dir` {self.data_dir} holds shards but no {CONFIG_FILE}; "
                                "use an empty `data_dir`")
            return None
        saved = DatagenOptions(**{**NOT_CLEANED_OPTIONS, **self.config["options"]})
        changed = [f"{f.name}={getattr(saved, f.name)!r} (now {getattr(opts, f.name)!r})"
                   for f in dataclasses.fields(DatagenOptions) if getattr(saved, f.name) != getattr(opts, f.name)]
        if changed:
            raise UserError(f"`data_dir` {self.data_dir} was generated with other options: "
                            f"{'; '.join(changed)}; use a new `data_dir` or the same options")
        return self.config

    def _config_path(self) -> str:
        return os.path.join(self.data_dir or "", CONFIG_FILE)

    @functools.cached_property
    def config(self) -> dict:
        """problem_config.json of data_dir, checked to belong to this problem."""
        path = self._config_path()
        if not self.data_dir or not os.path.exists(path):
            raise UserError(f"no {CONFIG_FILE} in `data_dir` {self.data_dir!r}; run t2t-lite-datagen "
                            f"`problem`={self.name} `data_dir`={self.data_dir or '...'} first")
        try:
            config = read_json(path)
        except (OSError, ValueError) as error:
            raise UserError(f"{path} is unreadable or not JSON ({error}); regenerate the data with "
                            "t2t-lite-datagen into a new `data_dir`") from None
        if not isinstance(config, dict):
            raise UserError(f"{path} is not a t2t-lite problem config; regenerate the data with "
                            "t2t-lite-datagen into a new `data_dir`")
        if config.get("problem") != self.name:
            raise UserError(f"`data_dir` {self.data_dir} holds problem {config.get('problem')!r}, "
                            f"not {self.name!r}")
        return config

    def vocabulary_fingerprint(self) -> str | None:
        """The sha256 of the vocabulary datagen wrote, or of both (vocabulary_sides.fingerprint); None where no
        data is prepared."""
        try:
            return fingerprint(self.config)
        except (UserError, OSError, KeyError, TypeError):
            return None

    @functools.cached_property
    def vocabulary(self) -> Vocabulary:
        """The data_dir's vocabulary of targets (the shared one, or the target's), checked against the config
        that the shards were written with."""
        return self._read_vocabulary(TARGET)

    @functools.cached_property
    def source_vocabulary(self) -> Vocabulary:
        """The data_dir's vocabulary of sources: the source's own with two, else `vocabulary`."""
        return self._read_vocabulary(SOURCE) if self.separate_vocabularies else self.vocabulary

    def _read_vocabulary(self, side: str) -> Vocabulary:
        entry = self.config[CONFIG_KEYS[side]]
        path = os.path.join(self.data_dir, entry["file"])
        if not os.path.exists(path):
            raise UserError(f"{path} is missing, so the shards in {self.data_dir} cannot be read; "
                            "regenerate the data into a new `data_dir`")
        vocabulary = Vocabulary.from_file(path)
        if hashlib.sha256(vocabulary.model).hexdigest() != entry["sha256"]:
            raise UserError(f"{path} is not the vocabulary the data in {self.data_dir} was "
                            "written with; regenerate it with t2t-lite-datagen into a new `data_dir`")
        return vocabulary

    @property
    def separate_vocabularies(self) -> bool:
        return CONFIG_KEYS[SOURCE] in self.config

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(split for split in SPLIT_ORDER if split in self.config["splits"])

    @property
    def vocab_size(self) -> int:
        return self.vocabulary.vocab_size

    @property
    def source_codec(self) -> Vocabulary:
        return self.source_vocabulary

    @property
    def target_codec(self) -> Vocabulary:
        return self.vocabulary

    def word_start_ids(self) -> list[int]:
        """The target vocabulary's pieces that begin a word: SentencePieceCodec.word_start_ids."""
        return self.vocabulary.codec.word_start_ids()

    def encode(self, text: str) -> list[int]:
        return self.source_vocabulary.encode(text)

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        return self.source_vocabulary.encode_many(texts)

    def decode(self, ids) -> str:
        return self.vocabulary.decode(ids)

    def dataset(self, split: str) -> tf.data.Dataset:
        self.check_split(split)
        paths = shard_paths(os.path.join(self.data_dir, split), self.config["splits"][split]["num_shards"])
        missing = [p for p in paths if not os.path.exists(p)]
        if missing:
            raise UserError(f"{len(missing)} of the {len(paths)} {split} shards in {self.data_dir} are "
                            "missing; rerun t2t-lite-datagen with the same options to finish them")
        return read_records(paths)


def _scan(split: str, source: PairSource, samples: tuple[SentenceSample | None, SentenceSample | None], log,
          rules: CleaningRules | None = None) -> dict:
    """Reads a split once: validates it, counts its usable and skipped pairs, samples the sentences it keeps
    (each source into samples[0], each target into samples[1]; one sample twice for a shared vocabulary).

    With `rules` (the train split), pairs the cleaning drops are neither counted as examples nor sampled.
    """
    examples = skipped = 0
    cleaner = PairFilter(rules) if rules is not None else None
    for src, tgt in source():
        if not is_usable(src, tgt):
            skipped += 1
        elif cleaner is None or cleaner.keep(src, tgt):
            examples += 1
            for sample, sentence in zip(samples, (src, tgt)):
                if sample is not None:
                    sample.add(sentence)
            if examples % 1_000_000 == 0:
                log(f"{split}: read {examples:,} pairs")
    log(f"{split}: {examples:,} pairs ({skipped:,} skipped with an empty side)")
    counts = {"examples": examples, "skipped_empty": skipped}
    if cleaner is not None:
        counts["cleaning"] = {"rules": dataclasses.asdict(rules), **cleaner.report()}
        if rules.any:
            log(report_line(split, cleaner.report()))
    return counts


def _usable_pairs(source: PairSource, rules: CleaningRules | None = None) -> Iterator[tuple[str, str]]:
    """The pairs a split's examples are made of: usable, and kept by `rules` (a fresh filter each call)."""
    cleaner = PairFilter(rules) if rules is not None else None
    return ((src, tgt) for src, tgt in source()
            if is_usable(src, tgt) and (cleaner is None or cleaner.keep(src, tgt)))


def _encode_with_eos(vocabulary: Vocabulary, texts: tf.Tensor) -> tf.RaggedTensor:
    """tf.string [B] -> int32 ragged [B, None], each row ending with EOS."""
    ids = vocabulary.tf_encode(texts)  # [B, None]
    eos = tf.fill([ids.nrows(), 1], tf.constant(EOS_ID, ids.dtype))  # [B, 1]
    return tf.concat([ids, tf.RaggedTensor.from_tensor(eos)], axis=1)
