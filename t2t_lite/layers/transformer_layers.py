"""Encoder and decoder layers, with the paper's post-norm or t2t's pre-norm."""
import keras

from t2t_lite.layers.attention import MultiHeadAttention
from t2t_lite.layers.dropout import Dropout
from t2t_lite.layers.feed_forward import FeedForward


class Residual(keras.layers.Layer):
    """Wraps a sub-layer with dropout, a residual connection and layer normalisation.

      post (paper 5.4):  LayerNorm(x + Dropout(Sublayer(x)))
      pre  (t2t v2+):    x + Dropout(Sublayer(LayerNorm(x)))

    Args:
      norm_position: "post" or "pre".
      dropout: P_drop on the sub-layer output.
      epsilon: LayerNorm epsilon.
    """

    def __init__(self, norm_position, dropout, epsilon, **kwargs):
        super().__init__(**kwargs)
        self.norm_position, self.dropout_rate, self.epsilon = norm_position, dropout, epsilon
        self.norm = keras.layers.LayerNormalization(epsilon=epsilon, name="norm")
        self.dropout = Dropout(dropout)

    def build(self, input_shape):
        self.norm.build(input_shape)

    def before(self, x):
        """What the sub-layer sees: x, or LayerNorm(x) under pre-norm."""
        return self.norm(x) if self.norm_position == "pre" else x

    def after(self, x, sublayer_output, training=None):
        """Combines the residual stream x with the sub-layer's output."""
        y = x + self.dropout(sublayer_output, training=training)
        return self.norm(y) if self.norm_position == "post" else y

    def get_config(self):
        config = super().get_config()
        config.update(norm_position=self.norm_position, dropout=self.dropout_rate, epsilon=self.epsilon)
        return config


def _build_all(layer, input_shape):
    """Builds every sub-layer for a [B, T, D] input: all widths are known from the hparams."""
    width = (None, None, input_shape[-1])
    for sublayer in layer._layers:
        sublayer.build(width)


def _attention(hp, name):
    return MultiHeadAttention(hp.num_heads, hp.head_key_dim, hp.head_value_dim, hp.d_model,
                              dropout=hp.attention_dropout, name=name)


def _residual(hp, name):
    return Residual(hp.norm_position, hp.dropout, hp.layer_norm_epsilon, name=name)


class EncoderLayer(keras.layers.Layer):
    """Self-attention then FFN, each inside a Residual.

    Args:
      hp: ModelHParams.
    """

    def __init__(self, hp, **kwargs):
        super().__init__(**kwargs)
        self.self_attention = _attention(hp, "self_attention")
        self.self_attention_residual = _residual(hp, "self_attention_residual")
        self.ffn = FeedForward(hp.d_model, hp.d_ff, hp.relu_dropout, name="ffn")
        self.ffn_residual = _residual(hp, "ffn_residual")

    def build(self, input_shape, *args, **kwargs):
        _build_all(self, input_shape)

    def call(self, x, bias, training=None):
        """x [B, T_src, D], bias [B, 1, 1, T_src] -> [B, T_src, D]."""
        h, _ = self.self_attention(self.self_attention_residual.before(x), bias=bias, training=training)
        x = self.self_attention_residual.after(x, h, training)
        h = self.ffn(self.ffn_residual.before(x), training=training)
        return self.ffn_residual.after(x, h, training)


class DecoderLayer(keras.layers.Layer):
    """Masked self-attention, encoder-decoder attention, FFN, each inside a Residual.

    Args:
      hp: ModelHParams.
    """

    def __init__(self, hp, **kwargs):
        super().__init__(**kwargs)
        self.self_attention = _attention(hp, "self_attention")
        self.self_attention_residual = _residual(hp, "self_attention_residual")
        self.cross_attention = _attention(hp, "cross_attention")
        self.cross_attention_residual = _residual(hp, "cross_attention_residual")
        self.ffn = FeedForward(hp.d_model, hp.d_ff, hp.relu_dropout, name="ffn")
        self.ffn_residual = _residual(hp, "ffn_residual")

    def build(self, input_shape, *args, **kwargs):
        _build_all(self, input_shape)

    def call(self, x, memory, self_bias, memory_bias, cache=None, training=None, kernels=None):
        """Runs one decoder layer.

        Args:
          x: [N, T_tgt, D] (T_tgt = 1 when decoding incrementally).
          memory: encoder output [B, T_src, D], or this layer's cross_attention.memory_cache
            of it, which N = B * R rows may share (R beams per sentence).
          self_bias: [1|N, 1, T_tgt, T_tgt] causal mask; None with a cache (it holds only the past).
          memory_bias: [B, 1, 1, T_src].
          cache: None, or when decoding this layer's self-attention cache {key, value,
            recent_key, recent_value} [B, H, t0|t1, K, Dk|Dv] with the step's ancestry
            [N, t + 1, K] (MultiHeadAttention's class doc).
          kernels: None, or a DecodingKernels covering this layer (decoding).
        Returns:
          (output [N, T_tgt, D], the cache grown by T_tgt positions, or None).
        """
        h, cache = self.self_attention(self.self_attention_residual.before(x), bias=self_bias, cache=cache,
                                       training=training, kernels=kernels)
        x = self.self_attention_residual.after(x, h, training)
        h, _ = self.cross_attention(self.cross_attention_residual.before(x), memory=memory, bias=memory_bias,
                                    training=training, kernels=kernels)
        x = self.cross_attention_residual.after(x, h, training)
        h = self.ffn(self.ffn_residual.before(x), training=training, kernels=kernels)
        return self.ffn_residual.after(x, h, training), cache
