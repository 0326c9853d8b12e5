"""The exported graph: raw UTF-8 strings in, translations out, with tokenizer and beam search inside.

Two signatures, both running the same `Decoder` as t2t-lite-decoder:
  serving_default  inputs tf.string [B] -> outputs tf.string [B], scores float32 [B]
                   (the best hypothesis of each input and its length-penalised log-prob)
  decode_ids       inputs int32 [B, T_src] -> outputs int32 [B, K, T], scores float32 [B, K]
                   (for callers with their own SentencePiece tokenization)

Input rules, the same for both signatures:
- A source is its tokens up to the first EOS or PAD; the graph appends EOS
  itself, so ids with or without a trailing EOS mean the same.
- Over-long sources are truncated to their first max_input_length - 1 tokens
  (+ EOS = max_input_length ids, matching the training max_length), so the
  work and memory per sentence are bounded: at most max_input_length +
  extra_length decoding steps over a cache of that length.
- An empty or whitespace-only string (whitespace as Python's str.isspace,
  which t2t-lite-decoder uses), or a row of ids with no token, is not
  decoded: its output is "" (all PAD ids) with score 0, as in t2t-lite-decoder.
- Any bytes are accepted as text (invalid UTF-8 becomes U+FFFD pieces);
  ids given to decode_ids must lie in [0, V).
"""
import dataclasses

import tensorflow as tf

from t2t_lite.data.problem import EOS_ID, PAD_ID
from t2t_lite.decoding.decoder import make_decoder
from t2t_lite.decoding.request import ResolvedDecode
from t2t_lite.ops.step_matmul import StepMatmulSettings

# Exactly the characters for which Python's str.isspace() is true (tested over
# all of Unicode): RE2's \s alone misses \v, \x1c-\x1f, \x85 and Unicode spaces.
BLANK_PATTERN = r"[\t-\r\x1c-\x1f\x85\p{Z}]*"

TEXT_SIGNATURE = tf.TensorSpec([None], tf.string, name="inputs")
IDS_SIGNATURE = tf.TensorSpec([None, None], tf.int32, name="inputs")


