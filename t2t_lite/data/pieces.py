"""Text <-> ids through a SentencePiece model with Python `sentencepiece`, without TensorFlow.

A CTranslate2 deployment has `ctranslate2` and `sentencepiece`, not tf-text, so
an export is tokenized here. It gives the ids and text of
t2t_lite.data.vocabulary.Vocabulary (the tf-text op) for the same model: both
run the same SentencePiece library on a model trained with
`add_dummy_prefix=False` (vocabulary.py says why), and tests/test_pieces.py
compares them on real text. The one known difference is vocabulary.py's: exact
ties between equally likely unigram segmentations may break differently.
"""
from t2t_lite.data.ids import strip_ids
from t2t_lite.errors import UserError


def read_model_file(path: str) -> bytes:
    """A SentencePiece model file's bytes; one UserError line when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as error:
        raise UserError(f"cannot read the vocabulary {path}: {error.strerror or error}") from None


class SentencePieceCodec:
    """One SentencePiece model's encode and decode, as Vocabulary's.

    Args:
      model: a serialized SentencePiece model.
      source: where the model came from (a file name), for error messages.
    Raises:
      UserError: sentencepiece is not installed, or `model` is not a SentencePiece model.
    """

    def __init__(self, model: bytes, source: str = "the vocabulary"):
        try:
            import sentencepiece
        except ImportError:
            raise UserError("sentencepiece is not installed; pip install sentencepiece") from None
        self.model = model
        self._processor = sentencepiece.SentencePieceProcessor()
        try:
            self._processor.LoadFromSerializedProto(model)
        except (RuntimeError, TypeError):
            raise UserError(f"{source} is not a SentencePiece model ({len(model):,} bytes that do not parse as "
                            "one)") from None
        self.vocab_size = int(self._processor.get_piece_size())

    @classmethod
    def from_file(cls, path: str) -> "SentencePieceCodec":
        """The model file at path (an export's vocab.model).

        Raises:
          UserError: the file cannot be read or is not a SentencePiece model.
        """
        return cls(read_model_file(path), source=path)

    @property
    def unk_id(self) -> int:
        """UNK's id: 2 in a vocabulary t2t-lite trained, wherever an adopted model (vocabulary_file.py) has it."""
        return int(self._processor.unk_id())

    @property
    def pieces(self) -> list[str]:
        """The V pieces, piece i for id i."""
        return [self._processor.id_to_piece(i) for i in range(self.vocab_size)]

    def word_start_ids(self) -> list[int]:
        """The ids of the pieces that begin a word: those beginning with "▁" (a space), except user-defined
        symbols, which a problem keeps whole for its targets' structure (a parser's brackets), not its words."""
        from sentencepiece import sentencepiece_model_pb2

        proto = sentencepiece_model_pb2.ModelProto.FromString(self.model)
        return [i for i, piece in enumerate(proto.pieces)
                if piece.piece.startswith("▁") and piece.type == piece.NORMAL]

    def encode(self, text: str) -> list[int]:
        """One string -> its ids, without EOS."""
        return self._processor.encode(text)

    def decode(self, ids) -> str:
        """Ids -> one string, stopping at the first EOS and skipping PAD."""
        return self._processor.decode(strip_ids(ids))
