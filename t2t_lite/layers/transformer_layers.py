"""Encoder and decoder layers, with the paper's post-norm or t2t's pre-norm."""
import keras

from t2t_lite.layers.attention import MultiHeadAttention
from t2t_lite.layers.dropout import Dropout
from t2t_lite.layers.feed_forward import FeedForward


@keras.saving.register_keras_serializable(package="t2t_lite")
class Residual(keras.layers.Layer):
    """Wraps a sub-layer with dropout, a residual connection and layer normalisation.

      post (paper 5.4):  LayerNorm(x + Dropout(Sublayer(x)))
      pre  (t2t v2+):    x + Dropout(Sublayer(LayerNorm(x)))

    `before(x)` is what the sub-layer sees; calling the layer with x and the
    sub-layer's output gives the new residual stream.

    Args:
      norm_position: "post" or "pre".
      dropout: P_drop on the sub-layer output.
      epsilon: LayerNorm epsilon.
    """

    def __init__(self, norm_position, dropout, epsilon, **kwargs):
        super().__init__(**kwargs)
        self.norm_position, self.dropout_rate, self.epsilon = norm_position, dropout, epsilon
        self.norm = keras.layers.LayerNormalization(epsilon=epsilon, name="norm", dtype=self.dtype_policy)
        self.dropout = Dropout(dropout, dtype=self.dtype_policy)

    def build(self, input_shape, *args, **kwargs):
        if not self.norm.built:  # `before` may have built it already
            self.norm.build(input_shape)

    def before(self, x):
        """What the sub-layer sees: x, or LayerNorm(x) under pre-norm."""
        return self.norm(x) if self.norm_position == "pre" else x

    def call(self, x, sublayer_output, training=None):
        """Combines the residual stream x [B, T, D] with the sub-layer's output [B, T, D]."""
        y = x + self.dropout(sublayer_output, training=training)
        return self.norm(y) if self.norm_position == "post" else y

    def get_config(self):
        config = super().get_config()
        config.update(norm_position=self.norm_position, dropout=self.dropout_rate, epsilon=self.epsilon)
        return config


class _Sublayers(keras.layers.Layer):
    """The settings shared by EncoderLayer and DecoderLayer, and the factories of their sub-layers.

    Which classes the sub-layers are is a class attribute each, so a variant replaces one by subclassing
    (docs/extending.md): its layers are then built, trained and decoded with it.

    Args:
      d_model: D, width of the residual stream.
      num_heads: H.
      d_ff: F, the feed-forward network's hidden width.
      key_dim, value_dim: Dk and Dv per head; None for D // H.
      dropout: P_drop on each sub-layer's output (paper 5.4).
      attention_dropout: rate on the attention weights.
      relu_dropout: rate on the feed-forward hidden activations.
      norm_position: "post" (paper) or "pre" (t2t v2+).
      epsilon: LayerNorm epsilon.
    """

    self_attention_class = MultiHeadAttention
    feed_forward_class = FeedForward

    def __init__(self, d_model, num_heads, d_ff, key_dim=None, value_dim=None, dropout=0.0, attention_dropout=0.0,
                 relu_dropout=0.0, norm_position="post", epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        if norm_position not in ("post", "pre"):
            raise ValueError(f"norm_position must be 'post' or 'pre', got {norm_position!r}")
        self.d_model, self.num_heads, self.d_ff = d_model, num_heads, d_ff
        self.key_dim, self.value_dim = key_dim, value_dim
        self.dropout_rate, self.attention_dropout, self.relu_dropout = dropout, attention_dropout, relu_dropout
        self.norm_position, self.epsilon = norm_position, epsilon

    def _attention(self, attention_class, name):
        per_head = self.d_model // self.num_heads
        return attention_class(self.num_heads, self.key_dim or per_head, self.value_dim or per_head, self.d_model,
                               dropout=self.attention_dropout, name=name, dtype=self.dtype_policy)

    def _residual(self, name):
        return Residual(self.norm_position, self.dropout_rate, self.epsilon, name=name, dtype=self.dtype_policy)

    def _feed_forward(self):
        return self.feed_forward_class(self.d_model, self.d_ff, self.relu_dropout, name="ffn", dtype=self.dtype_policy)

    def sublayers(self) -> list:
        """The layer's sub-layers, in the order `call` reaches them."""
        raise NotImplementedError

    def build(self, input_shape, *args, **kwargs):
        # Every sub-layer takes [B, T, D]: all widths are known from the settings.
        for sublayer in self.sublayers():
            sublayer.build((None, None, self.d_model))

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, num_heads=self.num_heads, d_ff=self.d_ff, key_dim=self.key_dim,
                      value_dim=self.value_dim, dropout=self.dropout_rate, attention_dropout=self.attention_dropout,
                      relu_dropout=self.relu_dropout, norm_position=self.norm_position, epsilon=self.epsilon)
        return config


