"""A Transformer's decoding step for a beam search: the model's own layers, over caches that keep a sentence's
beams together.

The step calls the model's own methods and layers with a cache: `feature_inputs`, `embed_targets`,
`run_decoder` (each DecoderLayer's `call`, and through it each sub-layer's) and `logits`. A model therefore
decodes as it trains, whatever its layers compute. Two things are the step's own:

- A sentence's K beams are K query positions of one row: the decoder runs on [B, K, D]. Each layer's
  self-attention cache holds, per sentence, K slots a position (keys [B, H, t*K, Dk], position-major). The
  "ancestry" [N, t + 1, K] (N = B*K rows, row b*K + k in slot k) is one-hot over the slots: where position j
  of row n's history is. Built from it once a step, the self-attention's bias [B, 1, K, (t+1)*K] lets each
  beam attend to its own history only. So a beam search (search_state.SplitState) reorders the ancestry,
  never the caches (t2t gathers them every step), and a sentence's encoder memory serves its K beams
  unrepeated. Decoder features and embeddings run on the beams' own rows [N, 1], before they join.
- Products through StepKernels (ops/step_matmul.py): the layout and op fastest here, made once per batch and
  handed to the layers' calls (layers/prepared.py), which multiply through them.
"""
from keras import ops

from t2t_lite.decoding.search_state import Shortlist, SplitState, repeated_rows
from t2t_lite.layers.attention import NEG_INF
from t2t_lite.ops.step_matmul import StepKernelMaker, StepMatmulSettings

MEMORY = "memory"  # a step's cache entry for the encoder's keys, values and padding bias
CONTEXTS = "contexts"  # and in it, the decoder features' contexts (Transformer.feature_contexts)
LAYERS = "layers"  # each decoder layer's self-attention cache (Transformer.empty_caches)
ANCESTRY = "ancestry"  # the per-beam record of which slot holds each position of a beam's history
FEATURE_STATES = "feature_states"  # the decoder features' per-beam states (Transformer.feature_inputs)
COLUMNS = "columns"  # a shortlist's ids [B, C] and their output embeddings [B, C, D], per sentence

# A self-attention cache appends each position to a small recent block and the step folds that into the
# settled block every SETTLE_EVERY positions. Appending copies the block it grows (TensorFlow has no in-place
# append): the recent block every step, the settled block only at a fold, so a step copies ~t / SETTLE_EVERY +
# SETTLE_EVERY / 2 positions instead of t.
SETTLE_EVERY = 16


