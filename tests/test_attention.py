"""Multi-head attention against a numpy reference, with masks and with a cache."""
import numpy as np
import pytest

from t2t_lite.layers import attention
from t2t_lite.layers.attention import MultiHeadAttention, causal_bias, padding_bias


def numpy_attention(layer, query, memory, bias):
    """softmax(Q K^T / sqrt(dk) + bias) V, per head, then W^O, from the layer's own weights."""
    def dense(x, d):
        return x @ d.kernel.numpy() + d.bias.numpy()

    h, dk, dv = layer.num_heads, layer.key_dim, layer.value_dim
    q = dense(query, layer.query_proj).reshape(*query.shape[:2], h, dk).transpose(0, 2, 1, 3)
    k = dense(memory, layer.key_proj).reshape(*memory.shape[:2], h, dk).transpose(0, 2, 1, 3)
    v = dense(memory, layer.value_proj).reshape(*memory.shape[:2], h, dv).transpose(0, 2, 1, 3)
    logits = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dk) + bias
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    context = (weights @ v).transpose(0, 2, 1, 3).reshape(query.shape[0], query.shape[1], h * dv)
    return dense(context, layer.output_proj)


@pytest.fixture
def layer():
    return MultiHeadAttention(num_heads=4, key_dim=5, value_dim=3, d_model=12)


def test_self_attention_with_causal_and_padding_masks_matches_numpy(layer):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 6, 12)).astype(np.float32)
    ids = np.array([[3, 4, 5, 6, 1, 0], [3, 4, 1, 0, 0, 0]], np.int32)
    bias = np.asarray(padding_bias(ids)) + np.asarray(causal_bias(6))
    out, cache = layer(x, bias=bias)
    assert cache is None
    np.testing.assert_allclose(out.numpy(), numpy_attention(layer, x, x, bias), atol=1e-5)


def test_masked_keys_have_no_influence(layer):
    rng = np.random.default_rng(1)
    query = rng.normal(size=(1, 3, 12)).astype(np.float32)
    memory = rng.normal(size=(1, 5, 12)).astype(np.float32)
    bias = np.asarray(padding_bias(np.array([[7, 8, 1, 0, 0]], np.int32)))
    changed = memory.copy()
    changed[:, 3:] = 100.0  # garbage under the PAD positions
    out, _ = layer(query, memory=memory, bias=bias)
    out_changed, _ = layer(query, memory=changed, bias=bias)
    np.testing.assert_allclose(out.numpy(), out_changed.numpy(), atol=1e-6)
    np.testing.assert_allclose(out.numpy(), numpy_attention(layer, query, memory, bias), atol=1e-5)


def empty_cache(sentences, beams, heads=4, dk=5, dv=3):
    keys = np.zeros((sentences, heads, 0, beams, dk), np.float32)
    values = np.zeros((sentences, heads, 0, beams, dv), np.float32)
    return {"key": keys, "value": values, "recent_key": keys, "recent_value": values}


@pytest.mark.parametrize("settle_every", [2, 3, 16])
def test_incremental_self_attention_with_cache_equals_full_pass(layer, settle_every, monkeypatch):
    monkeypatch.setattr(attention, "SETTLE_EVERY", settle_every)
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 7, 12)).astype(np.float32)
    full, _ = layer(x, bias=causal_bias(7))
    # Two sentences of one beam each: every position of a row's history is in slot 0.
    cache, steps = empty_cache(2, 1), []
    for i in range(7):
        ancestry = np.ones((2, i + 1, 1), np.float32)
        out, cache = layer(x[:, i:i + 1], cache={**cache, "ancestry": ancestry})  # positions < i: no mask needed
        steps.append(out.numpy()[:, 0])
        # The recent part is folded into the settled part every settle_every positions.
        assert cache["key"].shape[2] == (i + 1) // settle_every * settle_every
    np.testing.assert_allclose(np.stack(steps, 1), full.numpy(), atol=1e-5)
    # Settled then recent, the caches hold every position's keys and values, in order.
    for name in ("key", "value"):
        grown = np.concatenate([cache[name], cache[f"recent_{name}"]], axis=2)[:, :, :, 0]
        np.testing.assert_allclose(grown, layer.memory_cache(x)[name].numpy(), atol=1e-6)


