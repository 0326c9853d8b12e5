"""Decoding kernels in either layout against numpy and the Dense layers; how the layout is chosen."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.errors import UserError
from t2t_lite.layers import kernel_layout, matmul_threads, projection
from t2t_lite.layers.feed_forward import FeedForward
from t2t_lite.layers.kernel_layout import IN_OUT, OUT_IN, STEP_ROWS
from t2t_lite.layers.matmul_threads import BATCH_MATMUL, MATMUL
from t2t_lite.layers.projection import DecodingKernels, StepKernel, project

LAYOUTS = [IN_OUT, OUT_IN]
OPS = [MATMUL, BATCH_MATMUL]


def _dense(units, activation=None, use_bias=True, input_width=6, seed=0):
    layer = keras.layers.Dense(units, activation=activation, use_bias=use_bias)
    layer.build((None, None, input_width))
    rng = np.random.default_rng(seed)
    layer.kernel.assign(rng.normal(size=layer.kernel.shape).astype(np.float32))
    if use_bias:
        layer.bias.assign(rng.normal(size=layer.bias.shape).astype(np.float32))
    return layer


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("stored_as", LAYOUTS)
def test_step_kernel_multiplies_like_numpy_whatever_the_layouts_and_op(layout, stored_as, op):
    rng = np.random.default_rng(0)
    kernel = rng.normal(size=(6, 5)).astype(np.float32)  # [in, out]
    rows = rng.normal(size=(4, 6)).astype(np.float32)
    step = StepKernel(tf.constant(kernel if stored_as == IN_OUT else kernel.T), layout, stored_as=stored_as, op=op)
    assert step.width == 5
    assert step.matrix.shape == ((6, 5) if layout == IN_OUT else (5, 6))
    np.testing.assert_allclose(step(rows).numpy(), rows @ kernel, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op, graph_op", [(MATMUL, "MatMul"), (BATCH_MATMUL, "BatchMatMulV2")])
def test_step_kernel_multiplies_with_the_op_it_was_given(op, graph_op):
    step = StepKernel(tf.ones([6, 5]), IN_OUT, op=op)
    graph = tf.function(step).get_concrete_function(tf.TensorSpec([None, 6])).graph
    multiplies = {node.op for node in graph.as_graph_def().node} & {"MatMul", "BatchMatMulV2"}
    assert multiplies == {graph_op}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("activation, use_bias", [(None, True), ("relu", True), (None, False)])
def test_projection_through_a_step_kernel_matches_numpy(activation, use_bias, layout):
    dense = _dense(5, activation, use_bias)
    x = np.random.default_rng(1).normal(size=(3, 2, 6)).astype(np.float32)  # [B, T, in]
    expected = x @ dense.kernel.numpy() + (dense.bias.numpy() if use_bias else 0.0)
    if activation == "relu":
        expected = np.maximum(expected, 0.0)
        assert (expected == 0).any() and (expected > 0).any()  # the activation is exercised
    out = project(dense, x, DecodingKernels([dense], "float32", layout))
    assert out.shape == (3, 2, 5)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_layers_not_covered_and_no_kernels_use_the_dense_layer_itself():
    covered, other = _dense(4, seed=2), _dense(4, seed=3)
    kernels = DecodingKernels([covered], "float32", OUT_IN)
    assert covered in kernels and other not in kernels
    x = np.random.default_rng(4).normal(size=(2, 1, 6)).astype(np.float32)
    np.testing.assert_array_equal(project(other, x, kernels).numpy(), other(x).numpy())
    np.testing.assert_array_equal(project(covered, x).numpy(), covered(x).numpy())


def test_kernels_cover_nested_layers_and_follow_later_weight_updates_only_when_remade():
    ffn = FeedForward(d_model=6, d_ff=8)
    ffn.build((None, None, 6))
    x = np.random.default_rng(5).normal(size=(2, 3, 6)).astype(np.float32)
    kernels = DecodingKernels([ffn], "float32", IN_OUT)
    np.testing.assert_allclose(ffn(x, kernels=kernels).numpy(), ffn(x).numpy(), rtol=1e-5, atol=1e-6)
    # The copies are snapshots: a decoder makes them once per decoded batch, after any training step.
    ffn.output_proj.kernel.assign(ffn.output_proj.kernel * 2.0)
    assert not np.allclose(ffn(x, kernels=kernels).numpy(), ffn(x).numpy())
    np.testing.assert_allclose(ffn(x, kernels=DecodingKernels([ffn], "float32", IN_OUT)).numpy(), ffn(x).numpy(),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_kernels_are_cast_to_the_compute_dtype(layout):
    dense = _dense(5)
    x = np.random.default_rng(6).normal(size=(2, 6)).astype("bfloat16")
    out = project(dense, x, DecodingKernels([dense], "bfloat16", layout))
    assert out.dtype == "bfloat16"
    expected = x.astype(np.float32) @ dense.kernel.numpy() + dense.bias.numpy()
    np.testing.assert_allclose(out.numpy().astype(np.float32), expected, rtol=0.05, atol=0.1)


def test_an_unknown_layout_or_op_is_refused():
    with pytest.raises(ValueError, match="layout must be"):
        StepKernel(tf.ones([6, 5]), "sideways")
    with pytest.raises(ValueError, match="op must be"):
        StepKernel(tf.ones([6, 5]), IN_OUT, op="einsum")


def test_kernels_ask_for_their_op_at_a_decoding_steps_rows_in_their_dtype(monkeypatch):
    asked = []
    monkeypatch.setattr(projection, "step_matmul_op", lambda *shape: asked.append(shape) or BATCH_MATMUL)
    ffn = FeedForward(d_model=6, d_ff=8)
    ffn.build((None, None, 6))
    for layout in LAYOUTS:
        asked.clear()
        DecodingKernels([ffn], "bfloat16", layout)
        assert sorted(asked) == [(STEP_ROWS, 6, 8, tf.bfloat16), (STEP_ROWS, 8, 6, tf.bfloat16)]  # [in, out] shapes


def test_tensorflows_one_thread_rule_at_a_decoding_steps_shapes():
    two_mib = 2 * 1024 * 1024
    # float32, 128 rows: 4 * (128*512 + 512*(128+512)) = 1.5 MiB fits; with 2048 columns 5.3 MiB does not.
    assert matmul_threads.matmul_keeps_to_one_thread(128, 512, 512, 4, two_mib)
    assert not matmul_threads.matmul_keeps_to_one_thread(128, 512, 2048, 4, two_mib)
    assert not matmul_threads.matmul_keeps_to_one_thread(128, 2048, 512, 4, two_mib)
    assert not matmul_threads.matmul_keeps_to_one_thread(128, 512, 512, 4, 1024 * 1024)  # a smaller L2
    # Exactly 2 MiB is still under TensorFlow's 1.01 x L2; bfloat16 halves the bytes.
    assert matmul_threads.matmul_keeps_to_one_thread(256, 512, 512, 4, two_mib)
    assert not matmul_threads.matmul_keeps_to_one_thread(300, 512, 512, 4, two_mib)
    assert matmul_threads.matmul_keeps_to_one_thread(300, 512, 512, 2, two_mib)


def test_cache_sizes_are_read_as_sysfs_writes_them():
    assert matmul_threads.parse_cache_size("2048K\n") == 2 * 1024 * 1024
    assert matmul_threads.parse_cache_size("1M") == 1024 * 1024
    assert matmul_threads.parse_cache_size("512") == 512


def test_batch_matmul_only_where_matmul_would_leave_cores_idle(monkeypatch):
    monkeypatch.delenv(matmul_threads.OP_VARIABLE, raising=False)
    monkeypatch.setattr(matmul_threads, "l2_cache_bytes", lambda: 2 * 1024 * 1024)
    monkeypatch.setattr(matmul_threads, "intra_op_threads", lambda: 2)
    assert matmul_threads.step_matmul_op(128, 512, 512, "float32") == BATCH_MATMUL
    assert matmul_threads.step_matmul_op(128, 512, 2048, "float32") == MATMUL
    assert matmul_threads.step_matmul_op(128, 512, 32768, tf.bfloat16) == MATMUL
    monkeypatch.setattr(matmul_threads, "intra_op_threads", lambda: 1)  # nothing to spread over
    assert matmul_threads.step_matmul_op(128, 512, 512, "float32") == MATMUL
    monkeypatch.setattr(matmul_threads, "intra_op_threads", lambda: 2)
    monkeypatch.setattr(matmul_threads, "l2_cache_bytes", lambda: None)  # no sysfs: TensorFlow's MatMul
    assert matmul_threads.step_matmul_op(128, 512, 512, "float32") == MATMUL


@pytest.mark.parametrize("op", OPS)
def test_the_environment_can_fix_the_op(op, monkeypatch):
    monkeypatch.setenv(matmul_threads.OP_VARIABLE, f" {op.upper()} ")
    assert matmul_threads.step_matmul_op(128, 512, 512, "float32") == op
    assert matmul_threads.step_matmul_op(128, 512, 32768, "float32") == op


def test_a_bad_op_in_the_environment_is_a_user_error(monkeypatch):
    monkeypatch.setenv(matmul_threads.OP_VARIABLE, "einsum")
    with pytest.raises(UserError, match="T2T_LITE_STEP_MATMUL='einsum'.*matmul, batch_matmul or auto"):
        matmul_threads.step_matmul_op(128, 512, 512, "float32")


def test_the_faster_layout_is_chosen_only_with_a_clear_margin():
    assert kernel_layout.choose([1.0, 1.0, 1.0], [0.5, 0.5, 9.0]) == OUT_IN  # medians, not means
    assert kernel_layout.choose([1.0, 1.0, 1.0], [0.97, 0.97, 0.97]) == IN_OUT  # within the margin: no copy
    assert kernel_layout.choose([1.0, 1.0, 1.0], [1.5, 1.5, 1.5]) == IN_OUT


def test_the_measured_layout_is_one_of_the_two_and_stays_the_same_in_a_process(monkeypatch):
    monkeypatch.delenv(kernel_layout.LAYOUT_VARIABLE, raising=False)
    kernel_layout.faster_layout.cache_clear()
    first = kernel_layout.faster_layout(8, 16, 24, "float32")
    assert first in LAYOUTS
    assert all(kernel_layout.faster_layout(8, 16, 24, "float32") == first for _ in range(3))
    kernel_layout.faster_layout.cache_clear()


@pytest.mark.parametrize("slow", LAYOUTS)
def test_the_measurement_picks_the_layout_that_runs_faster(slow, monkeypatch):
    monkeypatch.delenv(kernel_layout.LAYOUT_VARIABLE, raising=False)
    matmul = tf.matmul

    def slowed_matmul(a, b, transpose_b=False):  # one layout does 20 matmuls' work for one
        result = matmul(a, b, transpose_b=transpose_b)
        if transpose_b == (slow == OUT_IN):
            # Each extra product gets its own operand: Grappler merges identical
            # matmuls into one, which left the slowdown to the CPU's own preference.
            for i in range(1, 20):
                result = matmul(a * (1.0 + i), b, transpose_b=transpose_b) + 0.5 * result
        return result

    monkeypatch.setattr(tf, "matmul", slowed_matmul)
    kernel_layout.faster_layout.cache_clear()
    try:
        assert kernel_layout.faster_layout(64, 256, 512, "float32") == (IN_OUT if slow == OUT_IN else OUT_IN)
    finally:
        kernel_layout.faster_layout.cache_clear()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_environment_can_fix_the_layout(layout, monkeypatch):
    monkeypatch.setenv(kernel_layout.LAYOUT_VARIABLE, layout.upper())
    kernel_layout.faster_layout.cache_clear()
    assert kernel_layout.faster_layout(8, 16, 24, "float32") == layout
    kernel_layout.faster_layout.cache_clear()


def test_a_bad_layout_in_the_environment_is_a_user_error(monkeypatch):
    monkeypatch.setenv(kernel_layout.LAYOUT_VARIABLE, "sideways")
    kernel_layout.faster_layout.cache_clear()
    with pytest.raises(UserError, match="T2T_LITE_KERNEL_LAYOUT='sideways'.*in_out, out_in or measure"):
        kernel_layout.faster_layout(8, 16, 24, "float32")
    kernel_layout.faster_layout.cache_clear()


def test_a_model_measures_its_layout_at_the_output_projections_shape(monkeypatch):
    import t2t_lite.hparams  # noqa: F401
    from t2t_lite import config
    from t2t_lite.models import build_model, transformer
    from t2t_lite.registry import hparams_sets

    asked = []
    monkeypatch.setattr(transformer, "faster_layout", lambda *shape: asked.append(shape) or OUT_IN)
    hp = config.apply_overrides(hparams_sets.get("transformer_tiny")(), "vocab_size=37")
    model = build_model(hp)
    assert model.decoding_layout(tf.bfloat16) == OUT_IN
    assert asked == [(kernel_layout.STEP_ROWS, hp.model.d_model, 37, "bfloat16")]
