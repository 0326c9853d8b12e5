"""Step kernels in either layout and op against numpy and the Dense layers; how layout and op are chosen."""
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite import environment
from t2t_lite.errors import UserError
from t2t_lite.layers.feed_forward import FeedForward
from t2t_lite.ops import kernel_layout, matmul_threads, step_matmul
from t2t_lite.ops.kernel_layout import IN_OUT, OUT_IN, STEP_ROWS
from t2t_lite.ops.matmul_threads import BATCH_MATMUL, MATMUL
from t2t_lite.ops.step_matmul import Dense, StepKernel, StepKernels, StepMatmulSettings

LAYOUTS = [IN_OUT, OUT_IN]
OPS = [MATMUL, BATCH_MATMUL]


def _dense(units, activation=None, use_bias=True, input_width=6, seed=0, dtype=None):
    layer = Dense(units, activation=activation, use_bias=use_bias, dtype=dtype)
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
    out = _through(StepKernels("float32", layout), dense, x)
    assert out.shape == (3, 2, 5)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("biases", [(True, True), (True, False), (False, False)])
def test_joined_denses_multiply_like_their_products_side_by_side_in_numpy(layout, biases):
    denses = [_dense(units, use_bias=bias, seed=seed) for units, bias, seed in zip((5, 3), biases, (4, 5))]
    owner = object()
    kernels = StepKernels("float32", layout)
    kernels.add_joined(owner, denses)
    rows = np.random.default_rng(6).normal(size=(4, 6)).astype(np.float32)
    expected = np.concatenate([rows @ dense.kernel.numpy() + (dense.bias.numpy() if dense.use_bias else 0.0)
                               for dense in denses], axis=1)  # [4, 5 + 3]
    np.testing.assert_allclose(kernels.get(owner)(rows).numpy(), expected, rtol=1e-5, atol=1e-5)


def test_dense_layers_given_to_skip_get_no_kernel_of_their_own():
    kept, joined = _dense(5, seed=7), _dense(3, seed=8)
    kernels = StepKernels("float32", IN_OUT)
    kernels.add_dense_layers([kept, joined], skip=[joined])
    assert kernels.get(joined) is None and kernels.get(kept) is not None


def test_only_denses_without_activation_can_be_joined():
    with pytest.raises(ValueError, match="without an activation"):
        StepKernels("float32", IN_OUT).add_joined(object(), [_dense(5), _dense(5, activation="relu")])


def _through(kernels, layer, x):
    """layer(x) given `kernels` prepared for layer's Dense sub-layers."""
    kernels.add_dense_layers([layer])
    return layer(x, kernels=kernels)


def test_layers_not_prepared_and_calls_without_kernels_are_plain_dense():
    # Twins: the same weights, one prepared. Then both weights change alike, so the prepared kernel (a
    # snapshot) no longer is the layers' own: a call that went through it cannot pass for a plain one.
    prepared, other = _dense(4, seed=2), _dense(4, seed=2)
    kernels = StepKernels("float32", OUT_IN)
    kernels.add_dense_layers([prepared])
    assert kernels.get(prepared) is not None and kernels.get(other) is None
    x = np.random.default_rng(4).normal(size=(2, 1, 6)).astype(np.float32)
    snapshot = x @ prepared.kernel.numpy() + prepared.bias.numpy()  # [2, 1, 4] what the prepared kernel gives
    for layer in (prepared, other):
        layer.kernel.assign(layer.kernel * 2.0)
    plain = keras.layers.Dense.call(other, x).numpy()
    np.testing.assert_array_equal(keras.layers.Dense.call(prepared, x).numpy(), plain)  # still twins
    np.testing.assert_array_equal(other(x, kernels=kernels).numpy(), plain)  # not prepared: plain
    np.testing.assert_array_equal(prepared(x).numpy(), plain)  # no kernels: plain
    # And the kernels given are used where prepared: the twin called with them gives the snapshot's product.
    np.testing.assert_allclose(prepared(x, kernels=kernels).numpy(), snapshot, rtol=1e-5, atol=1e-5)
    assert not np.allclose(snapshot, plain)


