"""Dropout with a dtype-independent mask, against Keras's and against its own rate."""
import keras
import numpy as np
import pytest

from t2t_lite.layers.dropout import Dropout


POLICY = {"float32": "float32", "bfloat16": "mixed_bfloat16"}  # a layer computes in its policy's dtype


def _dropped(layer_class, rate, seed, x, dtype):
    layer = layer_class(rate, seed=seed, dtype=POLICY[dtype])
    out = layer(x, training=True)
    assert keras.backend.standardize_dtype(out.dtype) == dtype
    return keras.ops.convert_to_numpy(keras.ops.cast(out, "float32"))


def test_one_seed_gives_one_mask_in_float32_and_bfloat16():
    x = np.random.default_rng(0).uniform(1.0, 2.0, size=(64, 128)).astype(np.float32)  # no zeros of its own
    float32 = _dropped(Dropout, 0.1, 5, x, "float32")
    bfloat16 = _dropped(Dropout, 0.1, 5, x, "bfloat16")
    np.testing.assert_array_equal(float32 == 0, bfloat16 == 0)
    assert 0 < (float32 == 0).sum() < x.size
    # Keras's own layer draws bfloat16's mask from bfloat16 uniforms: another mask.
    keras_bfloat16 = _dropped(keras.layers.Dropout, 0.1, 5, x, "bfloat16")
    assert ((keras_bfloat16 == 0) != (float32 == 0)).any()


def test_bfloat16_keeps_float32s_mask_and_scales_its_input_once_in_float32():
    # Float32 is Keras's own layer (float32 training unchanged): checked against numpy here.
    x = np.random.default_rng(1).normal(size=(32, 64)).astype(np.float32)
    float32 = _dropped(keras.layers.Dropout, 0.3, 11, x, "float32")
    kept = float32 != 0
    np.testing.assert_allclose(float32[kept], (x / 0.7)[kept], rtol=1e-6)

    def to_bfloat16(values):  # rounded to bfloat16, back in float32
        return keras.ops.convert_to_numpy(keras.ops.cast(keras.ops.cast(values, "bfloat16"), "float32"))

    # The layer gets x in bfloat16 (the policy casts it), scales it in float32 and rounds once.
    expected = np.where(kept, to_bfloat16(to_bfloat16(x) * np.float32(1 / 0.7)), 0.0)
    np.testing.assert_array_equal(_dropped(Dropout, 0.3, 11, x, "bfloat16"), expected)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_kept_values_are_scaled_by_one_over_the_keep_rate_at_the_asked_rate(dtype):
    x = np.full((500, 1000), 1.5, np.float32)
    out = _dropped(Dropout, 0.1, 2, x, dtype)
    kept = out != 0
    assert abs(kept.mean() - 0.9) < 0.0015  # 500,000 draws: 3.5 standard deviations (bfloat16 uniforms keep 0.898)
    scaled = np.float32(1.5) * np.float32(1 / 0.9)  # in float32, then rounded once to the dtype
    np.testing.assert_array_equal(out[kept], keras.ops.convert_to_numpy(keras.ops.cast(keras.ops.cast(scaled, dtype), "float32")))


def test_inference_rate_zero_and_rate_one():
    x = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(Dropout(0.5)(x, training=False)), x)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(Dropout(0.0)(x, training=True)), x)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(Dropout(1.0)(x, training=True)), np.zeros_like(x))
