"""Multi-head scaled dot-product attention (paper 3.2) with an optional key/value cache."""
import keras
from keras import ops

from t2t_lite.layers.dropout import Dropout
from t2t_lite.ops.step_matmul import Dense

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


# A decoding cache appends each position to a small recent part and folds that into
# the settled part every SETTLE_EVERY positions. Appending copies the part it grows
# (TensorFlow has no in-place append): the recent part every step, the settled part
# only at a fold, so a step copies ~t / SETTLE_EVERY + SETTLE_EVERY / 2 positions instead of t.
SETTLE_EVERY = 16


def _settle(cache):
    """The cache with its recent part folded into the settled part once it holds SETTLE_EVERY positions."""
    def fold():
        return {"key": ops.concatenate([cache["key"], cache["recent_key"]], axis=2),
                "value": ops.concatenate([cache["value"], cache["recent_value"]], axis=2),
                "recent_key": cache["recent_key"][:, :, :0], "recent_value": cache["recent_value"][:, :, :0]}

    return ops.cond(ops.shape(cache["recent_key"])[2] >= SETTLE_EVERY, fold, lambda: dict(cache))


@keras.saving.register_keras_serializable(package="t2t_lite")
class MultiHeadAttention(keras.layers.Layer):
    """softmax(Q K^T / sqrt(Dk) + bias) V over H heads, then W^O.

    One implementation serves training and incremental decoding:
      - memory None, cache None: self-attention over `query`.
      - memory a tensor: attention from `query` to `memory` (encoder-decoder).
      - memory a dict from `memory_cache`: the same with the memory's keys and
        values projected once. Its rows may be fewer than the query's: query
        rows n*R .. n*R + R - 1 all attend to memory row n, so the K beams of a
        sentence share one copy of its encoder keys/values instead of K.
      - cache {"key", "value", "recent_key", "recent_value"} [B, H, t0|t1, K,
        Dk|Dv] and "ancestry" [N, t + 1, K]: incremental self-attention of
        one position (T_q = 1) for N = B*K rows, K beams per sentence, row
        b*K + k in beam slot k of sentence b. The caches hold a sentence's K
        slots side by side: position j of slot k is what the row then in
        slot k computed at step j (positions 0..t0-1 settled, t0..t-1 recent).
        ancestry[n, j] is one-hot over the slots: where position j of row
        n's history is (the last position, this one, is the row's own slot,
        where its new key and value are appended). The rows attend to every
        slot's keys and keep their own history's through the one-hot, so a
        beam search reorders only the small ancestry, never the caches (t2t
        gathers them every step, a copy of all of them). The grown caches are
        returned. No mask is needed: they hold only decoded positions.

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
        self.query_proj = Dense(num_heads * key_dim, name="query", dtype=policy)
        self.key_proj = Dense(num_heads * key_dim, name="key", dtype=policy)
        self.value_proj = Dense(num_heads * value_dim, name="value", dtype=policy)
        self.output_proj = Dense(d_model, name="output", dtype=policy)
        self.weights_dropout = Dropout(dropout, dtype=policy)

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
            "key": self._split_heads(self.key_proj(memory, kernels=kernels), self.key_dim),
            "value": self._split_heads(self.value_proj(memory, kernels=kernels), self.value_dim),
        }

    def call(self, query, memory=None, bias=None, cache=None, training=None, kernels=None):
        """Attends from `query` [N, T_q, D]; returns (output [N, T_q, D], grown cache or None).

        kernels: a decoder's prepared step kernels (ops.StepKernels) for the projections, or None.
        """
        if cache is not None:  # one position of self-attention
            context, cache = self._attend_cached(query, cache, training, kernels)  # [N, 1, H*Dv]
            return self.output_proj(context, kernels=kernels), cache
        q = self._split_heads(self.query_proj(query, kernels=kernels), self.key_dim)  # [N, H, T_q, Dk]
        if isinstance(memory, dict):
            context = self._attend_shared(q, memory["key"], memory["value"], bias, training)
        else:
            kv = self.memory_cache(query if memory is None else memory, kernels)
            context = self._attend(q, kv["key"], kv["value"], bias, training)  # [N, H, T_q, Dv]
        context = ops.transpose(context, (0, 2, 1, 3))  # [N, T_q, H, Dv]
        rows, length = ops.shape(context)[0], ops.shape(context)[1]
        context = ops.reshape(context, (rows, length, self.num_heads * self.value_dim))
        return self.output_proj(context, kernels=kernels), cache

    def attention_weights(self, query, memory=None, bias=None):
        """The softmax weights a full (uncached) `call` applies before dropout, e.g. to plot them.

        Args:
          query: [B, T_q, D].
          memory: [B, T_k, D], or None for self-attention.
          bias: broadcastable to [B, H, T_q, T_k], or None.
        Returns:
          float32 [B, H, T_q, T_k].
        """
        q = self._split_heads(self.query_proj(query), self.key_dim)  # [B, H, T_q, Dk]
        keys = self._split_heads(self.key_proj(query if memory is None else memory), self.key_dim)  # [B, H, T_k, Dk]
        return self._weights(q, keys, bias)

    def _weights(self, q, keys, bias):
        """softmax(q keys^T / sqrt(Dk) + bias) in float32: [B, H, T_q, T_k]."""
        logits = ops.einsum("bhqd,bhkd->bhqk", q, keys)  # [B, H, T_q, T_k]
        logits = ops.cast(logits, "float32") * (self.key_dim**-0.5)
        if bias is not None:
            logits = logits + ops.cast(bias, "float32")  # Keras casts float inputs to the compute dtype
        return ops.softmax(logits, axis=-1)

    def _attend(self, q, keys, values, bias, training):
        """q [B, H, T_q, Dk], keys/values [B, H, T_k, Dk|Dv], bias to [B, H, T_q, T_k] -> [B, H, T_q, Dv]."""
        weights = ops.cast(self._weights(q, keys, bias), values.dtype)
        weights = self.weights_dropout(weights, training=training)
        return ops.einsum("bhqk,bhkd->bhqd", weights, values)  # [B, H, T_q, Dv]

    def _attend_cached(self, query, cache, training, kernels):
        """One position's self-attention over beam-slotted caches (see the class doc).

        Laid out so that a step transposes only what it must (the new query, key and value into a
        sentence's slots, and the context back): the logits come out [B, H, K_q, t+1], the
        ancestry's own layout, so neither it nor they are transposed.

        Args:
          query: this position's [N, 1, D], N = B*K.
          cache: {"key", "value"} [B, H, t0, K, Dk|Dv] (settled), {"recent_key",
            "recent_value"} [B, H, t1, K, Dk|Dv] (recent, t0 + t1 = t), "ancestry" [N, t + 1, K].
          kernels: the decoder's step kernels, or None. One the decoder joined for this layer itself
            (StepKernels.add_joined of the query, key and value projections) makes them one product.
        Returns:
          (context [N, 1, H*Dv], the caches with this position appended to the recent part).
        """
        ancestry = cache["ancestry"]
        beams = ancestry.shape[-1]  # K, static
        rows, length = ops.shape(ancestry)[0], ops.shape(ancestry)[1]
        sentences, heads = rows // beams, self.num_heads

        def by_sentence(x, depth):  # [N, 1, H*d] -> [B, H, K, d]
            return ops.transpose(ops.reshape(x, (sentences, beams, heads, depth)), (0, 2, 1, 3))

        def flat(x):  # [B, H, t, K, d] -> [B, H, t*K, d], position-major
            return ops.reshape(x, (sentences, heads, -1, x.shape[-1]))

        joined = None if kernels is None else kernels.get(self)  # query, key and value in one product
        if joined is not None:
            qkv = joined(ops.reshape(query, (rows, -1)))  # [N, H*(2 Dk + Dv)]
            if self.key_dim == self.value_dim:  # one transpose for the three
                qkv = ops.reshape(qkv, (sentences, beams, 3, heads, self.key_dim))
                q, key, value = ops.unstack(ops.transpose(qkv, (2, 0, 3, 1, 4)))  # each [B, H, K, d]
            else:
                parts = ops.split(qkv, [heads * self.key_dim, 2 * heads * self.key_dim], axis=-1)
                q, key, value = (by_sentence(part, depth) for part, depth
                                 in zip(parts, (self.key_dim, self.key_dim, self.value_dim)))
        else:
            q = by_sentence(self.query_proj(query, kernels=kernels), self.key_dim)  # [B, H, K_q, Dk]
            key = by_sentence(self.key_proj(query, kernels=kernels), self.key_dim)  # [B, H, K, Dk]
            value = by_sentence(self.value_proj(query, kernels=kernels), self.value_dim)  # [B, H, K, Dv]
        settled_keys, settled_values = cache["key"], cache["value"]
        recent_keys = ops.concatenate([cache["recent_key"], key[:, :, None]], axis=2)  # [B, H, t1+1, K, Dk]
        recent_values = ops.concatenate([cache["recent_value"], value[:, :, None]], axis=2)
        # Each of a sentence's K rows against every slot's keys: [B, H, K_q, (t+1)*K], one read of them.
        every = ops.concatenate([ops.einsum("bhqd,bhkd->bhqk", q, flat(settled_keys)),
                                 ops.einsum("bhqd,bhkd->bhqk", q, flat(recent_keys))], axis=3)
        every = ops.reshape(every, (sentences, heads, beams, length, beams))  # [B, H, K_q, t+1, K]
        # Each row keeps the logits of its own history's slots: [B, H, K_q, t+1].
        own = ops.reshape(ops.cast(ancestry, every.dtype), (sentences, 1, beams, length, beams))  # [B, 1, K_q, t+1, K]
        logits = ops.cast(ops.sum(every * own, axis=4), "float32") * (self.key_dim**-0.5)
        weights = ops.cast(ops.softmax(logits, axis=-1), settled_values.dtype)  # [B, H, K_q, t+1]
        weights = self.weights_dropout(weights, training=training)
        # The weights on the row's own slots (zero on the others), against every slot's values.
        slotted = weights[..., None] * ops.cast(own, weights.dtype)  # [B, H, K_q, t+1, K]
        settled = ops.shape(settled_keys)[2]
        context = (ops.matmul(ops.reshape(slotted[:, :, :, :settled], (sentences, heads, beams, -1)),
                              flat(settled_values))
                   + ops.matmul(ops.reshape(slotted[:, :, :, settled:], (sentences, heads, beams, -1)),
                                flat(recent_values)))  # [B, H, K_q, Dv]
        context = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (rows, 1, heads * self.value_dim))  # [N, 1, H*Dv]
        return context, _settle({"key": settled_keys, "value": settled_values,
                                 "recent_key": recent_keys, "recent_value": recent_values})

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

