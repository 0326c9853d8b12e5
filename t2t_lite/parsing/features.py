"""A parser's decoder-input features (models/decoder_features.py): the word pointer and the open phrases.

Both keep their tables as weights of the model, under the names they had when they were ModelHParams
booleans (former_settings.py), so checkpoints, .keras files and exports made then still load.
"""
import numpy as np
from keras import initializers, layers, ops

from t2t_lite.data.ids import EOS_ID
from t2t_lite.errors import UserError
from t2t_lite.models.decoder_features import DecoderFeature
from t2t_lite.parsing.open_phrases import CLOSE, FINISHED, MAX_DEPTH, MAX_LABELS, open_phrases
from t2t_lite.registry import decoder_features


@decoder_features.register("word_pointer")
class WordPointer(DecoderFeature):
    """Each decoder input is told the encoder's state of the next source word the target has not begun.

    For targets that copy the source's words in order (a parser's "words" form), the decoder always knows
    which word it is at. A word begins at a word-start piece (Problem.word_start_ids) and at a source's
    first piece. In a target only word-start pieces count, so a target's first
    word must follow a space (a parser's tree begins with a bracket).
    """

    one_vocabulary = True  # word_starts marks source and target pieces alike

    def build(self, model):
        # A weight, not a setting: checkpoints and exports carry it, so decoding needs no vocabulary.
        model.word_starts = model.add_weight(name="word_starts", shape=(model.vocab_size,), initializer="zeros",
                                             trainable=False, dtype="float32")

    def configure(self, model, problem):
        self.set_word_starts(model, problem.word_start_ids())

    @staticmethod
    def set_word_starts(model, ids):
        """Makes the pieces `ids` the ones that begin a word."""
        model.word_starts.assign(np.isin(np.arange(model.vocab_size), list(ids)).astype(np.float32))

    def context(self, model, inputs, memory):
        """The memory at each source word's first piece: [B, T_src, D], word w in row w (T_src rows hold every
        word), zero rows after the last word."""
        # Our vocabularies have no dummy prefix: a source's first piece begins a word, "▁" or not.
        first = ops.cast(ops.equal(ops.arange(ops.shape(inputs)[1]), 0)[None, :] & (inputs > EOS_ID), "int32")
        starts = ops.maximum(_begins_word(model, inputs) * ops.cast(inputs > EOS_ID, "int32"), first)  # [B, T_src]
        word = ops.cumsum(starts, axis=1) - 1  # each piece's word, counted from 0
        places = ops.arange(ops.shape(inputs)[1], dtype="int32")
        # at[b, s, w]: piece s begins word w.
        at = ops.logical_and(ops.equal(word[:, :, None], places[None, None, :]), ops.equal(starts[:, :, None], 1))
        return ops.einsum("bsw,bsd->bwd", ops.cast(at, memory.dtype), memory)

    def initial_state(self, model, rows):
        return ops.zeros((rows,), "int32")  # the words begun

    def __call__(self, model, context, ids, state):
        """The pointed words' states [N, T, D] (zeros once every word is begun); the state is the words begun."""
        begun = state[:, None] + ops.cumsum(_begins_word(model, ids), axis=1)  # [N, T]
        sentences, words = ops.shape(context)[0], ops.shape(context)[1]
        rows, length = ops.shape(ids)[0], ops.shape(ids)[1]
        pick = ops.cast(ops.equal(begun[:, :, None], ops.arange(words, dtype="int32")), context.dtype)
        pointed = ops.matmul(ops.reshape(pick, (sentences, -1, words)), context)  # [B, R*T, D]
        return ops.reshape(pointed, (rows, length, model.d_model)), begun[:, -1]


def _begins_word(model, ids):
    return ops.cast(ops.take(ops.convert_to_tensor(model.word_starts), ids), "int32")


@decoder_features.register("open_phrases")
class OpenPhrases(DecoderFeature):
    """Each decoder input is told learnt embeddings of how many phrases its linearised tree has open and of
    the innermost one's label (parsing/open_phrases.py), so that a parser need not count its brackets.
    Which tokens open and close phrases is the problem's (`phrase_brackets`, parsing problems have it)."""

    def create(self, model):
        # Unit-scale vectors, as the sinusoids they are added beside.
        table = dict(embeddings_initializer=initializers.RandomNormal(stddev=1.0), dtype=model.dtype_policy)
        model.depth_embedding = layers.Embedding(MAX_DEPTH + 1, model.d_model, name="depth_embedding", **table)
        model.phrase_embedding = layers.Embedding(MAX_LABELS, model.d_model, name="phrase_embedding", **table)

    def build(self, model):
        for embedding in (model.depth_embedding, model.phrase_embedding):
            embedding.build((None, None))
        # As word_starts: a weight, so that whatever holds the model knows its brackets.
        model.phrase_code = model.add_weight(name="phrase_code", shape=(model.vocab_size,), initializer="zeros",
                                             trainable=False, dtype="float32")

    def configure(self, model, problem):
        if not hasattr(problem, "phrase_brackets"):
            raise UserError(f"problem {type(problem).__name__} does not write trees, so it has no phrases for the "
                            "open_phrases decoder feature to count; leave it out of decoder_features")
        self.set_phrase_brackets(model, problem.phrase_brackets())

    @staticmethod
    def set_phrase_brackets(model, brackets):
        """Makes `brackets`, a (open ids, close id) pair per phrase label, the tokens that open and close phrases."""
        if len(brackets) >= FINISHED:
            raise ValueError(f"open_phrases holds at most {FINISHED - 1} phrase labels, got {len(brackets)}")
        table = np.zeros([model.vocab_size], np.float32)
        for label, (open_ids, close_id) in enumerate(brackets, start=1):
            table[list(open_ids)] = label
            table[close_id] = CLOSE
        model.phrase_code.assign(table)

    def initial_state(self, model, rows):
        """No phrase open: the label at each level (int32 [rows, MAX_DEPTH]) and the depth (int32 [rows])."""
        return {"stack": ops.zeros((rows, MAX_DEPTH), "int32"), "depth": ops.zeros((rows,), "int32")}

    def __call__(self, model, context, ids, state):
        code = ops.cast(ops.convert_to_tensor(model.phrase_code), "int32")
        depths, labels, stack, depth = open_phrases(code, ops.cast(ids, "int32"), state["stack"], state["depth"])
        features = model.depth_embedding(ops.clip(depths, 0, MAX_DEPTH)) + model.phrase_embedding(labels)
        return features, {"stack": stack, "depth": depth}
