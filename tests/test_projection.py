"""Dense projections through pre-transposed kernels against numpy and against the Dense layers."""
import keras
import numpy as np
import pytest

from t2t_lite.layers.feed_forward import FeedForward
from t2t_lite.layers.projection import TransposedKernels, project


def _dense(units, activation=None, use_bias=True, input_width=6, seed=0):
    layer = keras.layers.Dense(units, activation=activation, use_bias=use_bias)
    layer.build((None, None, input_width))
    rng = np.random.default_rng(seed)
    layer.kernel.assign(rng.normal(size=layer.kernel.shape).astype(np.float32))
    if use_bias:
        layer.bias.assign(rng.normal(size=layer.bias.shape).astype(np.float32))
    return layer


@pytest.mark.parametrize("activation, use_bias", [(None, True), ("relu", True), (None, False)])
def test_projection_through_the_transposed_kernel_matches_numpy(activation, use_bias):
    dense = _dense(5, activation, use_bias)
    x = np.random.default_rng(1).normal(size=(3, 2, 6)).astype(np.float32)  # [B, T, in]
    expected = x @ dense.kernel.numpy() + (dense.bias.numpy() if use_bias else 0.0)
    if activation == "relu":
        expected = np.maximum(expected, 0.0)
        assert (expected == 0).any() and (expected > 0).any()  # the activation is exercised
    out = project(dense, x, TransposedKernels([dense], "float32"))
    assert out.shape == (3, 2, 5)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_layers_not_covered_and_no_kernels_use_the_dense_layer_itself():
    covered, other = _dense(4, seed=2), _dense(4, seed=3)
    kernels = TransposedKernels([covered], "float32")
    assert covered in kernels and other not in kernels
    x = np.random.default_rng(4).normal(size=(2, 1, 6)).astype(np.float32)
    np.testing.assert_array_equal(project(other, x, kernels).numpy(), other(x).numpy())
    np.testing.assert_array_equal(project(covered, x).numpy(), covered(x).numpy())


def test_kernels_cover_nested_layers_and_follow_later_weight_updates_only_when_remade():
    ffn = FeedForward(d_model=6, d_ff=8)
    ffn.build((None, None, 6))
    x = np.random.default_rng(5).normal(size=(2, 3, 6)).astype(np.float32)
    kernels = TransposedKernels([ffn], "float32")
    np.testing.assert_allclose(ffn(x, kernels=kernels).numpy(), ffn(x).numpy(), rtol=1e-5, atol=1e-6)
    # The copies are snapshots: a decoder makes them once per decoded batch, after any training step.
    ffn.output_proj.kernel.assign(ffn.output_proj.kernel * 2.0)
    assert not np.allclose(ffn(x, kernels=kernels).numpy(), ffn(x).numpy())
    np.testing.assert_allclose(ffn(x, kernels=TransposedKernels([ffn], "float32")).numpy(), ffn(x).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_copies_are_cast_to_the_compute_dtype():
    dense = _dense(5)
    x = np.random.default_rng(6).normal(size=(2, 6)).astype("bfloat16")
    out = project(dense, x, TransposedKernels([dense], "bfloat16"))
    assert out.dtype == "bfloat16"
    expected = x.astype(np.float32) @ dense.kernel.numpy() + dense.bias.numpy()
    np.testing.assert_allclose(out.numpy().astype(np.float32), expected, rtol=0.05, atol=0.1)
