"""Step kernels in either layout and op against numpy and the Dense layers; how layout and op are chosen."""
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite import environment
from t2t_lite.errors import UserError
from t2t_lite.layers.feed_forward import FeedForward
from t2t_lite.layers.prepared import dense_product
from t2t_lite.ops import kernel_layout, matmul_threads, step_matmul
from t2t_lite.ops.kernel_layout import IN_OUT, OUT_IN, STEP_ROWS
from t2t_lite.ops.matmul_threads import BATCH_MATMUL, MATMUL
from t2t_lite.ops.step_matmul import StepKernel, StepKernelMaker, StepMatmulSettings

LAYOUTS = [IN_OUT, OUT_IN]
OPS = [MATMUL, BATCH_MATMUL]


def _dense(units, activation=None, use_bias=True, input_width=6, seed=0, dtype=None):
    layer = keras.layers.Dense(units, activation=activation, use_bias=use_bias, dtype=dtype)
    layer.build((None, None, input_width))
    rng = np.random.default_rng(seed)
    layer.kernel.assign(rng.normal(size=layer.kernel.shape).astype(np.float32))
    if use_bias:
        layer.bias.assign(rng.normal(size=layer.bias.shape).astype(np.float32))
    return layer


@pytest.mark.isa
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
def test_a_dense_prepared_as_a_step_kernel_matches_numpy(activation, use_bias, layout):
    dense = _dense(5, activation, use_bias)
    rows = np.random.default_rng(1).normal(size=(6, 6)).astype(np.float32)  # [R, in]
    expected = rows @ dense.kernel.numpy() + (dense.bias.numpy() if use_bias else 0.0)
    if activation == "relu":
        expected = np.maximum(expected, 0.0)
        assert (expected == 0).any() and (expected > 0).any()  # the activation is exercised
    out = dense_product(StepKernelMaker("float32", layout).prepare, dense)(rows)
    assert out.shape == (6, 5)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.isa
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("biases", [(True, True), (True, False), (False, False)])
def test_joined_denses_multiply_like_their_products_side_by_side_in_numpy(layout, biases):
    denses = [_dense(units, use_bias=bias, seed=seed) for units, bias, seed in zip((5, 3), biases, (4, 5))]
    joined = dense_product(StepKernelMaker("float32", layout).prepare, *denses)
    rows = np.random.default_rng(6).normal(size=(4, 6)).astype(np.float32)
    expected = np.concatenate([rows @ dense.kernel.numpy() + (dense.bias.numpy() if dense.use_bias else 0.0)
                               for dense in denses], axis=1)  # [4, 5 + 3]
    np.testing.assert_allclose(joined(rows).numpy(), expected, rtol=1e-5, atol=1e-5)


def test_only_denses_without_activation_can_be_joined():
    with pytest.raises(ValueError, match="without an activation"):
        dense_product(StepKernelMaker("float32", IN_OUT).prepare, _dense(5), _dense(5, activation="relu"))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("stored_as", LAYOUTS)
def test_a_given_weight_multiplies_as_the_layout_it_is_stored_in_says(stored_as, layout):
    rng = np.random.default_rng(7)
    weight = tf.Variable(rng.normal(size=(6, 5) if stored_as == IN_OUT else (5, 6)).astype(np.float32))
    rows = rng.normal(size=(3, 6)).astype(np.float32)
    expected = rows @ (weight.numpy() if stored_as == IN_OUT else weight.numpy().T)
    kernel = StepKernelMaker("float32", layout).prepare(weight, transposed=stored_as == OUT_IN)
    assert (kernel.depth, kernel.width) == (6, 5)
    np.testing.assert_allclose(kernel(rows).numpy(), expected, rtol=1e-5, atol=1e-5)


