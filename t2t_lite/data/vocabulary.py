"""A SentencePiece vocabulary: trained on a bounded sample, applied with the tf-text op.

One tokenizer serves everything: `encode`/`encode_many` in Python,
`tf_encode` in tf.data and in the exported model all run
`tensorflow_text.SentencepieceTokenizer`, so training and serving cannot
tokenize differently (REFERENCE.md pain point 7). Ids back to text:
`tf_decode` in graphs (the export) runs the op too, `decode` in Python runs
the same SentencePiece library without TensorFlow (below).

Ids agree with tensor2tensor's: PAD = 0 and EOS = 1, then UNK = 2; no BOS.

Exact round trip, `decode(encode(text)) == text`, for any text without "\\n":
- `identity` normalization: no NFKC, so e.g. non-breaking spaces survive;
- `remove_extra_whitespaces=False`: leading, trailing and repeated spaces survive;
- `byte_fallback=True`: characters outside the vocabulary become UTF-8 byte
  pieces instead of UNK;
- `add_dummy_prefix=False`: the tf-text op's decoder drops a line's leading
  space when the model adds a dummy "▁" prefix (Python sentencepiece 0.2 does
  not). Without the prefix the first word of a line is a piece without "▁";
  on the WMT sample that costs 0.5% more tokens.

Python sentencepiece 0.2 and the tf-text op give the same ids, except that
they break exact ties between equally likely unigram segmentations
differently (1 line in 45,000 of our test text). Nothing here uses Python
sentencepiece to tokenize, so training and serving still agree. Turning ids
back into text has no such ties: `decode` runs Python sentencepiece, which
gives the op's text for any ids (tests/test_pieces.py) without the eager ops
that made the op cost a millisecond a sentence, more than a small model's
search (docs/performance.md).
"""
import hashlib
import io
import random
from collections.abc import Iterable, Sequence

import tensorflow as tf

from t2t_lite import compat
from t2t_lite.data.problem import EOS_ID, PAD_ID
from t2t_lite.data.pieces import SentencePieceCodec, read_model_file
from t2t_lite.errors import UserError

UNK_ID = 2
MODEL_TYPES = ("bpe", "unigram")
# SentencePiece's trainer splits its work by thread, and the model it learns depends on
# the split: a fixed count gives the same vocabulary on every machine and every rerun.
TRAINER_THREADS = 4


class SentenceSample:
    """A uniform random sample of at most `size` sentences from a stream (reservoir sampling).

    Memory is bounded by `size` however long the stream; the fixed seed makes
    the sample, and so the trained vocabulary, the same on every run.

    Args:
      size: most sentences kept.
      seed: seed of the sampler.
    """

    def __init__(self, size: int, seed: int = 1234):
        self.size = size
        self.sentences: list[str] = []
        self.seen = 0
        self._rng = random.Random(seed)

    def add(self, sentence: str) -> None:
        """Offers one sentence; after n offers each is kept with probability size / n."""
        self.seen += 1
        if len(self.sentences) < self.size:
            self.sentences.append(sentence)
        elif (slot := self._rng.randrange(self.seen)) < self.size:
            self.sentences[slot] = sentence


def train_sentencepiece(sentences: Iterable[str], vocab_size: int, model_type: str = "bpe",
                        user_defined_symbols: Sequence[str] = ()) -> bytes:
    """Trains a SentencePiece model with t2t-compatible ids and exact round trips.

    Args:
      sentences: the training text, one sentence per item (already bounded by the caller).
      vocab_size: V, including PAD, EOS, UNK and the 256 byte pieces.
      model_type: "bpe" (the paper's En-De vocabulary) or "unigram" (closest to
        the word-piece vocabulary of its En-Fr model).
      user_defined_symbols: strings kept as one piece wherever they occur
        (SentencePiece's user_defined_symbols; "▁" stands for a space), e.g.
        the closing brackets of linearised parse trees.
    Returns:
      The serialized model.
    """
    import sentencepiece as spm

    if model_type not in MODEL_TYPES:
        raise UserError(f"vocabulary model_type must be one of {MODEL_TYPES}, got {model_type!r}")
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences), model_writer=model,
            model_type=model_type, vocab_size=vocab_size,
            pad_id=PAD_ID, eos_id=EOS_ID, unk_id=UNK_ID, bos_id=-1,
            normalization_rule_name="identity", remove_extra_whitespaces=False,
            add_dummy_prefix=False, byte_fallback=True,
            user_defined_symbols=list(user_defined_symbols),
            # Rare characters go to byte pieces rather than taking vocabulary slots.
            character_coverage=0.9999,
            num_threads=TRAINER_THREADS, minloglevel=2)
    except RuntimeError as error:
        # The trainer's messages end with the useful part: "Vocabulary size too high (N). ..."
        reason = str(error).rsplit("] ", 1)[-1]
        raise UserError(f"cannot train a {model_type} vocabulary of {vocab_size}: {reason}") from None
    return model.getvalue()


