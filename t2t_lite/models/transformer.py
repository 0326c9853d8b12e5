"""The Transformer (paper section 3): encoder and decoder stacks over shared embeddings."""
import keras
from keras import ops

from t2t_lite import registry
from t2t_lite.config import ModelHParams
from t2t_lite.layers.attention import causal_bias, padding_bias
from t2t_lite.layers.dropout import Dropout
from t2t_lite.layers.embedding import LearnedPosition, SharedEmbedding, SinusoidalPosition
from t2t_lite.layers.kernel_layout import STEP_ROWS, faster_layout
from t2t_lite.layers.projection import DecodingKernels
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
        self.embedding_dropout = Dropout(hp.dropout)
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
        return self.target_embedding.logits(self.decoder_states(features, training=training))

    def decoder_states(self, features, training=None):
        """features -> the decoder's outputs [B, T_tgt, D] (compute dtype), before the softmax projection.

        Training projects them onto the vocabulary inside its loss, a slice of
        positions at a time (losses.projected_smoothed_cross_entropy), so the
        [B, T_tgt, V] logits never exist at once.
        """
        memory, memory_bias = self.encode(features["inputs"], training=training)
        states, _ = self._decoder_stack(shift_right(features["targets"]), memory, memory_bias, None, None, training)
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

    def decode(self, decoder_inputs, memory, memory_bias, cache=None, decode_index=None, output_weights=None,
               kernels=None, training=None):
        """Runs the decoder stack and the shared softmax projection.

        Args:
          decoder_inputs: int [N, T_tgt] (shifted targets), or [N, 1] with a cache.
          memory: [B, T_src, D] from `encode`, or its `memory_cache`; N = B * R rows
            (R beams per sentence) may share the cached one.
          memory_bias: [B, 1, 1, T_src].
          cache: None, or the self-attention caches, `initial_cache` at position 0.
          decode_index: int scalar, the position of decoder_inputs when cached.
          output_weights: target_embedding.output_weights(compute dtype, layout), made once by a
            caller that decodes step by step; None multiplies by the embedding itself.
          kernels: `decoding_kernels(compute dtype, layout)`, made once by such a caller, or None.
        Returns:
          (float32 logits [N, T_tgt, V], the caches grown by one position, or None).
        """
        x, new_cache = self._decoder_stack(decoder_inputs, memory, memory_bias, cache, decode_index, training,
                                           kernels)
        return self.target_embedding.logits(x, output_weights), new_cache

    def decoding_layout(self, dtype):
        """The weight layout decoding steps multiply fastest in on this CPU, for `decoding_kernels`
        and `output_weights`: measured at the output projection's shape once per process (layers/kernel_layout.py).
        """
        return faster_layout(STEP_ROWS, self.hp.d_model, self.hp.vocab_size, keras.backend.standardize_dtype(dtype))

    def decoding_kernels(self, dtype, layout):
        """The decoder's Dense kernels in dtype and layout, for `decode`'s kernels (layers/projection.py).

        A caller that decodes step by step makes them once, outside its loop.
        """
        return DecodingKernels(self.decoder_layers, dtype, layout)

    def _decoder_stack(self, decoder_inputs, memory, memory_bias, cache, decode_index, training, kernels=None):
        """decode() up to the softmax projection: (states [N, T_tgt, D], grown caches or None)."""
        x = self._embed(self.target_embedding, decoder_inputs, decode_index, training)
        # A cache holds only the positions before this one: nothing to mask.
        self_bias = causal_bias(ops.shape(decoder_inputs)[1]) if cache is None else None  # [1, 1, T_tgt, T_tgt]
        new_cache = None if cache is None else {"ancestry": _grown_ancestry(cache["ancestry"])}  # [N, t+1, K]
        for i, layer in enumerate(self.decoder_layers):
            name = f"layer_{i}"
            layer_memory = memory[name] if isinstance(memory, dict) else memory
            layer_cache = None if cache is None else {**cache[name], "ancestry": new_cache["ancestry"]}
            x, layer_cache = layer(x, layer_memory, self_bias, memory_bias, cache=layer_cache, training=training,
                                   kernels=kernels)
            if cache is not None:
                new_cache[name] = layer_cache
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        return x, new_cache

    def memory_cache(self, memory):
        """Every decoder layer's encoder-decoder keys/values, projected once per sentence.

        Args:
          memory: [B, T_src, D] encoder output.
        Returns:
          {"layer_i": {"key" [B, H, T_src, Dk], "value" [B, H, T_src, Dv]}}.
        """
        return {f"layer_{i}": layer.cross_attention.memory_cache(memory) for i, layer in enumerate(self.decoder_layers)}

    def initial_cache(self, batch_size, beams=1, dtype="float32"):
        """Empty self-attention caches, grown by one position per decoding step.

        Each sentence's K beams share caches with a slot per beam, and
        "ancestry" records per row which slot holds each position of its
        history (MultiHeadAttention's class doc). A search that reorders the
        rows reorders only the ancestry (beam_search.SplitState), never the
        per-sentence "layer_i" caches.

        Args:
          batch_size: B sentences; the decoder runs N = B*K rows, row b*K + k in slot k.
          beams: K.
          dtype: the compute dtype (the memory's).
        Returns:
          {"ancestry" [N, 0, K], "layer_i": {"key", "recent_key" [B, H, 0, K, Dk], "value", "recent_value"
          [B, H, 0, K, Dv]}}: the settled and recent parts of MultiHeadAttention's cache.
        """
        hp = self.hp

        def empty(depth):
            return ops.zeros((batch_size, hp.num_heads, 0, beams, depth), dtype)

        cache = {f"layer_{i}": {"key": empty(hp.head_key_dim), "value": empty(hp.head_value_dim),
                                "recent_key": empty(hp.head_key_dim), "recent_value": empty(hp.head_value_dim)}
                 for i in range(len(self.decoder_layers))}
        cache["ancestry"] = ops.zeros((batch_size * beams, 0, beams), dtype)
        return cache

    def _embed(self, embedding, ids, position, training):
        # Paper 5.4: dropout on the sum of the embeddings and the positional encodings.
        x = self.position(embedding(ids), position=position)
        return self.embedding_dropout(x, training=training)

    def get_config(self):
        return {"hp": self.hp.__dict__, **super().get_config()}


def _grown_ancestry(ancestry):
    """ancestry [N, t, K] with this step's position appended: each row's own slot (row n is in slot n % K)."""
    rows, beams = ops.shape(ancestry)[0], ancestry.shape[-1]
    own_slot = ops.one_hot(ops.arange(rows) % beams, beams, dtype=ancestry.dtype)  # [N, K]
    return ops.concatenate([ancestry, own_slot[:, None, :]], axis=1)  # [N, t+1, K]


def _position_layer(hp):
    if hp.position_encoding == "learned":
        return LearnedPosition(hp.max_position, hp.d_model, name="position")
    return SinusoidalPosition(name="position")