def test_kernels_are_snapshots_that_follow_later_weight_updates_only_when_remade():
    ffn = FeedForward(d_model=6, d_ff=8)
    ffn.build((None, None, 6))
    rows = np.random.default_rng(5).normal(size=(4, 6)).astype(np.float32)  # [R, D]

    def through(maker):  # the network's two products, hidden (with its ReLU) then output, through step kernels
        hidden, output = dense_product(maker.prepare, ffn.hidden), dense_product(maker.prepare, ffn.output_proj)
        return lambda x: output(hidden(x)).numpy()

    prepared = through(StepKernelMaker("float32", IN_OUT))
    before = ffn(rows).numpy()
    np.testing.assert_allclose(prepared(rows), before, rtol=1e-5, atol=1e-6)
    # The kernels are snapshots: a decoder makes them once per decoded batch, after any training step.
    ffn.output_proj.kernel.assign(ffn.output_proj.kernel * 2.0)
    after = ffn(rows).numpy()
    assert not np.allclose(before, after)
    np.testing.assert_allclose(prepared(rows), before, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(through(StepKernelMaker("float32", IN_OUT))(rows), after, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_kernels_are_cast_to_the_compute_dtype(layout):
    dense = _dense(5, dtype="mixed_bfloat16")  # float32 variables, bfloat16 products
    x = np.random.default_rng(6).normal(size=(2, 6)).astype("bfloat16")
    out = dense_product(StepKernelMaker("bfloat16", layout).prepare, dense)(x)
    assert out.dtype == "bfloat16"
    expected = x.astype(np.float32) @ dense.kernel.numpy() + dense.bias.numpy()
    np.testing.assert_allclose(out.numpy().astype(np.float32), expected, rtol=0.05, atol=0.1)


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
        maker = StepKernelMaker("bfloat16", layout)
        kernels = [dense_product(maker.prepare, ffn.hidden), dense_product(maker.prepare, ffn.output_proj)]
        assert sorted(asked) == [(STEP_ROWS, 6, 8, tf.bfloat16), (STEP_ROWS, 8, 6, tf.bfloat16)]  # [in, out] shapes
        assert all(kernel.op == BATCH_MATMUL for kernel in kernels)


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
    monkeypatch.setenv(environment.CACHE_VARIABLE, "/somewhere")
    record = "/somewhere/kernel_layout.json"
    assert environment.step_matmul_settings() == StepMatmulSettings(layout=layout, op=op, layout_record=record)
    monkeypatch.setenv(environment.LAYOUT_VARIABLE, "auto")
    monkeypatch.delenv(environment.OP_VARIABLE)
    assert environment.step_matmul_settings() == StepMatmulSettings(layout_record=record)


def test_the_commands_keep_the_layout_record_in_the_users_cache(monkeypatch):
    monkeypatch.delenv(environment.CACHE_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert environment.step_matmul_settings().layout_record == "/xdg/t2t_lite/kernel_layout.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", "/home/someone")
    assert environment.step_matmul_settings().layout_record == "/home/someone/.cache/t2t_lite/kernel_layout.json"


def test_a_layout_record_measures_a_shape_once_per_machine_and_keeps_it(monkeypatch, tmp_path):
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)  # the record's key names a cap; the test sets its own
    measured = []
    monkeypatch.setattr(kernel_layout, "measured_layout", lambda *shape: measured.append(shape) or OUT_IN)
    record = tmp_path / "cache" / "kernel_layout.json"  # its directory made when first written
    assert kernel_layout.recorded_layout(str(record), 128, 16, 37, "float32") == OUT_IN
    assert kernel_layout.recorded_layout(str(record), 128, 16, 37, "float32") == OUT_IN  # read, not measured
    assert kernel_layout.recorded_layout(str(record), 128, 16, 37, "bfloat16") == OUT_IN  # another dtype: measured
    assert measured == [(128, 16, 37, "float32"), (128, 16, 37, "bfloat16")]
    assert json.loads(record.read_text()) == {kernel_layout.record_key(128, 16, 37, "float32"): OUT_IN,
                                              kernel_layout.record_key(128, 16, 37, "bfloat16"): OUT_IN}
    # Another machine's entry (another CPU or ISA cap) is not this one's.
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert kernel_layout.record_key(128, 16, 37, "float32") not in json.loads(record.read_text())
    # A record that cannot be read is measured over; one that cannot be written still answers.
    record.write_text("not json")
    assert kernel_layout.recorded_layout(str(record), 128, 16, 37, "float32") == OUT_IN
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert kernel_layout.recorded_layout(str(blocked / "kernel_layout.json"), 128, 16, 37, "float32") == OUT_IN
    assert len(measured) == 4


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
