"""A Transformer's decoding step for a beam search: caches with a slot per beam, weights prepared for the CPU.

The model's incremental decoding: a cache with one row per hypothesis (as
keras-hub's) would have to be reordered by a beam search every step, a copy
of every cache. This step keeps a sentence's K beams together instead and
reorders only a small record of who is where:

- Self-attention caches {"key", "value", "recent_key", "recent_value"}
  [B, H, t0|t1, K, Dk|Dv] hold a sentence's K slots side by side: position j
  of slot k is what the row then in slot k computed at step j (positions
  0..t0-1 settled, t0..t-1 recent). "ancestry" [N, t + 1, K] (N = B*K rows,
  row b*K + k in slot k) is one-hot over the slots: where position j of row
  n's history is. Rows attend to every slot's keys and keep their own
  history's through the one-hot, so a beam search (search_state.SplitState)
  reorders only the ancestry, never the caches (t2t gathers them every step).
- The encoder's keys and values are projected once per sentence and shared
  by its beams, never repeated or reordered.
- Every product runs through a StepKernel (ops/step_matmul.py): the layout
  and op fastest here, made once per batch, the self-attention's query, key
  and value joined into one product.

The step runs the model's own layers otherwise: `Transformer.run_decoder` and
each layer's `through_sublayers` with the sub-layer functions below, which
use the attention's `attend` and `scaled_softmax` and the layers' norms; only
the caches' layout and the products differ from the model's full pass (and
dropout, which a step, only ever decoding, leaves out).
"""
from keras import ops

from t2t_lite.decoding.search_state import Shortlist, SplitState, repeated_rows
from t2t_lite.layers.attention import attend, scaled_softmax
from t2t_lite.ops.kernel_layout import OUT_IN
from t2t_lite.ops.step_matmul import StepKernelMaker, StepMatmulSettings

MEMORY = "memory"  # a step's cache entry for the encoder's keys, values and padding bias
CONTEXTS = "contexts"  # and in it, the decoder features' contexts (Transformer.feature_contexts)
ANCESTRY = "ancestry"  # the per-beam record of which slot holds each position of a beam's history
FEATURE_STATES = "feature_states"  # the decoder features' per-beam states (Transformer.feature_inputs)
COLUMNS = "columns"  # a shortlist's ids [B, C] and their output embeddings [B, C, D], per sentence

# A self-attention cache appends each position to a small recent part and folds that into the settled part
# every SETTLE_EVERY positions. Appending copies the part it grows (TensorFlow has no in-place append): the
# recent part every step, the settled part only at a fold, so a step copies ~t / SETTLE_EVERY +
# SETTLE_EVERY / 2 positions instead of t.
SETTLE_EVERY = 16


class LayerKernels:
    """One decoder layer's products, prepared: the self-attention's joined query/key/value and output, the
    cross-attention's query and output, the feed-forward network's hidden (with its ReLU) and output."""

    def __init__(self, layer, maker: StepKernelMaker):
        own, cross, ffn = layer.self_attention, layer.cross_attention, layer.ffn
        self.query_key_value = maker.dense(own.query_proj, own.key_proj, own.value_proj)
        self.self_output = maker.dense(own.output_proj)
        self.cross_query, self.cross_output = maker.dense(cross.query_proj), maker.dense(cross.output_proj)
        self.hidden, self.output = maker.dense(ffn.hidden), maker.dense(ffn.output_proj)


