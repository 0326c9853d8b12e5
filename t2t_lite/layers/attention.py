"""Multi-head scaled dot-product attention (paper 3.2)."""
import keras
from keras import ops

from t2t_lite.layers.dropout import Dropout

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
    positions = ops.arange(length)
    return ops.cast(positions[None, :] > positions[:, None], "float32")[None, None] * NEG_INF


def positions(x):
    """[B, T, D] -> ([B*T, D], B, T): one row per position, for a Dense to project.

    A Dense multiplies a 3-D input through tf.tensordot, about twenty graph ops a product (and as many again
    in its gradient), where a 2-D input takes one MatMul that Grappler fuses with the bias: the same
    arithmetic in fewer ops, which every trace and every decoding step pays for.
    """
    shape = ops.shape(x)
    return ops.reshape(x, (-1, x.shape[-1])), shape[0], shape[1]


def split_heads(x, heads, batch, length):
    """[B*T, H*d] -> [B, H, T, d]."""
    return ops.transpose(ops.reshape(x, (batch, length, heads, x.shape[-1] // heads)), (0, 2, 1, 3))


def merge_heads(x):
    """[B, H, T, d] -> [B*T, H*d]."""
    return ops.reshape(ops.transpose(x, (0, 2, 1, 3)), (-1, x.shape[1] * x.shape[3]))


def attention_weights(q, keys, bias):
    """softmax(q keys^T / sqrt(Dk) + bias) in float32.

    Args:
      q: [B, H, T_q, Dk].
      keys: [B, H, T_k, Dk].
      bias: broadcastable to [B, H, T_q, T_k], or None.
    Returns:
      float32 [B, H, T_q, T_k].
    """
    return scaled_softmax(ops.einsum("bhqd,bhkd->bhqk", q, keys), q.shape[-1], bias)  # [B, H, T_q, T_k]


def scaled_softmax(logits, key_dim, bias=None):
    """softmax(logits / sqrt(key_dim) + bias) over the last axis, in float32: eq. 1's weights from q k^T, written
    once for the layers and for the beam search's step (decoding/cached_step.py), whatever their layouts."""
    logits = ops.cast(logits, "float32") * (key_dim**-0.5)
    if bias is not None:
        logits = logits + ops.cast(bias, "float32")  # Keras casts float inputs to the compute dtype
    return ops.softmax(logits, axis=-1)


def attend(q, keys, values, bias, weights_dropout=None, training=None):
    """Scaled dot-product attention (paper eq. 1) per head: [B, H, T_q, Dk] x [B, H, T_k, Dk|Dv] -> [B, H, T_q, Dv].

    weights_dropout: a dropout layer applied to the weights, or None.
    """
    weights = ops.cast(attention_weights(q, keys, bias), values.dtype)
    if weights_dropout is not None:
        weights = weights_dropout(weights, training=training)
    return ops.einsum("bhqk,bhkd->bhqd", weights, values)  # [B, H, T_q, Dv]


@keras.saving.register_keras_serializable(package="t2t_lite")
class MultiHeadAttention(keras.layers.Layer):
    """softmax(Q K^T / sqrt(Dk) + bias) V over H heads, then W^O.

      - memory None: self-attention over `query`.
      - memory a tensor: attention from `query` to `memory` (encoder-decoder).
      - memory a dict from `memory_cache`: the same with the memory's keys and
        values projected once.
    A beam search's step (decoding/cached_step.py) runs the projections
    itself, over caches laid out for its beams.

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
        policy = self.dtype_policy
        self.query_proj = keras.layers.Dense(num_heads * key_dim, name="query", dtype=policy)
        self.key_proj = keras.layers.Dense(num_heads * key_dim, name="key", dtype=policy)
        self.value_proj = keras.layers.Dense(num_heads * value_dim, name="value", dtype=policy)
        self.output_proj = keras.layers.Dense(d_model, name="output", dtype=policy)
        self.weights_dropout = Dropout(dropout, dtype=policy)

    def build(self, query_shape, memory_shape=None, *args, **kwargs):
        for projection in (self.query_proj, self.key_proj, self.value_proj):
            projection.build((None, None, self.d_model))
        self.output_proj.build((None, None, self.num_heads * self.value_dim))

    def memory_cache(self, memory):
        """Projects a fixed memory [B, T_src, D] once into {"key", "value"} [B, H, T_src, Dk|Dv]."""
        return self._keys_and_values(*positions(memory))

    def _keys_and_values(self, rows, batch, length):
        """The keys and values [B, H, T, Dk|Dv] of positions given as rows [B*T, D]."""
        return {"key": split_heads(self.key_proj(rows), self.num_heads, batch, length),
                "value": split_heads(self.value_proj(rows), self.num_heads, batch, length)}

    def call(self, query, memory=None, bias=None, training=None):
        """Attends from `query` [B, T_q, D]; returns the output [B, T_q, D]."""
        rows, batch, length = positions(query)  # [B*T_q, D]
        q = split_heads(self.query_proj(rows), self.num_heads, batch, length)  # [B, H, T_q, Dk]
        if memory is None:  # self-attention: the query's own rows
            kv = self._keys_and_values(rows, batch, length)
        elif isinstance(memory, dict):
            kv = memory
        else:
            kv = self.memory_cache(memory)
        context = attend(q, kv["key"], kv["value"], bias, self.weights_dropout, training)  # [B, H, T_q, Dv]
        return ops.reshape(self.output_proj(merge_heads(context)), (batch, length, self.d_model))

    def attention_weights(self, query, memory=None, bias=None):
        """The softmax weights a full (uncached) `call` applies before dropout, e.g. to plot them.

        Args:
          query: [B, T_q, D].
          memory: [B, T_k, D], or None for self-attention.
          bias: broadcastable to [B, H, T_q, T_k], or None.
        Returns:
          float32 [B, H, T_q, T_k].
        """
        rows, batch, length = positions(query)
        q = split_heads(self.query_proj(rows), self.num_heads, batch, length)  # [B, H, T_q, Dk]
        if memory is not None:
            rows, batch, length = positions(memory)
        keys = split_heads(self.key_proj(rows), self.num_heads, batch, length)  # [B, H, T_k, Dk]
        return attention_weights(q, keys, bias)

    def get_config(self):
        config = super().get_config()
        config.update(num_heads=self.num_heads, key_dim=self.key_dim, value_dim=self.value_dim,
                      d_model=self.d_model, dropout=self.dropout_rate)
        return config
