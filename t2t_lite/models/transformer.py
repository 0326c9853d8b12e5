"""The Transformer (paper section 3): encoder and decoder stacks over shared embeddings."""
import dataclasses

import keras
from keras import ops

from t2t_lite import registry
from t2t_lite.config import ModelHParams
from t2t_lite.layers.attention import causal_bias, padding_bias
from t2t_lite.layers.dropout import Dropout
from t2t_lite.layers.embedding import LearnedPosition, SharedEmbedding, SinusoidalPosition
from t2t_lite.layers.transformer_layers import DecoderLayer, EncoderLayer


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
    with a cache run the same layers one position at a time for fast decoding.
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
    """

    def __init__(self, vocab_size, num_encoder_layers=6, num_decoder_layers=6, d_model=512, d_ff=2048, num_heads=8,
                 key_dim=0, value_dim=0, dropout=0.1, attention_dropout=0.0, relu_dropout=0.0, norm_position="post",
                 position_encoding="sinusoid", max_position=1024, share_embeddings=True, layer_norm_epsilon=1e-6,
                 **kwargs):
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
        states, _ = self._decoder_stack(shift_right(features["targets"]), memory, memory_bias, None, None, training,
                                        None)
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

    def decode(self, decoder_inputs, memory, memory_bias, cache=None, decode_index=None, training=None,
               kernels=None):
        """Runs the decoder stack and the shared softmax projection.

        Args:
          decoder_inputs: int [N, T_tgt] (shifted targets), or [N, 1] with a cache.
          memory: [B, T_src, D] from `encode`, or its `memory_cache`; N = B * R rows
            (R beams per sentence) may share the cached one.
          memory_bias: [B, 1, 1, T_src].
          cache: None, or the self-attention caches, `initial_cache` at position 0.
          decode_index: int scalar, the position of decoder_inputs when cached.
          kernels: the decoder's weights prepared for its steps (ops.StepKernels, what Decoder passes),
            or None to multiply by the variables as they are.
        Returns:
          (float32 logits [N, T_tgt, V], the caches grown by one position, or None).
        """
        x, new_cache = self._decoder_stack(decoder_inputs, memory, memory_bias, cache, decode_index, training, kernels)
        return self.target_embedding.logits(x, kernels=kernels), new_cache

    def _decoder_stack(self, decoder_inputs, memory, memory_bias, cache, decode_index, training, kernels):
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
        rows reorders only the ancestry (search_state.SplitState), never the
        per-sentence "layer_i" caches.

        Args:
          batch_size: B sentences; the decoder runs N = B*K rows, row b*K + k in slot k.
          beams: K.
          dtype: the compute dtype (the memory's).
        Returns:
          {"ancestry" [N, 0, K], "layer_i": {"key", "recent_key" [B, H, 0, K, Dk], "value", "recent_value"
          [B, H, 0, K, Dv]}}: the settled and recent parts of MultiHeadAttention's cache.
        """
        def empty(depth):
            return ops.zeros((batch_size, self.num_heads, 0, beams, depth), dtype)

        cache = {f"layer_{i}": {"key": empty(self.head_key_dim), "value": empty(self.head_value_dim),
                                "recent_key": empty(self.head_key_dim), "recent_value": empty(self.head_value_dim)}
                 for i in range(len(self.decoder_layers))}
        cache["ancestry"] = ops.zeros((batch_size * beams, 0, beams), dtype)
        return cache

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
                      share_embeddings=self.share_embeddings, layer_norm_epsilon=self.layer_norm_epsilon)
        return config


def _grown_ancestry(ancestry):
    """ancestry [N, t, K] with this step's position appended: each row's own slot (row n is in slot n % K)."""
    rows, beams = ops.shape(ancestry)[0], ancestry.shape[-1]
    own_slot = ops.one_hot(ops.arange(rows) % beams, beams, dtype=ancestry.dtype)  # [N, K]
    return ops.concatenate([ancestry, own_slot[:, None, :]], axis=1)  # [N, t+1, K]

