"""Multi-head scaled dot-product attention (paper 3.2)."""
import keras
from keras import ops

from t2t_lite.layers.dropout import Dropout
from t2t_lite.layers.prepared import dense_product, plain_denses

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


def to_rows(x):
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
      keys: [B, H, T_k, Dk], or a list of blocks [B, H, T_i, Dk] that together are the T_k keys, in order.
      bias: broadcastable to [B, H, T_q, T_k], or None.
    Returns:
      float32 [B, H, T_q, T_k].
    """
    logits = [ops.einsum("bhqd,bhkd->bhqk", q, block) for block in _blocks(keys)]  # each [B, H, T_q, T_i]
    return scaled_softmax(logits[0] if len(logits) == 1 else ops.concatenate(logits, axis=-1), q.shape[-1], bias)


def _blocks(x) -> list:
    """keys or values given whole or as a list of blocks along the positions, as a list."""
    return list(x) if isinstance(x, (list, tuple)) else [x]


def scaled_softmax(logits, key_dim, bias=None):
    """softmax(logits / sqrt(key_dim) + bias) over the last axis, in float32: eq. 1's weights from q k^T."""
    logits = ops.cast(logits, "float32") * (key_dim**-0.5)
    if bias is not None:
        logits = logits + ops.cast(bias, "float32")  # Keras casts float inputs to the compute dtype
    return ops.softmax(logits, axis=-1)


def attend(q, keys, values, bias, weights_dropout=None, training=None):
    """Scaled dot-product attention (paper eq. 1) per head: [B, H, T_q, Dk] x [B, H, T_k, Dk|Dv] -> [B, H, T_q, Dv].

    keys and values may each be a list of blocks [B, H, T_i, Dk|Dv] that together are the T_k keys, in order
    (a cache's settled and recent positions): the blocks are never joined, each is read once.

    weights_dropout: a dropout layer applied to the weights, or None.
    """
    values = _blocks(values)
    weights = ops.cast(attention_weights(q, keys, bias), values[0].dtype)  # [B, H, T_q, T_k]
    if weights_dropout is not None:
        weights = weights_dropout(weights, training=training)
    if len(values) == 1:
        return ops.einsum("bhqk,bhkd->bhqd", weights, values[0])  # [B, H, T_q, Dv]
    context, start = 0, 0
    for block in values:  # each block's weights against its values
        end = start + ops.shape(block)[2]
        context = context + ops.einsum("bhqk,bhkd->bhqd", weights[..., start:end], block)
        start = end
    return context  # [B, H, T_q, Dv]