def test_kernels_cover_nested_layers_and_follow_later_weight_updates_only_when_remade():
    ffn = FeedForward(d_model=6, d_ff=8)
    ffn.build((None, None, 6))
    x = np.random.default_rng(5).normal(size=(2, 3, 6)).astype(np.float32)
    kernels = StepKernels("float32", IN_OUT)
    np.testing.assert_allclose(_through(kernels, ffn, x).numpy(), ffn(x).numpy(), rtol=1e-5, atol=1e-6)
    # The copies are snapshots: a decoder makes them once per decoded batch, after any training step.
    ffn.output_proj.kernel.assign(ffn.output_proj.kernel * 2.0)
    stale = ffn(x, kernels=kernels).numpy()
    assert not np.allclose(stale, ffn(x).numpy())
    np.testing.assert_allclose(_through(StepKernels("float32", IN_OUT), ffn, x).numpy(), ffn(x).numpy(),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_kernels_are_cast_to_the_compute_dtype(layout):
    dense = _dense(5, dtype="mixed_bfloat16")  # float32 variables, bfloat16 products
    x = np.random.default_rng(6).normal(size=(2, 6)).astype("bfloat16")
    out = _through(StepKernels("bfloat16", layout), dense, x)
    assert out.dtype == "bfloat16"
    expected = x.astype(np.float32) @ dense.kernel.numpy() + dense.bias.numpy()
    np.testing.assert_allclose(out.numpy().astype(np.float32), expected, rtol=0.05, atol=0.1)


@pytest.mark.parametrize("stored_as", LAYOUTS)
def test_a_product_of_a_given_weight_is_plain_without_kernels_and_prepared_with_them(stored_as):
    rng = np.random.default_rng(7)
    weight = tf.Variable(rng.normal(size=(6, 5) if stored_as == IN_OUT else (5, 6)).astype(np.float32))
    rows = rng.normal(size=(3, 6)).astype(np.float32)
    owner = types.SimpleNamespace()  # any object kernels can be prepared for
    expected = rows @ (weight.numpy() if stored_as == IN_OUT else weight.numpy().T)
    np.testing.assert_allclose(step_matmul.product(owner, rows, weight, stored_as).numpy(), expected, rtol=1e-5)
    kernels = StepKernels("float32", OUT_IN if stored_as == IN_OUT else IN_OUT)
    kernels.add(owner, weight, stored_as)
    weight.assign(weight * 3.0)  # the prepared copy is what the product multiplies by
    np.testing.assert_allclose(step_matmul.product(owner, rows, weight, stored_as, kernels=kernels).numpy(),
                               expected, rtol=1e-5)


def test_an_unknown_layout_or_op_is_refused():
    with pytest.raises(ValueError, match="layout must be"):
        StepKernel(tf.ones([6, 5]), "sideways")
    with pytest.raises(ValueError, match="op must be"):
        StepKernel(tf.ones([6, 5]), IN_OUT, op="einsum")
    with pytest.raises(ValueError, match="layout must be 'auto', 'in_out' or 'out_in', got 'sideways'"):
        StepMatmulSettings(layout="sideways")
    with pytest.raises(ValueError, match="op must be 'auto', 'matmul' or 'batch_matmul', got 'einsum'"):
        StepMatmulSettings(op="einsum")


def test_kernels_ask_for_their_op_at_a_decoding_steps_rows_in_their_dtype(monkeypatch):
    asked = []
    monkeypatch.setattr(step_matmul, "on_cpu", lambda: True)
    monkeypatch.setattr(step_matmul, "step_matmul_op", lambda *shape: asked.append(shape) or BATCH_MATMUL)
    ffn = FeedForward(d_model=6, d_ff=8)
    ffn.build((None, None, 6))
    for layout in LAYOUTS:
        asked.clear()
        StepKernels("bfloat16", layout).add_dense_layers([ffn])
        assert sorted(asked) == [(STEP_ROWS, 6, 8, tf.bfloat16), (STEP_ROWS, 8, 6, tf.bfloat16)]  # [in, out] shapes


def test_off_the_cpu_nothing_is_measured_or_switched(monkeypatch):
    def refuse(*args):
        raise AssertionError("measured or chose by the CPU's rule off the CPU")

    monkeypatch.setattr(step_matmul, "on_cpu", lambda: False)
    monkeypatch.setattr(step_matmul, "measured_layout", refuse)
    monkeypatch.setattr(step_matmul, "step_matmul_op", refuse)
    settings = StepMatmulSettings()
    assert settings.resolved_layout(512, 32768, "float32") == IN_OUT
    assert settings.resolved_op(512, 512, "float32") == MATMUL


def test_fixed_settings_skip_the_measurement_and_the_rule(monkeypatch):
    def refuse(*args):
        raise AssertionError("measured or chose by rule though the settings fix it")

    monkeypatch.setattr(step_matmul, "on_cpu", lambda: True)
    monkeypatch.setattr(step_matmul, "measured_layout", refuse)
    monkeypatch.setattr(step_matmul, "step_matmul_op", refuse)
    settings = StepMatmulSettings(layout=OUT_IN, op=BATCH_MATMUL)
    assert settings.resolved_layout(512, 32768, "bfloat16") == OUT_IN
    assert settings.resolved_op(512, 32768, "bfloat16") == BATCH_MATMUL


def test_auto_on_the_cpu_measures_at_the_step_shape(monkeypatch):
    asked = []
    monkeypatch.setattr(step_matmul, "on_cpu", lambda: True)
    monkeypatch.setattr(step_matmul, "measured_layout", lambda *shape: asked.append(shape) or OUT_IN)
    assert StepMatmulSettings().resolved_layout(16, 37, tf.bfloat16) == OUT_IN
    assert asked == [(STEP_ROWS, 16, 37, "bfloat16")]


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


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", OPS)
def test_the_environment_gives_the_commands_settings(layout, op, monkeypatch):
    monkeypatch.setenv(environment.LAYOUT_VARIABLE, layout.upper())
    monkeypatch.setenv(environment.OP_VARIABLE, f" {op} ")
    assert environment.step_matmul_settings() == StepMatmulSettings(layout=layout, op=op)
    monkeypatch.setenv(environment.LAYOUT_VARIABLE, "auto")
    monkeypatch.delenv(environment.OP_VARIABLE)
    assert environment.step_matmul_settings() == StepMatmulSettings()


def test_bad_values_in_the_environment_are_user_errors(monkeypatch):
    monkeypatch.setenv(environment.OP_VARIABLE, "einsum")
    with pytest.raises(UserError, match="T2T_LITE_STEP_MATMUL='einsum'.*matmul, batch_matmul or auto"):
        environment.step_matmul_settings()
    monkeypatch.delenv(environment.OP_VARIABLE)
    monkeypatch.setenv(environment.LAYOUT_VARIABLE, "sideways")
    with pytest.raises(UserError, match="T2T_LITE_KERNEL_LAYOUT='sideways'.*in_out, out_in or auto"):
        environment.step_matmul_settings()


def test_a_decoder_ignores_the_environment(monkeypatch):
    """The library takes its settings as arguments; only the commands read the variables."""
    from t2t_lite.config import DecodeHParams
    from t2t_lite.decoding.decoder import Decoder

    monkeypatch.setenv(environment.LAYOUT_VARIABLE, "sideways")  # would be refused if it were read
    monkeypatch.setenv(environment.OP_VARIABLE, BATCH_MATMUL)
    assert Decoder(_tiny_model(), DecodeHParams()).step_matmul == StepMatmulSettings()


def test_the_walk_finds_every_dense_kernel_of_the_model():
    """dense_sublayers (public attributes only) reaches every Dense: the model's kernels are exactly theirs."""
    model = _tiny_model("num_decoder_layers=2")
    found = sorted(dense.kernel.path for dense in step_matmul.dense_sublayers(model))
    assert found == sorted(v.path for v in model.variables if v.path.endswith("/kernel"))
    assert len(found) == 2 * 10 + 6  # each decoder layer: 4 + 4 attention projections, 2 FFN; the encoder's 6


def test_the_faster_layout_is_chosen_only_with_a_clear_margin():
    assert kernel_layout.choose([1.0, 1.0, 1.0], [0.5, 0.5, 9.0]) == OUT_IN  # medians, not means
    assert kernel_layout.choose([1.0, 1.0, 1.0], [0.97, 0.97, 0.97]) == IN_OUT  # within the margin: no copy
    assert kernel_layout.choose([1.0, 1.0, 1.0], [1.5, 1.5, 1.5]) == IN_OUT


def test_the_measured_layout_is_one_of_the_two_and_stays_the_same_in_a_process():
    kernel_layout.measured_layout.cache_clear()
    first = kernel_layout.measured_layout(8, 16, 24, "float32")
    assert first in LAYOUTS
    assert all(kernel_layout.measured_layout(8, 16, 24, "float32") == first for _ in range(3))
    kernel_layout.measured_layout.cache_clear()


@pytest.mark.parametrize("slow", LAYOUTS)
def test_the_measurement_picks_the_layout_that_runs_faster(slow, monkeypatch):
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
    kernel_layout.measured_layout.cache_clear()
    try:
        assert kernel_layout.measured_layout(64, 256, 512, "float32") == (IN_OUT if slow == OUT_IN else OUT_IN)
    finally:
        kernel_layout.measured_layout.cache_clear()


def _tiny_model(overrides="num_decoder_layers=1"):
    import t2t_lite.hparams  # noqa: F401
    from t2t_lite import config
    from t2t_lite.models import build_model
    from t2t_lite.registry import hparams_sets

    base = "vocab_size=11,d_model=16,d_ff=24,num_heads=2,num_encoder_layers=1"
    return build_model(config.apply_overrides(hparams_sets.get("transformer_tiny")(), f"{base},{overrides}"))


def test_the_decoders_steps_multiply_through_the_prepared_kernels():
    """The whole path: every product of a Decoder's traced step takes the op its settings fix."""
    from t2t_lite.config import DecodeHParams
    from t2t_lite.decoding.decoder import Decoder

    model = _tiny_model()
    counts = {}
    for op in OPS:
        settings = StepMatmulSettings(layout=IN_OUT, op=op)
        graph = Decoder(model, DecodeHParams(), settings).decode.get_concrete_function().graph
        # The loop's body is a function in the graph's library; its products are the step's.
        nodes = [node.op for function in graph.as_graph_def().library.function for node in function.node_def]
        counts[op] = {kind: nodes.count(kind) for kind in ("MatMul", "BatchMatMulV2")}
    # One decoder layer's step: self-attention's q, k and v joined in one product, its output; cross-attention
    # q, output; FFN 2; the logits.
    assert counts[MATMUL]["MatMul"] == 7 and counts[BATCH_MATMUL]["MatMul"] == 0
    assert counts[BATCH_MATMUL]["BatchMatMulV2"] == counts[MATMUL]["BatchMatMulV2"] + 7