class CachedStep:
    """One Transformer's decoding step over one batch: its sentences encoded once, its kernels made once.

    Args:
      model: a built Transformer (or a model with its methods: docs/extending.md).
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
                           CONTEXTS: model.feature_contexts(inputs, memory)},
                  LAYERS: model.empty_caches(batch, memory.dtype)}
        per_beam = {ANCESTRY: ops.zeros((batch * beams, 0, beams), "float32"),  # [N, 0, K]
                    FEATURE_STATES: model.initial_feature_states(batch * beams)}
        if columns is not None:  # the output embeddings of each sentence's shortlist, gathered once
            caches[COLUMNS] = {"ids": columns, "embeddings": model.column_embeddings(columns)}  # [B, C(, D)]
        self.initial_state = SplitState(per_beam=per_beam, per_sentence=caches)
        self.products = step_products(model, memory.dtype, settings)[1]

    def __call__(self, ids, step, state: SplitState, whole_vocabulary=None):
        """ids [N, 1] -> (float32 logits [N, V], the state grown by one position).

        With columns, a Shortlist of float32 logits [N, C] for them instead, unless whole_vocabulary (a bool
        scalar) holds: then one of every id, logits [N, V].

        state: SplitState(per_beam={ANCESTRY: [N, t, K], FEATURE_STATES: each decoder feature's state},
          per_sentence={LAYERS: caches, MEMORY: ..., COLUMNS: ...}).
        """
        model, cache, memory = self.model, state.per_sentence, state.per_sentence[MEMORY]
        ancestry = _grown_ancestry(state.per_beam[ANCESTRY])  # [N, t+1, K]
        added, feature_states = model.feature_inputs(memory[CONTEXTS], ids, state.per_beam[FEATURE_STATES])
        x = model.embed_targets(ids, position=step, added=added, training=False)  # [N, 1, D]
        x = ops.reshape(x, (-1, self.beams, x.shape[-1]))  # [B, K, D]: a sentence's beams as its positions
        states, layer_caches = model.run_decoder(x, memory["kv"], ancestry_bias(ancestry), memory["bias"],
                                                 caches=cache[LAYERS], products=self.products,
                                                 positions=ops.full((self.beams,), step, dtype="int32"),
                                                 training=False)
        # Every SETTLE_EVERY positions, the recent blocks are folded into the settled ones.
        layer_caches = ops.cond(ops.equal(ops.mod(step + 1, SETTLE_EVERY), 0),
                                lambda: model.settled_caches(layer_caches), lambda: list(layer_caches))
        grown = {**cache, LAYERS: layer_caches}
        grown_state = SplitState({ANCESTRY: ancestry, FEATURE_STATES: feature_states}, grown)
        rows = ops.shape(ids)[0]

        def every_id():  # [N, V]
            return _beam_rows(model.logits(states, products=self.products), rows)

        if COLUMNS not in cache:
            return every_id(), grown_state
        columns = cache[COLUMNS]

        def with_every_id():
            logits = every_id()
            return logits, ops.broadcast_to(ops.arange(ops.shape(logits)[1], dtype="int32")[None, :],
                                            ops.shape(logits))

        def shortlisted():  # each sentence's K rows against its C columns' embeddings: [B, K, C]
            logits = model.logits(states, columns=columns["embeddings"])
            return _beam_rows(logits, rows), repeated_rows(columns["ids"], self.beams)  # [N, C]

        return Shortlist(*ops.cond(whole_vocabulary, with_every_id, shortlisted)), grown_state


def _beam_rows(logits, rows):
    """[B, K, V] -> [N, V], keeping V static: top_k's block-maxima path needs it, and without it
    the search sorts whole rows."""
    return ops.reshape(logits, (rows, logits.shape[-1] if logits.shape[-1] is not None else -1))


def step_products(model, dtype, settings: StepMatmulSettings) -> tuple[StepKernelMaker, dict]:
    """Every product a step runs, prepared: (the maker, whose `layout` and `ops` say how they multiply, the
    model's `prepared_products`)."""
    # Every product in one layout, chosen at the output projection, the step's largest.
    maker = StepKernelMaker(dtype, settings.resolved_layout(model.d_model, model.vocab_size, dtype), settings)
    return maker, model.prepared_products(maker.prepare)


def ancestry_bias(ancestry):
    """The self-attention bias of a step's [B, K, D] queries: float32 [B, 1, K, (t+1)*K], 0 on the cache's
    slots that hold a row's own history (ancestry [N, t+1, K] one-hot), NEG_INF elsewhere."""
    beams = ancestry.shape[-1]  # K, static
    own = ops.reshape(ancestry, (-1, beams, ops.shape(ancestry)[1] * beams))  # [B, K_q, (t+1)*K], position-major
    return ((1.0 - own) * NEG_INF)[:, None]


def _grown_ancestry(ancestry):
    """ancestry [N, t, K] with this step's position appended: each row's own slot (row n is in slot n % K)."""
    beams = ancestry.shape[-1]  # K, static
    own_slot = ops.one_hot(ops.arange(ops.shape(ancestry)[0]) % beams, beams, dtype=ancestry.dtype)  # [N, K]
    return ops.concatenate([ancestry, own_slot[:, None, :]], axis=1)  # [N, t+1, K]