@keras.saving.register_keras_serializable(package="t2t_lite")
class EncoderLayer(_Sublayers):
    """Self-attention then FFN, each inside a Residual (settings: see _Sublayers)."""

    def __init__(self, d_model, num_heads, d_ff, **kwargs):
        super().__init__(d_model, num_heads, d_ff, **kwargs)
        self.self_attention = self._attention(self.self_attention_class, "self_attention")
        self.self_attention_residual = self._residual("self_attention_residual")
        self.ffn = self._feed_forward()
        self.ffn_residual = self._residual("ffn_residual")

    def sublayers(self) -> list:
        return [self.self_attention, self.self_attention_residual, self.ffn, self.ffn_residual]

    def call(self, x, bias, training=None):
        """x [B, T_src, D], bias [B, 1, 1, T_src] -> [B, T_src, D]."""
        residual = self.self_attention_residual
        x = residual(x, self.self_attention(residual.before(x), bias=bias, training=training), training=training)
        residual = self.ffn_residual
        return residual(x, self.ffn(residual.before(x), training=training), training=training)


@keras.saving.register_keras_serializable(package="t2t_lite")
class DecoderLayer(_Sublayers):
    """Masked self-attention, encoder-decoder attention, FFN, each inside a Residual (settings: see _Sublayers)."""

    cross_attention_class = MultiHeadAttention

    def __init__(self, d_model, num_heads, d_ff, **kwargs):
        super().__init__(d_model, num_heads, d_ff, **kwargs)
        self.self_attention = self._attention(self.self_attention_class, "self_attention")
        self.self_attention_residual = self._residual("self_attention_residual")
        self.cross_attention = self._attention(self.cross_attention_class, "cross_attention")
        self.cross_attention_residual = self._residual("cross_attention_residual")
        self.ffn = self._feed_forward()
        self.ffn_residual = self._residual("ffn_residual")

    def sublayers(self) -> list:
        return [self.self_attention, self.self_attention_residual, self.cross_attention,
                self.cross_attention_residual, self.ffn, self.ffn_residual]

    def prepared_products(self, prepare) -> dict:
        """Its sub-layers' products for a cached `call` (each sub-layer's `prepared_products`), or {} where a
        subclass overrides `call` (Keras refuses the prepared kernels, which are not tensors, in a `call` that
        takes them as **kwargs)."""
        if type(self).call is not DecoderLayer.call:
            return {}
        return {"self_attention": self.self_attention.prepared_products(prepare),
                "cross_attention": self.cross_attention.prepared_products(prepare, fixed_memory=True),
                "ffn": self.ffn.prepared_products(prepare)}

    def call(self, x, memory, self_bias, memory_bias, cache=None, products=None, positions=None, training=None):
        """Runs one decoder layer.

        Args:
          x: [B, T_tgt, D].
          memory: encoder output [B, T_src, D], or this layer's cross_attention.memory_cache of it.
          self_bias: [1|B, 1, T_tgt, T_tgt] causal mask; with a cache, [.., T_tgt, T_cached + T_tgt].
          memory_bias: [B, 1, 1, T_src].
          cache: None, or the self-attention's cache of the positions before x's (MultiHeadAttention.empty_cache).
          products: None, or `prepared_products`' (a decoding step's kernels).
          positions: None, or int32 [T_tgt], x's positions (MultiHeadAttention.call's).
        Returns:
          output [B, T_tgt, D], and with a cache the cache with x's positions added.
        """
        products = products or {}
        residual = self.self_attention_residual
        attended = self.self_attention(residual.before(x), bias=self_bias, cache=cache, positions=positions,
                                       training=training, **_given(products, "self_attention"))
        if cache is not None:
            attended, cache = attended
        x = residual(x, attended, training=training)
        residual = self.cross_attention_residual
        x = residual(x, self.cross_attention(residual.before(x), memory=memory, bias=memory_bias, training=training,
                                             **_given(products, "cross_attention")), training=training)
        residual = self.ffn_residual
        x = residual(x, self.ffn(residual.before(x), training=training, **_given(products, "ffn")), training=training)
        return x if cache is None else (x, cache)


def _given(products: dict, sublayer: str) -> dict:
    """The `products` argument of a sub-layer's call where it has some: a sub-layer that takes none (a user's
    own `call`, which prepared_products leaves out) is called without it."""
    return {"products": products[sublayer]} if products.get(sublayer) else {}
