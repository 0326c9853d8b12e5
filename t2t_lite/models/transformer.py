"""The Transformer (paper section 3): encoder and decoder stacks over shared embeddings."""
import keras
from keras import ops

from t2t_lite import registry
from t2t_lite.config import ModelHParams
from t2t_lite.layers.attention import causal_bias, padding_bias
from t2t_lite.layers.embedding import LearnedPosition, SharedEmbedding, SinusoidalPosition
from t2t_lite.layers.transformer_layers import DecoderLayer, EncoderLayer


def shift_right(targets):
    """Decoder inputs: targets delayed one step, position 0 holding the start id 0 (t2t's PAD).

    targets int [B, T_tgt] -> int [B, T_tgt].
    """
    return ops.pad(targets, [[0, 0], [1, 0]])[:, :-1]


@registry.models.register("transformer")
class Transformer(keras.Model):
    """Encoder-decoder Transformer; `call` gives teacher-forced logits.

    `encode` and `decode` are the two halves; `initial_cache` + `decode`
    with a cache run the same layers one position at a time for fast decoding.

    Args:
      hp: ModelHParams (vocab_size must be set).
    """

    def __init__(self, hp: ModelHParams, **kwargs):
        super().__init__(**kwargs)
        if hp.vocab_size <= 0:
            raise ValueError(f"ModelHParams.vocab_size must be set, got {hp.vocab_size}")
        self.hp = hp
        self.target_embedding = SharedEmbedding(hp.vocab_size, hp.d_model, name="shared_embedding")
        self.source_embedding = (self.target_embedding if hp.share_embeddings
                                 else SharedEmbedding(hp.vocab_size, hp.d_model, name="source_embedding"))
        self.position = _position_layer(hp)
        self.embedding_dropout = keras.layers.Dropout(hp.dropout)
        self.encoder_layers = [EncoderLayer(hp, name=f"encoder_{i}") for i in range(hp.num_encoder_layers)]
        self.decoder_layers = [DecoderLayer(hp, name=f"decoder_{i}") for i in range(hp.num_decoder_layers)]
        # Keras 3 does not hand layers held in a list to tf.train.Checkpoint's
        # object graph; named attributes put every layer's weights under model/.
        for layer in self.encoder_layers + self.decoder_layers:
            setattr(self, layer.name, layer)
        # Pre-norm leaves the residual stream unnormalised; t2t adds a final LayerNorm.
        pre = hp.norm_position == "pre"
        self.encoder_norm = keras.layers.LayerNormalization(epsilon=hp.layer_norm_epsilon, name="encoder_norm") if pre else None
        self.decoder_norm = keras.layers.LayerNormalization(epsilon=hp.layer_norm_epsilon, name="decoder_norm") if pre else None

    def call(self, features, training=None):
        """features {"inputs" [B, T_src], "targets" [B, T_tgt]} -> float32 logits [B, T_tgt, V]."""
        memory, memory_bias = self.encode(features["inputs"], training=training)
        logits, _ = self.decode(shift_right(features["targets"]), memory, memory_bias, training=training)
        return logits

    def encode(self, inputs, training=None):
        """inputs int [B, T_src] -> (memory [B, T_src, D], memory_bias float32 [B, 1, 1, T_src])."""
        bias = padding_bias(inputs)
        x = self._embed(self.source_embedding, inputs, None, training)
        for layer in self.encoder_layers:
            x = layer(x, bias, training=training)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return x, bias

    def decode(self, decoder_inputs, memory, memory_bias, cache=None, decode_index=None, training=None):
        """Runs the decoder stack and the shared softmax projection.

        Args:
          decoder_inputs: int [B, T_tgt] (shifted targets), or [B, 1] with a cache.
          memory: [B, T_src, D] from `encode`.
          memory_bias: [B, 1, 1, T_src].
          cache: None, or the structure from `initial_cache`.
          decode_index: int scalar, the position of decoder_inputs when cached.
        Returns:
          (float32 logits [B, T_tgt, V], updated cache or None).
        """
        x = self._embed(self.target_embedding, decoder_inputs, decode_index, training)
        if cache is None:
            self_bias = causal_bias(ops.shape(decoder_inputs)[1])  # [1, 1, T_tgt, T_tgt]
        else:
            self_bias = _not_yet_written_bias(cache, decode_index)  # [1, 1, 1, T_max]
        new_cache = None if cache is None else {}
        for i, layer in enumerate(self.decoder_layers):
            layer_cache = None if cache is None else cache[f"layer_{i}"]
            x, layer_cache = layer(x, memory, self_bias, memory_bias, cache=layer_cache,
                                   decode_index=decode_index, training=training)
            if cache is not None:
                new_cache[f"layer_{i}"] = layer_cache
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        return self.target_embedding.logits(x), new_cache

    def initial_cache(self, memory, max_length):
        """The decoding cache: empty self-attention keys/values and the memory's, per layer.

        Args:
          memory: [B, T_src, D] encoder output.
          max_length: T_max, the most positions that will be decoded.
        Returns:
          {"layer_i": {"self": {"key" [B, H, T_max, Dk], "value" [B, H, T_max, Dv]},
                       "memory": {"key" [B, H, T_src, Dk], "value" [B, H, T_src, Dv]}}}
        """
        hp, batch = self.hp, ops.shape(memory)[0]
        cache = {}
        for i, layer in enumerate(self.decoder_layers):
            cache[f"layer_{i}"] = {
                "self": {
                    "key": ops.zeros((batch, hp.num_heads, max_length, hp.head_key_dim), memory.dtype),
                    "value": ops.zeros((batch, hp.num_heads, max_length, hp.head_value_dim), memory.dtype),
                },
                "memory": layer.cross_attention.memory_cache(memory),
            }
        return cache

    def _embed(self, embedding, ids, position, training):
        # Paper 5.4: dropout on the sum of the embeddings and the positional encodings.
        x = self.position(embedding(ids), position=position)
        return self.embedding_dropout(x, training=training)

    def get_config(self):
        return {"hp": self.hp.__dict__, **super().get_config()}


def _position_layer(hp):
    if hp.position_encoding == "learned":
        return LearnedPosition(hp.max_position, hp.d_model, name="position")
    return SinusoidalPosition(name="position")


def _not_yet_written_bias(cache, decode_index):
    """Hides cache slots after decode_index: float32 [1, 1, 1, T_max]."""
    max_length = ops.shape(cache["layer_0"]["self"]["key"])[2]
    future = ops.cast(ops.arange(max_length) > decode_index, "float32")
    return (future * -1e9)[None, None, None, :]