class CachedStep:
    """One Transformer's decoding step over one batch: its sentences encoded once, its kernels made once.

    Args:
      model: a built Transformer (or a model with its decoder's layers and methods).
      inputs: int32 [B, T_src].
      batch: B.
      beams: K.
      settings: the step's layout and op choices.
      columns: None, or int32 [B, C]: the only ids each sentence's outputs can hold (an output constraint's
        shortlist, decoding/constraints.py). Then a step scores only those (a Shortlist), unless asked for
        the whole vocabulary.
    """

    def __init__(self, model, inputs, batch, beams, settings: StepMatmulSettings, columns=None):
        self.model, self.beams = model, beams
        memory, memory_bias = model.encode(inputs, training=False)  # [B, T_src, D], [B, 1, 1, T_src]
        # The ancestry follows the beams; the caches, and the memory with them (so that a search can drop
        # finished sentences), stay one row per sentence.
        caches = {MEMORY: {"kv": model.memory_cache(memory), "bias": memory_bias,
                           CONTEXTS: model.feature_contexts(inputs, memory)}}
        per_beam = {ANCESTRY: ops.zeros((batch * beams, 0, beams), memory.dtype),  # [N, 0, K]
                    FEATURE_STATES: model.initial_feature_states(batch * beams)}
        for i, layer in enumerate(model.decoder_layers):
            attention = layer.self_attention
            empty_keys, empty_values = (ops.zeros((batch, attention.num_heads, 0, beams, depth), memory.dtype)
                                        for depth in (attention.key_dim, attention.value_dim))
            caches[f"layer_{i}"] = {"key": empty_keys, "value": empty_values, "recent_key": empty_keys,
                                    "recent_value": empty_values}
        if columns is not None:  # the output embeddings of each sentence's shortlist, gathered once
            embeddings = ops.cast(model.target_embedding.embeddings, memory.dtype)  # [V, D]
            caches[COLUMNS] = {"ids": columns, "embeddings": ops.take(embeddings, columns, axis=0)}  # [B, C(, D)]
        self.initial_state = SplitState(per_beam=per_beam, per_sentence=caches)
        self.layer_kernels, self.logits_kernel = step_kernels(model, memory.dtype, settings)[1:]

    def __call__(self, ids, step, state: SplitState, whole_vocabulary=None):
        """ids [N, 1] -> (float32 logits [N, V], the state grown by one position).

        With columns, a Shortlist of float32 logits [N, C] for them instead, unless whole_vocabulary (a bool
        scalar) holds: then one of every id, logits [N, V].

        state: SplitState(per_beam={ANCESTRY: [N, t, K], FEATURE_STATES: each decoder feature's state},
          per_sentence={"layer_i": caches, MEMORY: ..., COLUMNS: ...}).
        """
        cache, memory = state.per_sentence, state.per_sentence[MEMORY]
        per_beam = {ANCESTRY: _grown_ancestry(state.per_beam[ANCESTRY])}  # [N, t+1, K]
        added, per_beam[FEATURE_STATES] = self.model.feature_inputs(memory[CONTEXTS], ids,
                                                                    state.per_beam[FEATURE_STATES])
        ancestry, grown = per_beam[ANCESTRY], {MEMORY: memory}

        def run_layer(i, layer, x):
            name, kernels = f"layer_{i}", self.layer_kernels[i]

            def self_attend(h):  # h [N, 1, D]
                qkv = kernels.query_key_value(ops.reshape(h, (-1, h.shape[-1])))  # [N, H*(2 Dk + Dv)]
                context, grown[name] = slot_attention(layer.self_attention, qkv, cache[name], ancestry)
                return kernels.self_output(context)  # [N, 1, D]

            def cross_attend(h):  # h [N, 1, D]
                q = kernels.cross_query(ops.reshape(h, (-1, h.shape[-1])))  # [N, H*Dk]
                context = shared_attention(layer.cross_attention, q, memory["kv"][name], memory["bias"])
                return kernels.cross_output(context)  # [N, 1, D]

            return layer.through_sublayers(x, [self_attend, cross_attend, lambda h: kernels.output(kernels.hidden(h))],
                                           training=False)

        states = self.model.run_decoder(ids, run_layer, position=step, added=added, training=False)  # [N, 1, D]
        grown_state = SplitState(per_beam, grown)
        if COLUMNS not in cache:
            return ops.cast(self.logits_kernel(states), "float32")[:, 0], grown_state
        grown[COLUMNS] = columns = cache[COLUMNS]
        rows = ops.shape(states)[0]

        def every_id():
            logits = ops.cast(self.logits_kernel(states), "float32")[:, 0]  # [N, V]
            return logits, ops.broadcast_to(ops.arange(ops.shape(logits)[1], dtype="int32")[None, :],
                                            ops.shape(logits))

        def shortlisted():  # each sentence's K rows against its C columns' embeddings: [B, K, C]
            by_sentence = ops.reshape(states, (-1, self.beams, states.shape[-1]))  # [B, K, D]
            logits = ops.matmul(by_sentence, ops.transpose(columns["embeddings"], (0, 2, 1)))  # [B, K, C]
            return (ops.reshape(ops.cast(logits, "float32"), (rows, -1)),
                    repeated_rows(columns["ids"], self.beams))  # [N, C]

        return Shortlist(*ops.cond(whole_vocabulary, every_id, shortlisted)), grown_state