class Vocabulary:
    """Text <-> ids through one SentencePiece model: the tf-text op, and Python sentencepiece for `decode`.

    Args:
      model: a serialized SentencePiece model (from `train_sentencepiece`).
      source: where the model came from (a file name), for error messages.
    Raises:
      UserError: `model` is not a SentencePiece model (empty, truncated, another format).
    """

    def __init__(self, model: bytes, source: str = "the vocabulary"):
        self.model = model
        try:
            # The op parses the model here, eagerly: a bad one fails now, not in the middle of tf.data.
            # The tensorflow_text.SentencepieceTokenizer; a SavedModel must track it to carry its model.
            self.tokenizer = compat.sentencepiece_tokenizer_class()(_SharedModel(model))
            self.vocab_size = int(self.tokenizer.vocab_size())
        except tf.errors.OpError:
            raise UserError(f"{source} is not a SentencePiece model ({len(model):,} bytes that do not parse as "
                            "one); regenerate it with t2t-lite-datagen into a new `data_dir`") from None
        self.codec = SentencePieceCodec(model, source)  # the same model in Python: decode's, and its pieces

    @classmethod
    def from_file(cls, path: str) -> "Vocabulary":
        """Loads the model file datagen writes (files.atomic_write_bytes).

        Raises:
          UserError: the file cannot be read or is not a SentencePiece model.
        """
        return cls(read_model_file(path), source=path)

    def tf_encode(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Strings -> ids, without EOS; usable in tf.data and tf.function.

        Args:
          texts: tf.string [B] (or a scalar, giving int32 [T]).
        Returns:
          int32 ragged [B, None].
        """
        return self.tokenizer.tokenize(texts)

    def tf_decode(self, ids) -> tf.Tensor:
        """Ids -> strings, stopping at each row's first EOS and skipping PAD.

        Args:
          ids: int [B, T], dense (PAD-padded) or ragged.
        Returns:
          tf.string [B].
        """
        ids = tf.cast(ids.to_tensor(default_value=PAD_ID) if isinstance(ids, tf.RaggedTensor) else ids, tf.int32)
        # [B, T]: true up to and excluding the first EOS of each row.
        before_eos = tf.cumsum(tf.cast(ids == EOS_ID, tf.int32), axis=-1, exclusive=True) == 0
        keep = before_eos & (ids != PAD_ID) & (ids != EOS_ID)
        return self.tokenizer.detokenize(tf.ragged.boolean_mask(ids, keep))

    def encode(self, text: str) -> list[int]:
        """One string -> its ids, without EOS."""
        return self.encode_many([text])[0]

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        """Strings -> their ids, without EOS, in one call of the op (a call costs more than a sentence)."""
        return self.tf_encode(tf.constant(texts, tf.string)).to_list() if texts else []

    def decode(self, ids) -> str:
        """Ids -> one string, stopping at the first EOS and skipping PAD: tf_decode's text, in Python."""
        return self.codec.decode(ids)


class _SharedModel(tf.saved_model.experimental.TrackableResource):
    """A parsed SentencePiece model under a shared name, the model's SHA-256, made at construction.

    tf-text's tokenizer holds its parsed model in a resource private to the
    eager kernel that made it, and TensorFlow drops that kernel, and so the
    resource, whenever it clears its eager caches: tf.random.set_seed,
    keras.utils.set_random_seed (which the trainer calls after the problem
    has opened its vocabulary) and keras.utils.clear_session all do. The
    next tokenization then failed, and TensorFlow logged "OP_REQUIRES failed
    at sentencepiece_kernels.cc ... NOT_FOUND: Resource
    localhost/_0_SentencepieceOp/... does not exist" and a "Local rendezvous
    is aborting" line, even where the caller caught the error and made a new
    tokenizer. Vocabulary's tokenizer holds one of these instead.

    No kernel owns a resource with a shared name, so clearing TensorFlow's
    caches leaves it in place, and every tokenizer of one model in the
    process uses the same one (SentencePiece parses, and logs its
    "precompiled_charsmap is empty" line, once per model).
    """

    def __init__(self, model: bytes):
        super().__init__()
        self._model = model
        self._shared_name = "t2t_lite_sentencepiece_" + hashlib.sha256(model).hexdigest()
        _ = self.resource_handle  # made now: a bad model fails here

    def _create_resource(self):
        return compat.sentencepiece_op(self._model, self._shared_name)