def test_beam_rows_attend_to_their_own_history_across_cache_slots(layer):
    # 2 sentences x 3 beams; the caches hold 4 past positions in each beam's slot, and each
    # row's ancestry picks, position by position, the slot its history is in.
    sentences, beams, past, heads, dk, dv = 2, 3, 4, 4, 5, 3
    rng = np.random.default_rng(7)
    cached_keys = rng.normal(size=(sentences, heads, past, beams, dk)).astype(np.float32)
    cached_values = rng.normal(size=(sentences, heads, past, beams, dv)).astype(np.float32)
    slots = rng.integers(0, beams, size=(sentences * beams, past))
    assert len(set(map(tuple, slots))) == sentences * beams  # rows with different histories
    own = np.arange(sentences * beams) % beams
    ancestry = np.eye(beams, dtype=np.float32)[np.concatenate([slots, own[:, None]], axis=1)]  # [N, 5, K]
    x = rng.normal(size=(sentences * beams, 1, 12)).astype(np.float32)
    # Three positions settled, one recent.
    cache = {"key": cached_keys[:, :, :3], "value": cached_values[:, :, :3], "recent_key": cached_keys[:, :, 3:],
             "recent_value": cached_values[:, :, 3:], "ancestry": ancestry}
    out, grown = layer(x, cache=cache)

    def dense(v, d):
        return v @ d.kernel.numpy() + d.bias.numpy()

    q = dense(x[:, 0], layer.query_proj).reshape(-1, heads, dk)  # [N, H, Dk]
    new_k = dense(x[:, 0], layer.key_proj).reshape(-1, heads, dk)
    new_v = dense(x[:, 0], layer.value_proj).reshape(-1, heads, dv)
    expected = np.zeros((sentences * beams, heads * dv), np.float32)
    for n in range(sentences * beams):
        b = n // beams
        history = (np.arange(past), slots[n])  # position j from slot slots[n, j]
        k = np.concatenate([cached_keys[b].transpose(1, 2, 0, 3)[history], new_k[n][None]])  # [5, H, Dk]
        v = np.concatenate([cached_values[b].transpose(1, 2, 0, 3)[history], new_v[n][None]])  # [5, H, Dv]
        logits = np.einsum("hd,thd->ht", q[n], k) / np.sqrt(dk)
        weights = np.exp(logits - logits.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        expected[n] = np.einsum("ht,thd->hd", weights, v).reshape(-1)
    np.testing.assert_allclose(out.numpy()[:, 0], dense(expected, layer.output_proj), atol=1e-5)
    # The new position goes into each row's own slot; the past stays where it was.
    np.testing.assert_allclose(grown["recent_key"].numpy()[:, :, -1], new_k.reshape(sentences, beams, heads, dk)
                               .transpose(0, 2, 1, 3), atol=1e-6)
    np.testing.assert_array_equal(grown["recent_value"].numpy()[:, :, :-1], cached_values[:, :, 3:])
    np.testing.assert_array_equal(grown["value"].numpy(), cached_values[:, :, :3])


def test_precomputed_memory_cache_equals_projecting_memory(layer):
    rng = np.random.default_rng(3)
    query = rng.normal(size=(2, 1, 12)).astype(np.float32)
    memory = rng.normal(size=(2, 4, 12)).astype(np.float32)
    direct, _ = layer(query, memory=memory)
    cached, _ = layer(query, memory=layer.memory_cache(memory))
    np.testing.assert_allclose(cached.numpy(), direct.numpy(), atol=1e-6)


def test_beams_sharing_one_memory_row_equal_attending_to_a_repeated_memory(layer):
    rng = np.random.default_rng(4)
    beams = 3
    query = rng.normal(size=(2 * beams, 2, 12)).astype(np.float32)  # rows b*3 .. b*3+2 belong to sentence b
    memory = rng.normal(size=(2, 4, 12)).astype(np.float32)
    bias = np.asarray(padding_bias(np.array([[5, 6, 1, 0], [5, 6, 7, 1]], np.int32)))  # [2, 1, 1, 4]
    repeated, _ = layer(query, memory=np.repeat(memory, beams, axis=0), bias=np.repeat(bias, beams, axis=0))
    shared, _ = layer(query, memory=layer.memory_cache(memory), bias=bias)
    np.testing.assert_allclose(shared.numpy(), repeated.numpy(), atol=1e-5)
    np.testing.assert_allclose(shared.numpy(), numpy_attention(layer, query, np.repeat(memory, beams, axis=0),
                                                               np.repeat(bias, beams, axis=0)), atol=1e-5)