def step_kernels(model, dtype, settings: StepMatmulSettings) -> tuple[StepKernelMaker, list, object]:
    """Every product a step runs, prepared: (the maker, whose `layout` and `ops` say how they multiply, each
    decoder layer's LayerKernels, the logits' kernel [V, D]: x E^T)."""
    # Every product in one layout, chosen at the output projection, the step's largest.
    maker = StepKernelMaker(dtype, settings.resolved_layout(model.d_model, model.vocab_size, dtype), settings)
    layer_kernels = [LayerKernels(layer, maker) for layer in model.decoder_layers]
    return maker, layer_kernels, maker.weight(model.target_embedding.embeddings, stored_as=OUT_IN)


def _grown_ancestry(ancestry):
    """ancestry [N, t, K] with this step's position appended: each row's own slot (row n is in slot n % K)."""
    beams = ancestry.shape[-1]  # K, static
    own_slot = ops.one_hot(ops.arange(ops.shape(ancestry)[0]) % beams, beams, dtype=ancestry.dtype)  # [N, K]
    return ops.concatenate([ancestry, own_slot[:, None, :]], axis=1)  # [N, t+1, K]


def slot_attention(attention, qkv, cache, ancestry):
    """One position's self-attention over a sentence's beam slots (the module doc).

    Laid out so that a step transposes only what it must (the new query, key and value into a sentence's
    slots, and the context back): the logits come out [B, H, K_q, t+1], the ancestry's own layout, so neither
    it nor they are transposed.

    Args:
      attention: the layer's MultiHeadAttention (its sizes).
      qkv: [N, H*(2 Dk + Dv)], the position's query, key and value (N = B*K).
      cache: {"key", "value"} [B, H, t0, K, Dk|Dv] (settled), {"recent_key", "recent_value"} [B, H, t1, K, Dk|Dv]
        (recent, t0 + t1 = t).
      ancestry: [N, t + 1, K], this position included.
    Returns:
      (context [N, 1, H*Dv], the caches with this position appended to the recent part).
    """
    beams, heads, key_dim, value_dim = ancestry.shape[-1], attention.num_heads, attention.key_dim, attention.value_dim
    rows, length = ops.shape(ancestry)[0], ops.shape(ancestry)[1]
    sentences = rows // beams

    def by_sentence(x, depth):  # [N, H*d] -> [B, H, K, d]
        return ops.transpose(ops.reshape(x, (sentences, beams, heads, depth)), (0, 2, 1, 3))

    def flat(x):  # [B, H, t, K, d] -> [B, H, t*K, d], position-major
        return ops.reshape(x, (sentences, heads, -1, x.shape[-1]))

    if key_dim == value_dim:  # one transpose for the three
        qkv = ops.reshape(qkv, (sentences, beams, 3, heads, key_dim))
        q, key, value = ops.unstack(ops.transpose(qkv, (2, 0, 3, 1, 4)))  # each [B, H, K, d]
    else:
        parts = ops.split(qkv, [heads * key_dim, 2 * heads * key_dim], axis=-1)
        q, key, value = (by_sentence(part, depth) for part, depth in zip(parts, (key_dim, key_dim, value_dim)))
    settled_keys, settled_values = cache["key"], cache["value"]
    recent_keys = ops.concatenate([cache["recent_key"], key[:, :, None]], axis=2)  # [B, H, t1+1, K, Dk]
    recent_values = ops.concatenate([cache["recent_value"], value[:, :, None]], axis=2)
    # Each of a sentence's K rows against every slot's keys: [B, H, K_q, (t+1)*K], one read of them.
    every = ops.concatenate([ops.einsum("bhqd,bhkd->bhqk", q, flat(settled_keys)),
                             ops.einsum("bhqd,bhkd->bhqk", q, flat(recent_keys))], axis=3)
    every = ops.reshape(every, (sentences, heads, beams, length, beams))  # [B, H, K_q, t+1, K]
    # Each row keeps the logits of its own history's slots: [B, H, K_q, t+1].
    own = ops.reshape(ops.cast(ancestry, every.dtype), (sentences, 1, beams, length, beams))  # [B, 1, K_q, t+1, K]
    weights = ops.cast(scaled_softmax(ops.sum(every * own, axis=4), key_dim), settled_values.dtype)  # [B, H, K_q, t+1]
    # The weights on the row's own slots (zero on the others), against every slot's values.
    slotted = weights[..., None] * ops.cast(own, weights.dtype)  # [B, H, K_q, t+1, K]
    settled = ops.shape(settled_keys)[2]
    context = (ops.matmul(ops.reshape(slotted[:, :, :, :settled], (sentences, heads, beams, -1)),
                          flat(settled_values))
               + ops.matmul(ops.reshape(slotted[:, :, :, settled:], (sentences, heads, beams, -1)),
                            flat(recent_values)))  # [B, H, K_q, Dv]
    context = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (rows, 1, heads * value_dim))  # [N, 1, H*Dv]
    return context, _settle({"key": settled_keys, "value": settled_values,
                             "recent_key": recent_keys, "recent_value": recent_values})


