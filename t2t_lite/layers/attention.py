"""Multi-head scaled dot-product attention (paper 3.2) with an optional key/value cache."""
import keras
from keras import ops

from t2t_lite.layers.projection import project

# Added to the logits of positions that must not be attended to. The logits are
# float32 whatever the compute dtype (softmax runs in float32), so -1e9 is safe
# and exp() of it underflows to exactly 0.
NEG_INF = -1e9


def padding_bias(ids):
    """Attention bias hiding PAD (id 0) keys.

    Args:
      ids: int [B, T] token ids.
    Returns:
      float32 [B, 1, 1, T]: 0 where a real token, NEG_INF where PAD.
    """
    is_pad = ops.cast(ops.equal(ids, 0), "float32")
    return (is_pad * NEG_INF)[:, None, None, :]


def causal_bias(length):
    """Attention bias letting position i see only positions <= i.

    Returns:
      float32 [1, 1, T, T] with NEG_INF above the diagonal.
    """
    rows = ops.arange(length)[:, None]
    cols = ops.arange(length)[None, :]
    return ops.cast(cols > rows, "float32")[None, None] * NEG_INF


class MultiHeadAttention(keras.layers.Layer):
    """softmax(Q K^T / sqrt(Dk) + bias) V over H heads, then W^O.

    One implementation serves training and incremental decoding:
      - memory None, cache None: self-attention over `query`.
      - memory a tensor: attention from `query` to `memory` (encoder-decoder).
      - memory a dict from `memory_cache`: the same with the memory's keys and
        values projected once. Its rows may be fewer than the query's: query
        rows n*R .. n*R + R - 1 all attend to memory row n, so the K beams of a
        sentence share one copy of its encoder keys/values instead of K.
      - cache {"key", "value"} [N, H, t, Dk|Dv]: incremental self-attention.
        The query's keys/values are appended and it attends to all t + T_q
        positions; the grown cache is returned. It holds only decoded
        positions, so no mask is needed and the cost follows the output length.
      - kernels, a `TransposedKernels`: the projections run through its
        [out, in] copies (faster at a decoding step's shapes); same values.

    Args:
      num_heads: H.
      key_dim: Dk, per-head query/key width.
      value_dim: Dv, per-head value width.
      d_model: D, width of the output projection.
      dropout: rate on the attention weights (t2t's attention_dropout).
    """

    def __init__(self, num_heads, key_dim, value_dim, d_model, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        self.num_heads, self.key_dim, self.value_dim = num_heads, key_dim, value_dim
        self.d_model, self.dropout_rate = d_model, dropout
        self.query_proj = keras.layers.Dense(num_heads * key_dim, name="query")
        self.key_proj = keras.layers.Dense(num_heads * key_dim, name="key")
        self.value_proj = keras.layers.Dense(num_heads * value_dim, name="value")
        self.output_proj = keras.layers.Dense(d_model, name="output")
        self.weights_dropout = keras.layers.Dropout(dropout)
        # When True, eager calls keep their attention weights [B, H, T_q, T_k] in
        # `last_weights` for t2t-lite-visualize; off, it costs nothing.
        self.keep_weights = False
        self.last_weights = None

    def build(self, query_shape, memory_shape=None, *args, **kwargs):
        width = (None, None, self.d_model)
        self.query_proj.build(width)
        self.key_proj.build(width)
        self.value_proj.build(width)
        self.output_proj.build((None, None, self.num_heads * self.value_dim))

    def _split_heads(self, x, head_dim):
        # [B, T, H*d] -> [B, H, T, d]
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        x = ops.reshape(x, (batch, length, self.num_heads, head_dim))
        return ops.transpose(x, (0, 2, 1, 3))

    def memory_cache(self, memory, kernels=None):
        """Projects a fixed memory [B, T_src, D] once into {"key", "value"} [B, H, T_src, Dk|Dv]."""
        return {
            "key": self._split_heads(project(self.key_proj, memory, kernels), self.key_dim),
            "value": self._split_heads(project(self.value_proj, memory, kernels), self.value_dim),
        }

    def call(self, query, memory=None, bias=None, cache=None, training=None, kernels=None):
        """Attends from `query` [N, T_q, D]; returns (output [N, T_q, D], grown cache or None)."""
        q = self._split_heads(project(self.query_proj, query, kernels), self.key_dim)  # [N, H, T_q, Dk]
        if isinstance(memory, dict):
            context = self._attend_shared(q, memory["key"], memory["value"], bias, training)
        else:
            kv = self.memory_cache(query if memory is None else memory, kernels)
            keys, values = kv["key"], kv["value"]  # [N, H, T_k, Dk|Dv]
            if cache is not None:
                keys = ops.concatenate([cache["key"], keys], axis=2)  # [N, H, t + T_q, Dk]
                values = ops.concatenate([cache["value"], values], axis=2)
                cache = {"key": keys, "value": values}
            context = self._attend(q, keys, values, bias, training)  # [N, H, T_q, Dv]
        context = ops.transpose(context, (0, 2, 1, 3))  # [N, T_q, H, Dv]
        rows, length = ops.shape(context)[0], ops.shape(context)[1]
        context = ops.reshape(context, (rows, length, self.num_heads * self.value_dim))
        return project(self.output_proj, context, kernels), cache

    def _attend(self, q, keys, values, bias, training):
        """q [B, H, T_q, Dk], keys/values [B, H, T_k, Dk|Dv], bias broadcastable to [B, H, T_q, T_k] -> [B, H, T_q, Dv]."""
        logits = ops.einsum("bhqd,bhkd->bhqk", q, keys)  # [B, H, T_q, T_k]
        logits = ops.cast(logits, "float32") * (self.key_dim**-0.5)
        if bias is not None:
            logits = logits + ops.cast(bias, "float32")  # Keras casts float inputs to the compute dtype
        weights = ops.cast(ops.softmax(logits, axis=-1), values.dtype)
        if self.keep_weights:
            self.last_weights = weights
        weights = self.weights_dropout(weights, training=training)
        return ops.einsum("bhqk,bhkd->bhqd", weights, values)  # [B, H, T_q, Dv]

    def _attend_shared(self, q, keys, values, bias, training):
        """Like _attend, with R = N / B query rows per memory row: q [N, H, T_q, Dk], keys [B, ...] -> [N, H, T_q, Dv].

        The R rows' queries become R * T_q query positions of their memory row,
        one batched matmul against one copy of the keys.
        """
        rows, length = ops.shape(q)[0], ops.shape(q)[2]
        sentences = ops.shape(keys)[0]
        per_sentence = rows // sentences
        q = ops.reshape(q, (sentences, per_sentence, self.num_heads, length, self.key_dim))
        q = ops.reshape(ops.transpose(q, (0, 2, 1, 3, 4)), (sentences, self.num_heads, per_sentence * length,
                                                            self.key_dim))  # [B, H, R*T_q, Dk]
        context = self._attend(q, keys, values, bias, training)  # [B, H, R*T_q, Dv]
        context = ops.reshape(context, (sentences, self.num_heads, per_sentence, length, self.value_dim))
        return ops.reshape(ops.transpose(context, (0, 2, 1, 3, 4)), (rows, self.num_heads, length, self.value_dim))

    def get_config(self):
        config = super().get_config()
        config.update(num_heads=self.num_heads, key_dim=self.key_dim, value_dim=self.value_dim,
                      d_model=self.d_model, dropout=self.dropout_rate)
        return config

