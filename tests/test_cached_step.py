"""The decoder's step: beam-slot self-attention, encoder keys shared by a sentence's beams, and a whole model's
steps through prepared kernels, against numpy and the model's own full pass."""
import keras
import numpy as np
import pytest

import t2t_lite.hparams  # noqa: F401
from t2t_lite import config
from t2t_lite.config import DecodeHParams
from t2t_lite.data.ids import EOS_ID
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.decoding.length_penalty import length_penalty
from t2t_lite.decoding import cached_step
from t2t_lite.decoding.cached_step import CachedStep, ancestry_bias
from t2t_lite.layers.attention import MultiHeadAttention, causal_bias, padding_bias
from t2t_lite.models import build_model
from t2t_lite.models.transformer import shift_right
from t2t_lite.ops.kernel_layout import IN_OUT, OUT_IN
from t2t_lite.ops.matmul_threads import BATCH_MATMUL, MATMUL
from t2t_lite.ops.step_matmul import StepMatmulSettings
from t2t_lite.registry import hparams_sets

from parser_features import BOTH, set_tables

HEADS, DK, DV, D = 4, 5, 3, 12


class PositionKeeping(MultiHeadAttention):
    """The bundled attention with attention_context a subclass's, so that its caches keep every key's position
    (the bundled layer's keep none: it has no use for them)."""

    def attention_context(self, *args, **kwargs):
        return super().attention_context(*args, **kwargs)


@pytest.fixture
def layer():
    attention = PositionKeeping(num_heads=HEADS, key_dim=DK, value_dim=DV, d_model=D)
    attention.build((None, None, D))
    return attention


def dense(x, d):
    return x @ d.kernel.numpy() + d.bias.numpy()


def prepared(layer, fixed_memory=False):
    """The layer's products as a decoding step prepares them (float32, Keras's layout, MatMul)."""
    return layer.prepared_products(cached_step.StepKernelMaker("float32", IN_OUT).prepare, fixed_memory)


@pytest.mark.isa
@pytest.mark.parametrize("settle_every", [2, 3, 16])
@pytest.mark.parametrize("with_products", [False, True])
def test_one_position_at_a_time_through_the_cache_equals_the_full_causal_pass(layer, settle_every, with_products):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 7, D)).astype(np.float32)
    full = layer(x, bias=causal_bias(7))
    cache, steps = layer.empty_cache(2, "float32"), []
    products = prepared(layer) if with_products else None
    for i in range(7):
        output, cache = layer(x[:, i:i + 1], bias=np.zeros((2, 1, 1, i + 1), np.float32), cache=cache,
                              products=products)
        if (i + 1) % settle_every == 0:
            cache = layer.settled_cache(cache)
        steps.append(output.numpy()[:, 0])
        # The recent block is folded into the settled one every settle_every positions.
        assert cache["key"].shape[2] == (i + 1) // settle_every * settle_every
    np.testing.assert_allclose(np.stack(steps, 1), full.numpy(), atol=1e-5)
    # Settled then recent, the caches hold every position's keys and values, in order, and the positions.
    for name in ("key", "value"):
        grown = np.concatenate([cache[name], cache[f"recent_{name}"]], axis=2)
        np.testing.assert_allclose(grown, layer.memory_cache(x)[name].numpy(), atol=1e-6)
    np.testing.assert_array_equal(np.concatenate([cache["position"], cache["recent_position"]], axis=2)[:, 0, :, 0],
                                  [list(range(7))] * 2)
    bundled = MultiHeadAttention(num_heads=HEADS, key_dim=DK, value_dim=DV, d_model=D)
    assert set(bundled.empty_cache(2, "float32")) == {"key", "value", "recent_key", "recent_value"}