def _settle(cache):
    """The cache with its recent part folded into the settled part once it holds SETTLE_EVERY positions."""
    def fold():
        return {"key": ops.concatenate([cache["key"], cache["recent_key"]], axis=2),
                "value": ops.concatenate([cache["value"], cache["recent_value"]], axis=2),
                "recent_key": cache["recent_key"][:, :, :0], "recent_value": cache["recent_value"][:, :, :0]}

    return ops.cond(ops.shape(cache["recent_key"])[2] >= SETTLE_EVERY, fold, lambda: dict(cache))


def shared_attention(attention, q, kv, bias):
    """Encoder-decoder attention of N = B*R rows, R per sentence, against one copy of each sentence's keys.

    The R rows' queries become R query positions of their sentence: one batched product per sentence.

    Args:
      attention: the layer's MultiHeadAttention (its sizes).
      q: [N, H*Dk], the rows' projected queries.
      kv: {"key", "value"} [B, H, T_src, Dk|Dv] (MultiHeadAttention.memory_cache).
      bias: [B, 1, 1, T_src].
    Returns:
      context [N, 1, H*Dv].
    """
    rows, sentences, heads = ops.shape(q)[0], ops.shape(kv["key"])[0], attention.num_heads
    per_sentence = rows // sentences
    q = ops.reshape(q, (sentences, per_sentence, heads, attention.key_dim))
    q = ops.transpose(q, (0, 2, 1, 3))  # [B, H, R, Dk]
    context = attend(q, kv["key"], kv["value"], bias)  # [B, H, R, Dv]
    return ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (rows, 1, heads * attention.value_dim))  # [N, 1, H*Dv]