@keras.saving.register_keras_serializable(package="t2t_lite")
class MultiHeadAttention(keras.layers.Layer):
    """softmax(Q K^T / sqrt(Dk) + bias) V over H heads, then W^O.

      - memory None: self-attention over `query`.
      - memory a tensor: attention from `query` to `memory` (encoder-decoder).
      - memory a dict from `memory_cache`: the same with the memory's keys and
        values projected once.
      - cache a dict from `empty_cache` (self-attention, a few positions at a
        time: incremental decoding): the earlier positions' keys and values,
        which this call's positions join.

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
        return self._keys_and_values(*to_rows(memory))

    def empty_cache(self, batch, dtype):
        """A self-attention cache holding no positions yet, for `call`'s `cache`.

        The keys and values [B, H, T, Dk|Dv] of the positions so far and, for a subclass's attention_context,
        their positions int32 [B, 1, T, 1] (shaped as the keys, so that every entry grows along axis 2), in two
        blocks: "key"/"value"/"position" (settled) and "recent_key"/"recent_value"/"recent_position". A call's
        positions join the recent block; whoever holds the cache may fold the recent block into the settled
        one when it likes (`settled_cache`: an append copies the block it grows, so a small recent block keeps
        each step's copy small). The call reads both blocks and never joins them.
        """
        keys, values = (ops.zeros((batch, self.num_heads, 0, depth), dtype) for depth in (self.key_dim, self.value_dim))
        cache = {"key": keys, "value": values, "recent_key": keys, "recent_value": values}
        if self._reads_positions():
            positions = ops.zeros((batch, 1, 0, 1), "int32")
            cache.update(position=positions, recent_position=positions)
        return cache

    def settled_cache(self, cache):
        """The cache with its recent block folded into the settled one."""
        settled = {name: ops.concatenate([cache[name], cache[f"recent_{name}"]], axis=2)
                   for name in ("key", "value", "position") if name in cache}
        return {**settled, **{f"recent_{name}": cache[f"recent_{name}"][:, :, :0] for name in settled}}

    def _reads_positions(self) -> bool:
        """Whether attention_context is a subclass's, which may read positions: the bundled one has no use for
        them, and a decoding step would pay for keeping them."""
        return type(self).attention_context is not MultiHeadAttention.attention_context

    def prepared_products(self, prepare, fixed_memory=False) -> dict:
        """The projections a cached `call` multiplies through, each made once by `prepare` (layers/prepared.py):
        the query, key and value joined into one product (self-attention) or the query alone (against a
        `memory_cache`), and the output. {} where a projection is not a plain Dense, or where a subclass
        overrides `call` (then its own arithmetic runs, through the layers)."""
        if (type(self).call is not MultiHeadAttention.call
                or not plain_denses(self.query_proj, self.key_proj, self.value_proj, self.output_proj)):
            return {}
        if fixed_memory:
            return {"query": dense_product(prepare, self.query_proj), "output": dense_product(prepare, self.output_proj)}
        return {"query_key_value": dense_product(prepare, self.query_proj, self.key_proj, self.value_proj),
                "output": dense_product(prepare, self.output_proj)}

    def _keys_and_values(self, rows, batch, length):
        """The keys and values [B, H, T, Dk|Dv] of positions given as rows [B*T, D]."""
        return {"key": split_heads(self.key_proj(rows), self.num_heads, batch, length),
                "value": split_heads(self.value_proj(rows), self.num_heads, batch, length)}

    def call(self, query, memory=None, bias=None, cache=None, products=None, positions=None, training=None):
        """Attends from `query` [B, T_q, D]; returns the output [B, T_q, D].

        Args:
          memory: None (self-attention), the memory [B, T_k, D], or its `memory_cache`.
          bias: broadcastable to [B, H, T_q, T_k], or None; with a cache, T_k counts the cached positions
            first, then the query's own.
          cache: None, or (self-attention) the positions before the query's (`empty_cache`); the call then
            returns (output, the cache with the query's positions appended to its recent block).
          products: None, or `prepared_products`' (a decoding step's kernels for this layer's projections).
          positions: None, or int32 [T_q]: the query's positions in its sequence (a decoding step's K beams are
            K queries at one position); None numbers them on from the cached ones, or from 0.
        """
        products = products or {}
        rows, batch, length = to_rows(query)  # [B*T_q, D]
        if cache is not None or memory is None:  # self-attention: the query's own rows
            if "query_key_value" in products:
                query_key_value = products["query_key_value"](rows)  # [B*T_q, H*(2 Dk + Dv)]
                sizes = (self.num_heads * self.key_dim, 2 * self.num_heads * self.key_dim)
                q, key, value = (split_heads(part, self.num_heads, batch, length)
                                 for part in ops.split(query_key_value, sizes, axis=-1))
                kv = {"key": key, "value": value}
            else:
                q = split_heads(self.query_proj(rows), self.num_heads, batch, length)  # [B, H, T_q, Dk]
                kv = self._keys_and_values(rows, batch, length)
        else:
            q = split_heads(products.get("query", self.query_proj)(rows), self.num_heads, batch, length)
            kv = memory if isinstance(memory, dict) else self.memory_cache(memory)
        query_positions = key_positions = None
        if self._reads_positions():
            if positions is None:  # numbered on from the cached ones
                cached = 0 if cache is None else (ops.shape(cache["position"])[2]
                                                  + ops.shape(cache["recent_position"])[2])
                positions = cached + ops.arange(length, dtype="int32")
            query_positions = ops.broadcast_to(ops.cast(positions, "int32")[None], (batch, length))  # [B, T_q]
            key_positions = query_positions if cache is None and memory is None else ops.broadcast_to(
                ops.arange(ops.shape(kv["key"])[2], dtype="int32")[None], (batch, ops.shape(kv["key"])[2]))
        if cache is not None:
            grown = {**cache, "recent_key": ops.concatenate([cache["recent_key"], kv["key"]], axis=2),
                     "recent_value": ops.concatenate([cache["recent_value"], kv["value"]], axis=2)}
            kv = {"key": [grown["key"], grown["recent_key"]], "value": [grown["value"], grown["recent_value"]]}
            if query_positions is not None:
                grown["recent_position"] = ops.concatenate([cache["recent_position"],
                                                            query_positions[:, None, :, None]], axis=2)
                key_positions = ops.concatenate([grown["position"], grown["recent_position"]], axis=2)[:, 0, :, 0]
        context = self.attention_context(q, kv["key"], kv["value"], bias, query_positions, key_positions,
                                         training=training)  # [B, H, T_q, Dv]
        output = ops.reshape(products.get("output", self.output_proj)(merge_heads(context)),
                             (batch, length, self.d_model))
        return output if cache is None else (output, grown)

    def attention_context(self, q, keys, values, bias, query_positions, key_positions, training=None):
        """Eq. 1 per head, q [B, H, T_q, Dk] against keys and values [B, H, T_k, Dk|Dv] -> [B, H, T_q, Dv]: the
        part of `call` between the projections, which a variant may replace (docs/extending.md).

        Args:
          keys, values: each a tensor, or a list of blocks along the positions that together are the T_k keys,
            in order (a cache's settled and recent positions).
          bias: broadcastable to [B, H, T_q, T_k], or None.
          query_positions, key_positions: int32 [B, T_q] and [B, T_k], each query's and key's position in its
            sequence; given to a subclass's override only (None to the bundled one, which has no use for them,
            and whose caches then keep none).
        """
        return attend(q, keys, values, bias, self.weights_dropout, training)

    def attention_weights(self, query, memory=None, bias=None):
        """The softmax weights a full (uncached) `call` applies before dropout, e.g. to plot them.

        Args:
          query: [B, T_q, D].
          memory: [B, T_k, D], or None for self-attention.
          bias: broadcastable to [B, H, T_q, T_k], or None.
        Returns:
          float32 [B, H, T_q, T_k].
        """
        rows, batch, length = to_rows(query)
        q = split_heads(self.query_proj(rows), self.num_heads, batch, length)  # [B, H, T_q, Dk]
        keys = self._keys_and_values(*to_rows(query if memory is None else memory))["key"]  # [B, H, T_k, Dk]
        return attention_weights(q, keys, bias)

    def get_config(self):
        config = super().get_config()
        config.update(num_heads=self.num_heads, key_dim=self.key_dim, value_dim=self.value_dim,
                      d_model=self.d_model, dropout=self.dropout_rate)
        return config