def test_beams_as_query_positions_attend_to_their_own_history_across_cache_slots(layer):
    # 2 sentences x 3 beams; the caches hold 4 past positions in each beam's slot, and each
    # row's ancestry picks, position by position, the slot its history is in.
    sentences, beams, past = 2, 3, 4
    rng = np.random.default_rng(7)
    cached_keys = rng.normal(size=(sentences, HEADS, past, beams, DK)).astype(np.float32)
    cached_values = rng.normal(size=(sentences, HEADS, past, beams, DV)).astype(np.float32)
    slots = rng.integers(0, beams, size=(sentences * beams, past))
    assert len(set(map(tuple, slots))) == sentences * beams  # rows with different histories
    own = np.arange(sentences * beams) % beams
    ancestry = np.eye(beams, dtype=np.float32)[np.concatenate([slots, own[:, None]], axis=1)]  # [N, 5, K]
    x = rng.normal(size=(sentences * beams, D)).astype(np.float32)
    # Three positions settled, one recent; K slots a position, position-major.
    def flat(x):
        return x.reshape(sentences, HEADS, -1, x.shape[-1])

    cached_positions = np.repeat(np.arange(past, dtype=np.int32), beams)[None, None, :, None].repeat(sentences, 0)
    cache = {"key": flat(cached_keys[:, :, :3]), "value": flat(cached_values[:, :, :3]),
             "position": cached_positions[:, :, :3 * beams], "recent_key": flat(cached_keys[:, :, 3:]),
             "recent_value": flat(cached_values[:, :, 3:]), "recent_position": cached_positions[:, :, 3 * beams:]}
    output, grown = layer(x.reshape(sentences, beams, D), bias=ancestry_bias(ancestry), cache=cache,
                          positions=np.full(beams, past, np.int32))

    q = dense(x, layer.query_proj).reshape(-1, HEADS, DK)  # [N, H, Dk]
    new_k = dense(x, layer.key_proj).reshape(-1, HEADS, DK)
    new_v = dense(x, layer.value_proj).reshape(-1, HEADS, DV)
    expected = np.zeros((sentences * beams, HEADS * DV), np.float32)
    for n in range(sentences * beams):
        b = n // beams
        history = (np.arange(past), slots[n])  # position j from slot slots[n, j]
        k = np.concatenate([cached_keys[b].transpose(1, 2, 0, 3)[history], new_k[n][None]])  # [5, H, Dk]
        v = np.concatenate([cached_values[b].transpose(1, 2, 0, 3)[history], new_v[n][None]])  # [5, H, Dv]
        logits = np.einsum("hd,thd->ht", q[n], k) / np.sqrt(DK)
        weights = np.exp(logits - logits.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        expected[n] = np.einsum("ht,thd->hd", weights, v).reshape(-1)
    np.testing.assert_allclose(output.numpy().reshape(-1, D), dense(expected, layer.output_proj), atol=1e-5)
    # The new position goes into each row's own slot; the past stays where it was.
    np.testing.assert_allclose(grown["recent_key"].numpy()[:, :, -beams:], new_k.reshape(sentences, beams, HEADS, DK)
                               .transpose(0, 2, 1, 3), atol=1e-6)
    np.testing.assert_array_equal(grown["recent_value"].numpy()[:, :, :-beams], flat(cached_values[:, :, 3:]))
    np.testing.assert_array_equal(np.asarray(grown["value"]), flat(cached_values[:, :, :3]))
    np.testing.assert_array_equal(grown["recent_position"][:, 0, :, 0], [[3] * beams + [past] * beams] * sentences)


@pytest.mark.parametrize("with_products", [False, True])
def test_beams_sharing_one_memory_row_equal_attending_to_a_repeated_memory(layer, with_products):
    rng = np.random.default_rng(4)
    beams = 3
    query = rng.normal(size=(2 * beams, D)).astype(np.float32)  # rows b*3 .. b*3+2 belong to sentence b
    memory = rng.normal(size=(2, 4, D)).astype(np.float32)
    bias = np.asarray(padding_bias(np.array([[5, 6, 1, 0], [5, 6, 7, 1]], np.int32)))  # [2, 1, 1, 4]
    repeated = layer(query[:, None], memory=np.repeat(memory, beams, axis=0), bias=np.repeat(bias, beams, axis=0))
    # A sentence's beams as its query positions, against one copy of its memory's keys.
    shared = layer(query.reshape(2, beams, D), memory=layer.memory_cache(memory), bias=bias,
                   products=prepared(layer, fixed_memory=True) if with_products else None)
    np.testing.assert_allclose(shared.numpy().reshape(-1, D), repeated.numpy()[:, 0], atol=1e-5)


def tiny(overrides=""):
    base = "vocab_size=23,num_encoder_layers=2,num_decoder_layers=2,d_model=16,d_ff=32,num_heads=4,dropout=0"
    return config.apply_overrides(hparams_sets.get("transformer_tiny")(), ",".join(filter(None, [base, overrides])))


@pytest.mark.parametrize("overrides", ["norm_position=post", "norm_position=pre", "position_encoding=learned",
                                       "share_embeddings=false,key_dim=3,value_dim=5",
                                       BOTH])
@pytest.mark.isa
def test_a_models_steps_through_every_layout_and_op_equal_its_full_forward_pass(overrides, monkeypatch):
    monkeypatch.setattr(cached_step, "SETTLE_EVERY", 4)  # the caches fold once in the 6 positions
    model = set_tables(build_model(tiny(overrides)))
    rng = np.random.default_rng(0)
    inputs = rng.integers(2, 23, size=(3, 7)).astype(np.int32)
    inputs[0, 4:] = 0
    targets = rng.integers(2, 23, size=(3, 6)).astype(np.int32)
    full = model({"inputs": inputs, "targets": targets}).numpy()  # [B, T_tgt, V]
    decoder_inputs = np.asarray(shift_right(targets))
    for layout in (IN_OUT, OUT_IN):
        for op in (MATMUL, BATCH_MATMUL):
            step = CachedStep(model, inputs, 3, 1, StepMatmulSettings(layout=layout, op=op))
            cache, logits = step.initial_state, []
            for i in range(targets.shape[1]):
                step_logits, cache = step(decoder_inputs[:, i:i + 1], i, cache)
                logits.append(step_logits.numpy())
            np.testing.assert_allclose(np.stack(logits, axis=1), full, atol=1e-5)


SEED = 1  # weights whose search reselects beams and returns 12 hypotheses to check


def test_every_beam_of_a_search_with_word_pointer_and_open_phrases_scores_as_the_full_pass():
    """The features' per-beam state (words begun, open phrases) is carried from step to step and follows its beam
    when the search reselects beams: every beam's score equals its ids' log-probability from the full pass
    (over the length penalty), which computes the features from the whole prefix."""
    keras.utils.set_random_seed(SEED)
    model = set_tables(build_model(tiny(BOTH)))
    rng = np.random.default_rng(1)
    inputs = rng.integers(2, 23, size=(3, 6)).astype(np.int32)
    inputs[:, -1], inputs[0, 3:] = EOS_ID, [EOS_ID, 0, 0]
    hparams = DecodeHParams(beam_size=4, alpha=0.6, extra_length=4)
    ids, scores = (t.numpy() for t in Decoder(model, hparams).decode(inputs))  # [B, K, T], [B, K]
    checked = 0
    for b in range(ids.shape[0]):
        for k in range(ids.shape[1]):
            if not np.isfinite(scores[b, k]):  # an empty slot: fewer finished than the beam holds
                continue
            # Its tokens through its EOS (an untrained model may write PAD, id 0, before it); a sentence none of
            # whose beams finished returns them at its maximum length, and penalises them there.
            ends = np.flatnonzero(ids[b, k] == EOS_ID)
            length = ends[0] + 1 if ends.size else np.count_nonzero(inputs[b]) + hparams.extra_length
            hypothesis = ids[b, k][:length]
            log_probs = log_softmax(model({"inputs": inputs[b:b + 1], "targets": hypothesis[None]}).numpy()[0])
            total = log_probs[np.arange(length), hypothesis].sum()
            np.testing.assert_allclose(scores[b, k], total / length_penalty(length, hparams.alpha),
                                       rtol=1e-4, atol=1e-4)
            checked += 1
    # Reselection happened: some beam's history is not the first beam's, so a state left in place would show.
    assert checked >= 8 and any(not np.array_equal(ids[b, 0, :2], ids[b, k, :2]) for b in range(3) for k in range(4))


def log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def test_a_traced_steps_logits_keep_a_static_vocabulary_width_so_top_k_takes_its_block_path():
    """A dynamic width sends the search's top_k to a whole-row sort, several times slower at V = 32768."""
    import tensorflow as tf

    model = build_model(tiny(""))
    step = CachedStep(model, np.full((2, 5), 3, np.int32), 2, 3, StepMatmulSettings(layout=IN_OUT, op=MATMUL))
    traced = tf.function(lambda ids: step(ids, 0, step.initial_state)[0]).get_concrete_function(
        tf.TensorSpec([None, 1], tf.int32))  # rows unknown, as in the search's loop
    assert traced.structured_outputs.shape[-1] == 23
