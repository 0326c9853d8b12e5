"""Multi-head attention against a numpy reference, with masks and with a cache and an index."""
import numpy as np
import pytest

from t2t_lite.layers.attention import MultiHeadAttention, causal_bias, padding_bias


def numpy_weights_and_values(layer, query, memory, bias):
    """softmax(Q K^T / sqrt(dk) + bias) [B, H, T_q, T_k] and V [B, H, T_k, dv], from the layer's own weights."""
    def dense(x, d):
        return x @ d.kernel.numpy() + d.bias.numpy()

    h, dk, dv = layer.num_heads, layer.key_dim, layer.value_dim
    q = dense(query, layer.query_proj).reshape(*query.shape[:2], h, dk).transpose(0, 2, 1, 3)
    k = dense(memory, layer.key_proj).reshape(*memory.shape[:2], h, dk).transpose(0, 2, 1, 3)
    v = dense(memory, layer.value_proj).reshape(*memory.shape[:2], h, dv).transpose(0, 2, 1, 3)
    logits = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dk) + bias
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True), v


def numpy_attention(layer, query, memory, bias):
    """softmax(Q K^T / sqrt(dk) + bias) V, per head, then W^O, from the layer's own weights."""
    weights, v = numpy_weights_and_values(layer, query, memory, bias)
    context = (weights @ v).transpose(0, 2, 1, 3).reshape(query.shape[0], query.shape[1], -1)
    return context @ layer.output_proj.kernel.numpy() + layer.output_proj.bias.numpy()


@pytest.fixture
def layer():
    return MultiHeadAttention(num_heads=4, key_dim=5, value_dim=3, d_model=12)


@pytest.mark.isa
def test_self_attention_with_causal_and_padding_masks_matches_numpy(layer):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 6, 12)).astype(np.float32)
    ids = np.array([[3, 4, 5, 6, 1, 0], [3, 4, 1, 0, 0, 0]], np.int32)
    bias = np.asarray(padding_bias(ids)) + np.asarray(causal_bias(6))
    out = layer(x, bias=bias)
    np.testing.assert_allclose(out.numpy(), numpy_attention(layer, x, x, bias), atol=1e-5)


def test_masked_keys_have_no_influence(layer):
    rng = np.random.default_rng(1)
    query = rng.normal(size=(1, 3, 12)).astype(np.float32)
    memory = rng.normal(size=(1, 5, 12)).astype(np.float32)
    bias = np.asarray(padding_bias(np.array([[7, 8, 1, 0, 0]], np.int32)))
    changed = memory.copy()
    changed[:, 3:] = 100.0  # garbage under the PAD positions
    out = layer(query, memory=memory, bias=bias)
    out_changed = layer(query, memory=changed, bias=bias)
    np.testing.assert_allclose(out.numpy(), out_changed.numpy(), atol=1e-6)
    np.testing.assert_allclose(out.numpy(), numpy_attention(layer, query, memory, bias), atol=1e-5)


def test_precomputed_memory_cache_equals_projecting_memory(layer):
    rng = np.random.default_rng(3)
    query = rng.normal(size=(2, 1, 12)).astype(np.float32)
    memory = rng.normal(size=(2, 4, 12)).astype(np.float32)
    direct = layer(query, memory=memory)
    cached = layer(query, memory=layer.memory_cache(memory))
    np.testing.assert_allclose(cached.numpy(), direct.numpy(), atol=1e-6)


def test_attention_weights_are_the_softmax_of_the_query_against_the_memorys_keys(layer):
    rng = np.random.default_rng(4)
    query = rng.normal(size=(2, 3, 12)).astype(np.float32)
    memory = rng.normal(size=(2, 5, 12)).astype(np.float32)
    bias = np.asarray(padding_bias(np.array([[7, 8, 9, 1, 0], [7, 1, 0, 0, 0]], np.int32)))
    layer(query, memory=memory)  # builds it
    np.testing.assert_allclose(layer.attention_weights(query, memory, bias).numpy(),
                               numpy_weights_and_values(layer, query, memory, bias)[0], atol=1e-6)
    np.testing.assert_allclose(layer.attention_weights(query).numpy(),
                               numpy_weights_and_values(layer, query, query, 0.0)[0], atol=1e-6)
