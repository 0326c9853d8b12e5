"""The Transformer (paper section 3): encoder and decoder stacks over shared embeddings."""
import dataclasses

import keras
import numpy as np
from keras import ops

from t2t_lite import registry
from t2t_lite.config import ModelHParams
from t2t_lite.data.ids import EOS_ID
from t2t_lite.layers.attention import causal_bias, padding_bias
from t2t_lite.layers.dropout import Dropout
from t2t_lite.layers.embedding import LearnedPosition, SharedEmbedding, SinusoidalPosition
from t2t_lite.layers.transformer_layers import DecoderLayer, EncoderLayer
from t2t_lite.models.open_phrases import CLOSE, FINISHED, MAX_DEPTH, MAX_LABELS, open_phrases

# A cache's entry for the words its positions began (word_pointer).
WORDS_BEGUN = "words_begun"
# And for the phrases open after them (open_phrases): how many, and the label open at each level.
DEPTH, PHRASE_STACK = "depth", "phrase_stack"


def shift_right(targets):
    """Decoder inputs: targets delayed one step, position 0 holding the start id 0 (t2t's PAD).

    targets int [B, T_tgt] -> int [B, T_tgt].
    """
    return ops.pad(targets, [[0, 0], [1, 0]])[:, :-1]


@registry.models.register("transformer")
def transformer(hp: ModelHParams) -> "Transformer":
    """The Transformer of a ModelHParams (its fields are the model's settings), with its variables created."""
    model = Transformer(**dataclasses.asdict(hp))
    model.build()
    return model


