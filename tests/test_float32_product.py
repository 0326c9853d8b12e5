import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.ops.float32_product import float32_product


def narrow_operands(dtype, rows=24, depth=512, columns=300, seed=0):
    """Operands in dtype, with logit-like sums (a few units to a few tens), and their exact float64 values."""
    rng = np.random.default_rng(seed)
    a = tf.cast(rng.normal(0.0, 1.0, (rows, depth)), dtype)
    b = tf.cast(rng.normal(0.0, 0.3, (depth, columns)), dtype)
    return a, b, a.numpy().astype(np.float64), b.numpy().astype(np.float64)


@pytest.mark.isa_bfloat16
@pytest.mark.parametrize("dtype", [tf.bfloat16, tf.float16])
def test_the_product_of_narrow_operands_is_their_exact_product_to_float32_precision(dtype):
    a, b, exact_a, exact_b = narrow_operands(dtype)
    exact = exact_a @ exact_b
    product = float32_product(a, b)
    assert product.dtype == tf.float32
    # The products are exact in float32; the error is float32's accumulation over 512 terms.
    error = np.abs(product.numpy() - exact)
    assert np.max(error / (np.abs(exact_a) @ np.abs(exact_b))) < 1e-6
    # The operands' own matmul rounds every sum to dtype, what this function exists to avoid:
    # measured 420 (float16) and 14,000 (bfloat16) times the error above.
    rounded_error = np.abs(tf.matmul(a, b).numpy().astype(np.float64) - exact)
    assert np.max(rounded_error) > 100 * np.max(error)


def test_its_gradients_are_the_matmul_gradients_in_the_operands_dtype():
    a, b, exact_a, exact_b = narrow_operands(tf.bfloat16, rows=6, depth=32, columns=20)
    upstream = np.random.default_rng(1).normal(size=(6, 20)).astype(np.float32)
    with tf.GradientTape() as tape:
        tape.watch([a, b])
        product = float32_product(a, b)
    d_a, d_b = tape.gradient(product, [a, b], output_gradients=tf.constant(upstream))
    assert d_a.dtype == d_b.dtype == tf.bfloat16
    # Exactly the gradients of tf.matmul(a, b) in bfloat16, from the upstream gradient rounded to bfloat16.
    rounded = tf.cast(tf.constant(upstream), tf.bfloat16)
    np.testing.assert_array_equal(d_a.numpy(), tf.matmul(rounded, b, transpose_b=True).numpy())
    np.testing.assert_array_equal(d_b.numpy(), tf.matmul(a, rounded, transpose_a=True).numpy())
    # And those are the float64 products to bfloat16 precision: 2^-8 of the magnitudes summed on a CPU that
    # accumulates in float32 and rounds once; a CPU without bfloat16 units may round a few times (2^-6).
    exact_upstream = tf.cast(rounded, tf.float64).numpy()
    for gradient, exact, magnitude in [
            (d_a, exact_upstream @ exact_b.T, np.abs(exact_upstream) @ np.abs(exact_b.T)),
            (d_b, exact_a.T @ exact_upstream, np.abs(exact_a.T) @ np.abs(exact_upstream))]:
        error = np.abs(gradient.numpy().astype(np.float64) - exact)
        assert np.all(error <= 2**-6 * magnitude + 1e-6), np.max(error / magnitude)


def test_float32_operands_take_the_plain_matmul():
    a, b, exact_a, exact_b = narrow_operands(tf.float32, rows=5, depth=64, columns=7)
    np.testing.assert_allclose(float32_product(a, b).numpy(), exact_a @ exact_b, rtol=1e-5, atol=1e-5)


def test_it_follows_each_batch_shape_inside_one_traced_step():
    """Training traces its step once for any batch shape; XLA compiles a product per shape under it."""
    @tf.function(input_signature=[tf.TensorSpec([None, 64], tf.bfloat16), tf.TensorSpec([64, 40], tf.bfloat16)])
    def step(a, b):
        return float32_product(a, b)

    for rows in (3, 17, 3):
        a, b, exact_a, exact_b = narrow_operands(tf.bfloat16, rows=rows, depth=64, columns=40, seed=rows)
        np.testing.assert_allclose(step(a, b).numpy(), exact_a @ exact_b, rtol=1e-5, atol=1e-5)
    assert len(step._list_all_concrete_functions()) == 1


def test_operands_of_two_dtypes_are_refused():
    with pytest.raises(ValueError, match="one dtype; got bfloat16 and float32"):
        float32_product(tf.ones([2, 3], tf.bfloat16), tf.ones([3, 4], tf.float32))


def test_it_multiplies_through_xlas_dot_with_a_float32_result():
    """Public API only: XLA compiles tf.matmul's output_type=float32 into one bf16 x bf16 -> f32 dot."""
    from t2t_lite.ops import float32_product as module

    a, b = tf.ones([4, 8], tf.bfloat16), tf.ones([8, 3], tf.bfloat16)
    hlo = module._xla_float32_product.experimental_get_compiler_ir(a, b)(stage="hlo")
    assert "f32[4,3]{1,0} dot(bf16[4,8]" in hlo
