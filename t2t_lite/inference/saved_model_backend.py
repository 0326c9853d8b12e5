"""A SavedModel's decode_ids signature as a Backend, through `IdBatchBackend`, the Backend of any engine that
decodes padded id batches with a search fixed beforehand."""
from collections.abc import Callable

from t2t_lite.decoding.batching import decode_lines
from t2t_lite.decoding.request import Engine, ResolvedDecode
from t2t_lite.errors import UserError
from t2t_lite.inference.export_reader import ExportDir


class IdBatchBackend:
    """A t2t_lite.inference.backend.Backend over an engine that decodes padded id batches with a search fixed
    beforehand (a SavedModel's decode_ids signature).

    Args:
      decode_batch: a t2t_lite.decoding.batching.DecodeBatch: int32 [B, T_src] source ids (EOS-terminated,
        PAD after) -> (ids [B, K, T], scores [B, K]), PAD (and EOS, if any) after each hypothesis's tokens.
      encode: text -> its ids, without EOS.
      decode: ids (without EOS and PAD) -> text.
      engine: what requests are resolved against: its settings (beam size K, batch size), those it cannot change.
      encode_many: texts -> encode's ids for each, all at once; None encodes one text at a time.
    """

    def __init__(self, decode_batch: Callable, encode: Callable[[str], list[int]], decode: Callable[[list[int]], str],
                 engine: Engine, encode_many: Callable[[list[str]], list[list[int]]] | None = None):
        self.decode_batch, self.encode, self.decode = decode_batch, encode, decode
        self.engine, self.encode_many = engine, encode_many

    def hypotheses(self, sentences, decode: ResolvedDecode, first_line=1, **decoding):
        # self.encode(_many) and self.decode are the engine's tokenizer.
        return decode_lines(self, self.decode_batch, sentences, decode.hparams.batch_size, decode.nbest, first_line,
                            **decoding)

    def score(self, sources, targets, progress):
        raise UserError("an export holds beam search only; score with Translator.from_run on the run it came from")


def saved_model_backend(export: ExportDir) -> IdBatchBackend:
    """An IdBatchBackend over the decode_ids signature of the SavedModel export (read_export) t2t-lite-exporter
    wrote, which tokenizes with the tf-text op the export's own text signature runs (data/vocabulary.py)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  registers the SentencepieceOp the export's text signatures hold

    from t2t_lite.data.vocabulary import Vocabulary

    signature = tf.saved_model.load(export.path).signatures["decode_ids"]
    source = Vocabulary.from_file(export.source_vocab_path)
    target = source if export.source_vocab_path == export.vocab_path else Vocabulary.from_file(export.vocab_path)

    def decode_batch(inputs):
        found = signature(inputs=tf.constant(inputs))
        return found["outputs"].numpy(), found["scores"].numpy()  # [B, K, T], [B, K]

    return IdBatchBackend(decode_batch, source.encode, target.decode, export.engine, encode_many=source.encode_many)
