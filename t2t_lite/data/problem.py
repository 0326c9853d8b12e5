"""The Problem interface: a named source of {"inputs", "targets"} examples."""
import numpy as np
import tensorflow as tf

from t2t_lite.data.ids import EOS_ID, PAD_ID, strip_ids  # noqa: F401  (re-exported: the ids every problem uses)
from t2t_lite.errors import UserError


class Problem:
    """A text-to-text task: its splits, its vocabulary and its examples.

    Examples are dicts {"inputs": int32 [T_src], "targets": int32 [T_tgt]},
    each sequence ending with EOS_ID and never containing PAD_ID.

    Args:
      data_dir: where prepared data lives (problems that generate their own ignore it).
    """

    splits = ("train", "dev")
    # How many dev sentences the trainer decodes for dev_metric at every evaluation unless told otherwise.
    dev_metric_sentences = 200
    # How a user's raw input is split into the tokens the examples hold before it is encoded (a name of
    # t2t_lite.data.input_tokenizers.INPUT_TOKENIZERS); None: the model reads raw text as it is.
    input_tokenizer: str | None = None

    def __init__(self, data_dir: str | None = None):
        self.data_dir = data_dir

    @property
    def vocab_size(self) -> int:
        """V, including PAD and EOS: the targets' vocabulary (shared with the sources unless
        separate_vocabularies)."""
        raise NotImplementedError

    @property
    def separate_vocabularies(self) -> bool:
        """Whether sources have a vocabulary of their own (the paper's problems share one)."""
        return False

    @property
    def source_vocab_size(self) -> int:
        """The sources' vocabulary size: source_codec's, so vocab_size unless separate_vocabularies."""
        return self.source_codec.vocab_size

    @property
    def source_codec(self):
        """What encodes source text and decodes input ids (a decoding.batching.TextCodec): the problem itself
        where one vocabulary serves both sides."""
        return self

    @property
    def target_codec(self):
        """What encodes target text (references to score) and decodes outputs: the problem itself unless
        separate_vocabularies."""
        return self

    def dataset(self, split: str) -> tf.data.Dataset:
        """The unbatched examples of `split`, in a fixed order."""
        raise NotImplementedError

    def vocabulary_fingerprint(self) -> str | None:
        """What tells this problem's vocabulary from another of the same size (a prepared vocabulary's sha256);
        None for a fixed one (the same ids for every instance), or one that cannot be read."""
        return None

    def encode(self, text: str) -> list[int]:
        """Source text -> ids without EOS."""
        raise NotImplementedError

    def decode(self, ids) -> str:
        """Output (target) ids -> text, stopping at the first EOS and skipping PAD."""
        raise NotImplementedError

    def word_start_ids(self) -> list[int]:
        """The ids of the pieces that begin a word (the word_pointer decoder feature's, a parser's constraint's).

        Raises:
          UserError: the problem has no SentencePiece vocabulary (algorithmic problems); Text2TextProblem has.
        """
        raise UserError(f"problem {type(self).__name__} has no SentencePiece vocabulary, so no words for the "
                        "word_pointer decoder feature to point at; leave it out of decoder_features")

    def score(self, outputs: list[str], references: list[str], sources: list[str]) -> list[str] | None:
        """Report lines scoring decoded outputs against references; None: the problem is scored as text (BLEU in
        both conventions, chrF2 and TER, each with its signature: t2t_lite.metrics.bleu.problem_report).

        A problem with a `dev_metric` of its own gets that metric instead, as training reports it ("exact match
        = 100.00"), since BLEU would misjudge such outputs (digit strings without spaces score BLEU 0 even when
        exact).

        Args:
          outputs: decoded texts, one per source line.
          references: the reference texts, line for line.
          sources: the input lines the outputs were decoded from; BLEU ignores
            them, parsing needs their words to rebuild trees.
        Returns:
          Lines to print, or None.
        """
        own = self.dev_metric(outputs, references, sources)
        return None if own is None else [f"{own[0]} = {own[1]:.2f}"]

    def dev_metric(self, outputs: list[str], references: list[str], sources: list[str]) -> tuple[str, float] | None:
        """The one number training tracks on a dev sample (higher is better), and its name.

        Default None: sacreBLEU (13a, detokenized), 0 to 100, which the callers compute
        (t2t_lite.metrics.bleu.problem_dev_metric), as data/ sits below metrics/.

        Args:
          outputs, references, sources: as for `score`.
        Returns:
          (name, value), e.g. ("bracket F1", 91.3); None for BLEU.
        """
        return None

    def output_constraint(self):
        """What decoding with constrained_decoding may emit (a t2t_lite.decoding.constraints.OutputConstraint);
        None: this problem has no constraint and decodes freely."""
        return None

    def check_split(self, split: str) -> None:
        if split not in self.splits:
            raise ValueError(f"problem has splits {self.splits}, not {split!r}")


def flattened(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ids as (their ids concatenated, int32; each row's length): what dataset_from_arrays takes."""
    return np.asarray([i for row in rows for i in row], np.int32), np.asarray([len(row) for row in rows])


def dataset_from_lists(inputs: list[list[int]], targets: list[list[int]]) -> tf.data.Dataset:
    """An in-memory dataset of {"inputs", "targets"} int32 examples (dataset_from_arrays)."""
    return dataset_from_arrays(*flattened(inputs), *flattened(targets))


def dataset_from_arrays(inputs, input_lengths, targets, target_lengths) -> tf.data.Dataset:
    """An in-memory dataset of {"inputs", "targets"} int32 examples, given each side's ids concatenated and
    each example's length.

    Stored as flat tensors and row offsets and sliced per index, rather than
    from_generator: the iterator over it can be checkpointed, so a resumed
    run continues exactly where it stopped.
    """

    def offsets(lengths):
        return tf.cumsum(tf.constant(np.concatenate([[0], np.asarray(lengths, np.int64)]), tf.int64))

    flat_in, offsets_in = tf.constant(inputs, tf.int32), offsets(input_lengths)
    flat_tgt, offsets_tgt = tf.constant(targets, tf.int32), offsets(target_lengths)

    def example(i):
        return {"inputs": flat_in[offsets_in[i]:offsets_in[i + 1]],
                "targets": flat_tgt[offsets_tgt[i]:offsets_tgt[i + 1]]}

    return tf.data.Dataset.range(len(input_lengths)).map(example)