@keras.saving.register_keras_serializable(package="t2t_lite")
class Transformer(keras.Model):
    """Encoder-decoder Transformer; `call` gives teacher-forced logits.

    `encode` and `decode` are the two halves; `initial_cache` + `decode`
    with a cache and an index (as keras-hub's) run the same layers a few
    positions at a time. The beam decoder's step (decoding/cached_step.py)
    runs them through `run_decoder` with caches and products of its own.
    The settings are ModelHParams' fields, where each has its comment.

    Args:
      vocab_size: V (must be set).
      num_encoder_layers, num_decoder_layers: N of each stack.
      d_model: D.
      d_ff: F, the feed-forward network's hidden width.
      num_heads: H.
      key_dim, value_dim: Dk and Dv per head; 0 for D // H.
      dropout, attention_dropout, relu_dropout: the dropout rates.
      norm_position: "post" (paper) or "pre" (t2t v2+).
      position_encoding: "sinusoid" (paper) or "learned".
      max_position: positions a learned positional embedding can represent.
      share_embeddings: one matrix for source, target and pre-softmax projection.
      layer_norm_epsilon: LayerNorm epsilon.
      word_pointer: add to each decoder input the encoder's state of the next source word the target has
        not begun (`source_words`, `pointed_words`); which pieces begin a word is `set_word_starts`'.
      open_phrases: add to each decoder input learnt embeddings of how many phrases its linearised tree
        has open and of the innermost one's label (`phrase_features`); which tokens open and close phrases
        is `set_phrase_brackets`'.
    """

    def __init__(self, vocab_size, num_encoder_layers=6, num_decoder_layers=6, d_model=512, d_ff=2048, num_heads=8,
                 key_dim=0, value_dim=0, dropout=0.1, attention_dropout=0.0, relu_dropout=0.0, norm_position="post",
                 position_encoding="sinusoid", max_position=1024, share_embeddings=True, layer_norm_epsilon=1e-6,
                 word_pointer=False, open_phrases=False, **kwargs):
        super().__init__(**kwargs)
        if vocab_size <= 0:
            raise ValueError(f"vocab_size must be set, got {vocab_size}")
        if position_encoding not in ("sinusoid", "learned"):
            raise ValueError(f"position_encoding must be 'sinusoid' or 'learned', got {position_encoding!r}")
        self.vocab_size, self.d_model, self.d_ff, self.num_heads = vocab_size, d_model, d_ff, num_heads
        self.num_encoder_layers, self.num_decoder_layers = num_encoder_layers, num_decoder_layers
        self.key_dim, self.value_dim = key_dim, value_dim
        self.head_key_dim, self.head_value_dim = key_dim or d_model // num_heads, value_dim or d_model // num_heads
        self.dropout_rate, self.attention_dropout, self.relu_dropout = dropout, attention_dropout, relu_dropout
        self.norm_position, self.position_encoding, self.max_position = norm_position, position_encoding, max_position
        self.share_embeddings, self.layer_norm_epsilon = share_embeddings, layer_norm_epsilon
        self.word_pointer, self.open_phrases = word_pointer, open_phrases
        policy = self.dtype_policy
        self.target_embedding = SharedEmbedding(vocab_size, d_model, name="shared_embedding", dtype=policy)
        self.source_embedding = (self.target_embedding if share_embeddings
                                 else SharedEmbedding(vocab_size, d_model, name="source_embedding", dtype=policy))
        self.position = (LearnedPosition(max_position, d_model, name="position", dtype=policy)
                         if position_encoding == "learned" else SinusoidalPosition(name="position", dtype=policy))
        self.embedding_dropout = Dropout(dropout, dtype=policy)
        layer_settings = dict(key_dim=self.head_key_dim, value_dim=self.head_value_dim, dropout=dropout,
                              attention_dropout=attention_dropout, relu_dropout=relu_dropout,
                              norm_position=norm_position, epsilon=layer_norm_epsilon, dtype=policy)
        self.encoder_layers = [EncoderLayer(d_model, num_heads, d_ff, name=f"encoder_{i}", **layer_settings)
                               for i in range(num_encoder_layers)]
        self.decoder_layers = [DecoderLayer(d_model, num_heads, d_ff, name=f"decoder_{i}", **layer_settings)
                               for i in range(num_decoder_layers)]
        # Keras 3 does not hand layers held in a list to tf.train.Checkpoint's
        # object graph; named attributes put every layer's weights under model/.
        for layer in self.encoder_layers + self.decoder_layers:
            setattr(self, layer.name, layer)
        # Pre-norm leaves the residual stream unnormalised; t2t adds a final LayerNorm.
        pre = norm_position == "pre"
        self.encoder_norm = (keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, name="encoder_norm",
                                                             dtype=policy) if pre else None)
        self.decoder_norm = (keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, name="decoder_norm",
                                                             dtype=policy) if pre else None)
        if open_phrases:  # unit-scale vectors, as the sinusoids they are added beside
            table = dict(embeddings_initializer=keras.initializers.RandomNormal(stddev=1.0), dtype=policy)
            self.depth_embedding = keras.layers.Embedding(MAX_DEPTH + 1, d_model, name="depth_embedding", **table)
            self.phrase_embedding = keras.layers.Embedding(MAX_LABELS, d_model, name="phrase_embedding", **table)

    def build(self, input_shape=None):
        """Creates every variable from the settings alone, in the order `call` reaches them.

        Every width is known without an input, so nothing is traced: without this, Keras would build the model
        by tracing a whole forward pass, which takes seconds for transformer_big.
        """
        width = (None, None, self.d_model)
        layers = [self.source_embedding, self.position, *self.encoder_layers, self.encoder_norm,
                  self.target_embedding, *self.decoder_layers, self.decoder_norm]
        for layer in layers:
            if layer is not None and not layer.built:
                layer.build(width)
        if self.word_pointer and not hasattr(self, "word_starts"):
            # A weight, not a setting: checkpoints and exports carry it, so decoding needs no vocabulary.
            self.word_starts = self.add_weight(name="word_starts", shape=(self.vocab_size,), initializer="zeros",
                                               trainable=False, dtype="float32")
        if self.open_phrases and not hasattr(self, "phrase_code"):
            for embedding in (self.depth_embedding, self.phrase_embedding):
                embedding.build((None, None))
            # As word_starts: a weight, so that whatever holds the model knows its brackets.
            self.phrase_code = self.add_weight(name="phrase_code", shape=(self.vocab_size,), initializer="zeros",
                                               trainable=False, dtype="float32")

    def get_build_config(self):
        return {"built": self.built}

    def build_from_config(self, config):
        if config.get("built"):
            self.build()

    def call(self, features, training=None):
        """features {"inputs" [B, T_src], "targets" [B, T_tgt]} -> float32 logits [B, T_tgt, V]."""
        return self.target_embedding.logits(self.decoder_states(features, training=training))

    def decoder_states(self, features, training=None):
        """features -> the decoder's outputs [B, T_tgt, D] (compute dtype), before the softmax projection.

        Training projects them onto the vocabulary inside its loss, a slice of
        positions at a time (losses.projected_smoothed_cross_entropy), so the
        [B, T_tgt, V] logits never exist at once.
        """
        memory, memory_bias = self.encode(features["inputs"], training=training)
        word_memory = self.source_words(features["inputs"], memory) if self.word_pointer else None
        states, _ = self._decode_states(shift_right(features["targets"]), memory, memory_bias, None, None,
                                        word_memory, training)
        return states

    def output_kernel(self, dtype):
        """The softmax projection [D, V] in dtype (the shared embedding, transposed)."""
        return self.target_embedding.output_kernel(dtype)

    def encode(self, inputs, training=None):
        """inputs int [B, T_src] -> (memory [B, T_src, D], memory_bias float32 [B, 1, 1, T_src])."""
        bias = padding_bias(inputs)
        x = self._embed(self.source_embedding, inputs, None, training)
        for layer in self.encoder_layers:
            x = layer(x, bias, training=training)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return x, bias

    def decode(self, decoder_inputs, memory, memory_bias, cache=None, cache_index=None, word_memory=None,
               training=None):
        """Runs the decoder stack and the shared softmax projection.

        Args:
          decoder_inputs: int [B, T_tgt] (shifted targets), or the T_tgt positions from cache_index on.
          memory: [B, T_src, D] from `encode`, or its `memory_cache`.
          memory_bias: [B, 1, 1, T_src].
          cache: None, or the self-attention caches (`initial_cache`) holding positions before cache_index.
          cache_index: int scalar, the position of decoder_inputs' first column when cached.
          word_memory: with word_pointer, `source_words` of the inputs.
        Returns:
          (float32 logits [B, T_tgt, V], the caches with these positions written, or None).
        """
        x, new_cache = self._decode_states(decoder_inputs, memory, memory_bias, cache, cache_index, word_memory,
                                           training)
        return self.target_embedding.logits(x), new_cache

    def _decode_states(self, decoder_inputs, memory, memory_bias, cache, cache_index, word_memory, training):
        """decode() up to the softmax projection: (states [B, T_tgt, D], updated caches or None)."""
        # A cache masks its own later positions: a causal bias only without one.
        self_bias = causal_bias(ops.shape(decoder_inputs)[1]) if cache is None else None  # [1, 1, T_tgt, T_tgt]
        new_cache = None if cache is None else {}
        added = []
        if self.word_pointer:
            begun = ops.zeros_like(decoder_inputs[:, 0]) if cache is None else cache[WORDS_BEGUN]
            pointed, begun = self.pointed_words(word_memory, decoder_inputs, begun)
            added.append(pointed)
            if cache is not None:
                new_cache[WORDS_BEGUN] = begun
        if self.open_phrases:
            stack, depth = ((cache[PHRASE_STACK], cache[DEPTH]) if cache is not None
                            else self.no_open_phrases(ops.shape(decoder_inputs)[0]))
            features, stack, depth = self.phrase_features(decoder_inputs, stack, depth)
            added.append(features)
            if cache is not None:
                new_cache[PHRASE_STACK], new_cache[DEPTH] = stack, depth

        def run_layer(i, layer, x):
            name = f"layer_{i}"
            x, layer_cache = layer(x, memory[name] if isinstance(memory, dict) else memory, self_bias, memory_bias,
                                   cache=None if cache is None else cache[name], cache_index=cache_index,
                                   training=training)
            if cache is not None:
                new_cache[name] = layer_cache
            return x

        states = self.run_decoder(decoder_inputs, run_layer, position=cache_index, added=added, training=training)
        return states, new_cache

    def run_decoder(self, decoder_inputs, run_layer, position=None, added=(), training=None):
        """The decoder stack up to the softmax projection, each layer run by `run_layer`.

        Args:
          decoder_inputs: int [N, T_tgt].
          run_layer: (index, DecoderLayer, x [N, T_tgt, D]) -> x: `decode` calls the layer; a decoding step
            (decoding/cached_step.py) runs its sub-layers over its own caches (`DecoderLayer.through_sublayers`).
          position: None for positions 0..T_tgt-1, or the int scalar position of the first column.
          added: [N, T_tgt, D] tensors added to the embeddings: `pointed_words`' states with word_pointer,
            `phrase_features` with open_phrases.
        Returns:
          the decoder's states [N, T_tgt, D] (what run_layer returned last, normalised under pre-norm).
        """
        x = self._embed(self.target_embedding, decoder_inputs, position, training)
        for features in added:  # after the embeddings' dropout: the encoder's states had their own
            x = x + ops.cast(features, x.dtype)
        for i, layer in enumerate(self.decoder_layers):
            x = run_layer(i, layer, x)
        return x if self.decoder_norm is None else self.decoder_norm(x)

    def memory_cache(self, memory):
        """Every decoder layer's encoder-decoder keys/values, projected once per sentence.

        Args:
          memory: [B, T_src, D] encoder output.
        Returns:
          {"layer_i": {"key" [B, H, T_src, Dk], "value" [B, H, T_src, Dv]}}.
        """
        return {f"layer_{i}": layer.cross_attention.memory_cache(memory) for i, layer in enumerate(self.decoder_layers)}

    def initial_cache(self, batch_size, max_length, dtype="float32"):
        """Empty self-attention caches for `decode` with a cache_index, as keras-hub's: positions written in place.

        Args:
          batch_size: B.
          max_length: T_max, the positions the cache can hold.
          dtype: the compute dtype (the memory's).
        Returns:
          {"layer_i": {"key" [B, H, T_max, Dk], "value" [B, H, T_max, Dv]}}, zeros; with word_pointer also
          WORDS_BEGUN: int32 [B] zeros, the words the cached positions began; with open_phrases
          PHRASE_STACK and DEPTH, `no_open_phrases`.
        """
        cache = {f"layer_{i}": {name: ops.zeros((batch_size, self.num_heads, max_length, depth), dtype)
                                for name, depth in (("key", self.head_key_dim), ("value", self.head_value_dim))}
                 for i in range(len(self.decoder_layers))}
        if self.word_pointer:
            cache[WORDS_BEGUN] = ops.zeros((batch_size,), "int32")
        if self.open_phrases:
            cache[PHRASE_STACK], cache[DEPTH] = self.no_open_phrases(batch_size)
        return cache

    def set_word_starts(self, ids):
        """Makes the pieces `ids` (the problem's Problem.word_start_ids) the ones that begin a word."""
        table = np.zeros([self.vocab_size], np.float32)
        table[list(ids)] = 1
        self.word_starts.assign(table)

    def source_words(self, inputs, memory):
        """The memory at each source word's first piece: inputs int [B, T_src], memory [B, T_src, D] ->
        [B, T_src, D], word w in row w (T_src rows hold every word), zero rows after the last word.

        A word begins at a word-start piece (`set_word_starts`) and at the first piece. In a target only
        word-start pieces count, so a target's first word must follow a space (a parser's tree begins
        with a bracket).
        """
        # Our vocabularies have no dummy prefix: a source's first piece begins a word, "▁" or not.
        first = ops.cast(ops.equal(ops.arange(ops.shape(inputs)[1]), 0)[None, :] & (inputs > EOS_ID), "int32")
        starts = ops.maximum(self._begins_word(inputs) * ops.cast(inputs > EOS_ID, "int32"), first)  # [B, T_src]
        word = ops.cumsum(starts, axis=1) - 1  # each piece's word, counted from 0
        places = ops.arange(ops.shape(inputs)[1], dtype="int32")
        # at[b, s, w]: piece s begins word w.
        at = ops.logical_and(ops.equal(word[:, :, None], places[None, None, :]), ops.equal(starts[:, :, None], 1))
        return ops.einsum("bsw,bsd->bwd", ops.cast(at, memory.dtype), memory)

    def pointed_words(self, word_memory, decoder_inputs, begun):
        """The source word each decoder input points at: the next one the target has not begun.

        Args:
          word_memory: [B, W, D] from `source_words`.
          decoder_inputs: int [N, T] (N = B*R: R rows per sentence, e.g. beams, sentence-major).
          begun: int32 [N], the words begun before column 0.
        Returns:
          ([N, T, D] the pointed words' states (zeros once every word is begun), int32 [N] the words begun
          through the last column).
        """
        begun = begun[:, None] + ops.cumsum(self._begins_word(decoder_inputs), axis=1)  # [N, T]
        sentences, words = ops.shape(word_memory)[0], ops.shape(word_memory)[1]
        rows, length = ops.shape(decoder_inputs)[0], ops.shape(decoder_inputs)[1]
        pick = ops.cast(ops.equal(begun[:, :, None], ops.arange(words, dtype="int32")), word_memory.dtype)
        pointed = ops.matmul(ops.reshape(pick, (sentences, -1, words)), word_memory)  # [B, R*T, D]
        return ops.reshape(pointed, (rows, length, self.d_model)), begun[:, -1]

    def set_phrase_brackets(self, brackets):
        """Makes `brackets` (the problem's Problem.phrase_brackets) the tokens that open and close phrases.

        Args:
          brackets: a (open ids, close id) pair per phrase label: the tokens that open it, the one that
            closes it.
        """
        if len(brackets) >= FINISHED:
            raise ValueError(f"open_phrases holds at most {FINISHED - 1} phrase labels, got {len(brackets)}")
        table = np.zeros([self.vocab_size], np.float32)
        for label, (open_ids, close_id) in enumerate(brackets, start=1):
            table[list(open_ids)] = label
            table[close_id] = CLOSE
        self.phrase_code.assign(table)

    def no_open_phrases(self, rows):
        """The open phrases before any input: (stack int32 [rows, MAX_DEPTH], depth int32 [rows]), zeros."""
        return ops.zeros((rows, MAX_DEPTH), "int32"), ops.zeros((rows,), "int32")

    def phrase_features(self, decoder_inputs, stack, depth):
        """What each decoder input is told of its open phrases: the embeddings of its depth and of the
        innermost one's label (open_phrases.open_phrases).

        Args:
          decoder_inputs: int [N, T].
          stack, depth: int32 [N, MAX_DEPTH] and [N], the open phrases before column 0.
        Returns:
          ([N, T, D] features, the stack and depth after the last column).
        """
        code = ops.cast(ops.convert_to_tensor(self.phrase_code), "int32")
        depths, labels, stack, depth = open_phrases(code, ops.cast(decoder_inputs, "int32"), stack, depth)
        features = self.depth_embedding(ops.clip(depths, 0, MAX_DEPTH)) + self.phrase_embedding(labels)
        return features, stack, depth

    def _begins_word(self, ids):
        return ops.cast(ops.take(ops.convert_to_tensor(self.word_starts), ids), "int32")

    def _embed(self, embedding, ids, position, training):
        # Paper 5.4: dropout on the sum of the embeddings and the positional encodings.
        x = self.position(embedding(ids), position=position)
        return self.embedding_dropout(x, training=training)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, num_encoder_layers=self.num_encoder_layers,
                      num_decoder_layers=self.num_decoder_layers, d_model=self.d_model, d_ff=self.d_ff,
                      num_heads=self.num_heads, key_dim=self.key_dim, value_dim=self.value_dim,
                      dropout=self.dropout_rate, attention_dropout=self.attention_dropout,
                      relu_dropout=self.relu_dropout, norm_position=self.norm_position,
                      position_encoding=self.position_encoding, max_position=self.max_position,
                      share_embeddings=self.share_embeddings, layer_norm_epsilon=self.layer_norm_epsilon,
                      word_pointer=self.word_pointer, open_phrases=self.open_phrases)
        return config