class ServingModule(tf.Module):
    """What the SavedModel holds: the model's variables, the tokenizer and two decoding functions.

    Args:
      model: a built, restored Transformer.
      problem: its problem, whose output constraint is traced into both signatures when decode asks for
        constrained decoding (None for a request without it).
      vocabularies: the problem's source and target Vocabulary (export.request.TextVocabularies; their tf-text
        tokenizers are saved in the graph).
      decode: the resolved request whose beam_size, alpha and extra_length are fixed in the export.
      max_input_length: most source ids, EOS included, that are decoded (>= 2, exporter.check_lengths).
      step_matmul: the step products traced into both signatures. The default is the decoder's, resolved
        on this machine, so the export gives t2t-lite-decoder's lines here in every precision (in bfloat16
        the layout and op round differently); the exporter records what it traced with.
    """

    def __init__(self, model, problem, vocabularies, decode: ResolvedDecode, max_input_length: int,
                 step_matmul: StepMatmulSettings = StepMatmulSettings()):
        super().__init__(name="t2t_lite_serving")
        # The tf.Variables inside the Keras 3 Variables: tracking the Keras wrappers
        # saves every weight twice (two VarHandleOps), and the session loader of TF
        # Serving and saved_model_cli then restores one copy and reads the other
        # ("Could not find variable"). A plain list keeps Keras objects out of the export.
        self.model_variables = [v.value for v in model.variables]
        # The tokenizer's resource must be tracked for the functions that use it to
        # be saved; Vocabulary keeps its tf-text tokenizer private, so reach for it
        # here rather than build a second tokenizer that could drift from it.
        self.tokenizer = vocabularies.source.tokenizer
        if vocabularies.separate:
            self.target_tokenizer = vocabularies.target.tokenizer
        self._vocabularies = vocabularies
        # serving_default returns the best hypothesis: its search stops once that is final; decode_ids all K.
        self._best_decoder = make_decoder(model, problem, dataclasses.replace(decode, nbest=1), step_matmul)
        self._decoder = make_decoder(model, problem, dataclasses.replace(decode, nbest=decode.beams), step_matmul)
        self._beam_size, self._max_input_length = decode.hparams.beam_size, max_input_length

    def signatures(self) -> dict:
        """The signature name -> concrete function map for tf.saved_model.save.

        Traced here rather than kept as the module's tf.functions: tf.saved_model.save lists a kept function's
        concrete functions again in its own context, which traces the whole search a second time.
        """
        # No Python control flow on tensors here (tf.cond is explicit), so no autograph.
        serve_text = tf.function(self._serve_text, input_signature=[TEXT_SIGNATURE], autograph=False)
        serve_ids = tf.function(self._serve_ids, input_signature=[IDS_SIGNATURE], autograph=False)
        return {"serving_default": serve_text.get_concrete_function(), "decode_ids": serve_ids.get_concrete_function()}

    def _serve_text(self, inputs):
        """inputs tf.string [B] -> {"outputs": tf.string [B], "scores": float32 [B]}."""
        blank = tf.strings.regex_full_match(inputs, BLANK_PATTERN)  # [B]
        ids, scores = self._search(self._best_decoder, self._vocabularies.source.tf_encode(inputs), ~blank)
        return {"outputs": self._vocabularies.target.tf_decode(ids[:, 0]), "scores": scores[:, 0]}  # ids [B, K, T]

    def _serve_ids(self, inputs):
        """inputs int32 [B, T_src] source-vocabulary ids -> {"outputs": int32 [B, K, T] target-vocabulary ids (PAD
        after the tokens), "scores": float32 [B, K]}."""
        ids, scores = self._search(self._decoder, _tokens_before_end(inputs), tf.ones([tf.shape(inputs)[0]], tf.bool))
        return {"outputs": _tokens_before_end(ids).to_tensor(PAD_ID), "scores": scores}

    def _search(self, decoder, ids, decode):
        """Beam search over the rows to decode; the other rows get all-PAD ids and score 0.

        Args:
          decoder: the Decoder searching.
          ids: int32 ragged [B, None], source tokens without EOS.
          decode: bool [B], false for rows to leave empty (blank strings).
        Returns:
          ids int32 [B, K, T] with EOS and PAD as the Decoder gives them, scores float32 [B, K].
        """
        keep_tokens = tf.where(decode, tf.constant(self._max_input_length - 1, tf.int64), 0)  # [B]
        positions = tf.ragged.range(ids.row_lengths())  # ragged [B, None]
        ids = tf.ragged.boolean_mask(ids, positions < keep_tokens[:, None])  # truncated, blanks emptied
        rows = tf.where(ids.row_lengths() > 0)  # int64 [B', 1] the rows with a token
        sources = _append_eos(tf.gather(ids, rows[:, 0]))  # [B', T_src]
        # The Decoder needs at least one sentence (its length is a max over the batch).
        found_ids, found_scores = tf.cond(
            tf.size(rows) > 0, lambda: decoder.decode(sources),
            lambda: (tf.zeros([0, self._beam_size, 0], tf.int32), tf.zeros([0, self._beam_size])))
        batch = ids.nrows()  # int64
        ids_shape = tf.stack([batch, self._beam_size, tf.shape(found_ids, out_type=tf.int64)[2]])
        return (tf.scatter_nd(rows, found_ids, ids_shape),  # [B, K, T]
                tf.scatter_nd(rows, found_scores, tf.stack([batch, self._beam_size])))  # [B, K]


def _tokens_before_end(ids):
    """Each row's ids before its first EOS or PAD.

    Args:
      ids: int32 [..., T] dense.
    Returns:
      int32 ragged [..., None].
    """
    ends = (ids == EOS_ID) | (ids == PAD_ID)  # [..., T]
    before_end = tf.cumsum(tf.cast(ends, tf.int32), axis=-1) == 0  # [..., T]
    return tf.ragged.boolean_mask(ids, before_end)


def _append_eos(ids):
    """int32 ragged [B, None] -> int32 [B, T_src], each row ending in EOS and PAD after it."""
    eos = tf.RaggedTensor.from_tensor(tf.fill([ids.nrows(), 1], EOS_ID))  # [B, 1]
    return tf.concat([ids, eos], axis=1).to_tensor(PAD_ID)
