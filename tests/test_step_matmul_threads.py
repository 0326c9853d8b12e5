"""Step kernels belong to their step: decoders of one model with their own kernels, alternately or at once.

Nothing is lent to the shared layers, so two cached steps (or decoders) of the
SAME model with different kernels may run interleaved, in one thread or two,
and each must get the outputs of its own kernels.
"""
import threading

import numpy as np

import t2t_lite.hparams  # noqa: F401
from t2t_lite import config
from t2t_lite.config import DecodeHParams
from t2t_lite.decoding.cached_step import CachedStep
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.models import build_model
from t2t_lite.models.transformer import shift_right
from t2t_lite.ops.kernel_layout import IN_OUT, OUT_IN
from t2t_lite.ops.matmul_threads import BATCH_MATMUL, MATMUL
from t2t_lite.ops.step_matmul import StepMatmulSettings
from t2t_lite.registry import hparams_sets

IN_OUT_MATMUL = StepMatmulSettings(layout=IN_OUT, op=MATMUL)
OUT_IN_BATCH_MATMUL = StepMatmulSettings(layout=OUT_IN, op=BATCH_MATMUL)
INPUTS = np.array([[5, 7, 3, 9, 1], [4, 4, 8, 1, 0], [11, 2, 6, 10, 1]], np.int32)  # [B, T_src]
TARGETS = np.array([[3, 8, 2, 6, 1], [9, 9, 4, 1, 0], [7, 5, 12, 2, 1]], np.int32)  # [B, T_tgt]


def _model():
    overrides = "vocab_size=13,num_encoder_layers=1,num_decoder_layers=2,d_model=16,d_ff=24,num_heads=2,dropout=0"
    return build_model(config.apply_overrides(hparams_sets.get("transformer_tiny")(), overrides))


def _cached_step(model, settings):
    """A CachedStep over INPUTS, one beam: its kernels are the model's weights now."""
    return CachedStep(model, INPUTS, INPUTS.shape[0], 1, settings)


def _cached_steps(step):
    """The cached decoding of TARGETS through `step`, one step per next(): logits [B, V] of each position."""
    cache = step.initial_state
    decoder_inputs = np.asarray(shift_right(TARGETS))
    for i in range(TARGETS.shape[1]):
        logits, cache = step(decoder_inputs[:, i:i + 1], i, cache)
        yield logits.numpy()


def _in_lockstep(steps, barrier):
    """Every step of the `steps` generator, waiting at `barrier` after each: [B, T_tgt, V]."""
    logits = []
    for step in steps:
        logits.append(step)
        barrier.wait()
    return np.stack(logits, axis=1)


def test_kernels_of_one_model_from_different_weights_each_give_their_own_steps_alternately_and_from_two_threads():
    """Kernels are snapshots: two steps made before and after a weight change each decode as the model did then."""
    model = _model()
    full_before = model({"inputs": INPUTS, "targets": TARGETS}).numpy()  # [B, T_tgt, V]
    before = _cached_step(model, IN_OUT_MATMUL)
    # Only the steps read the feed-forward output kernels (not the encoder, not memory_cache), and each
    # step reads them through its own kernels: a step with the other's would give the other pass's logits.
    for layer in model.decoder_layers:
        layer.ffn.output_proj.kernel.assign(layer.ffn.output_proj.kernel * 2.0)
    full_after = model({"inputs": INPUTS, "targets": TARGETS}).numpy()
    after = _cached_step(model, OUT_IN_BATCH_MATMUL)
    assert np.abs(full_before - full_after).max() > 0.1

    # Alternately, in one thread: a step of one, then a step of the other.
    steps = list(zip(_cached_steps(before), _cached_steps(after)))
    np.testing.assert_allclose(np.stack([b for b, _ in steps], axis=1), full_before, atol=1e-5)
    np.testing.assert_allclose(np.stack([a for _, a in steps], axis=1), full_after, atol=1e-5)

    # From two threads in lockstep: each thread's steps run between the other's.
    lockstep, results = threading.Barrier(2, timeout=60), {}

    def decode(name, step):
        results[name] = _in_lockstep(_cached_steps(step), lockstep)

    _run_together([lambda: decode("before", before), lambda: decode("after", after)])
    np.testing.assert_allclose(results["before"], full_before, atol=1e-5)
    np.testing.assert_allclose(results["after"], full_after, atol=1e-5)


def _run_together(functions):
    """Runs each function in its own thread and waits for all; re-raises the first failure."""
    failures = []

    def run(function):
        try:
            function()
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            failures.append(error)

    threads = [threading.Thread(target=run, args=(function,)) for function in functions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


def _step_products(decoder):
    """Counts of the step products in `decoder`'s traced loop: MatMul by transpose_b, BatchMatMulV2 by adj_y."""
    graph = decoder.decode.get_concrete_function().graph
    # The loop's body is a function in the graph's library; its products are the step's.
    nodes = [node for function in graph.as_graph_def().library.function for node in function.node_def]
    counts = {}
    for node in nodes:
        if node.op in ("MatMul", "BatchMatMulV2"):
            flag = node.attr["transpose_b" if node.op == "MatMul" else "adj_y"].b
            counts[node.op, flag] = counts.get((node.op, flag), 0) + 1
    return counts


def test_two_decoders_of_one_model_with_different_settings_decoding_at_once_each_keep_their_own():
    """Decoders in two threads trace and run at once; each graph multiplies its own way, the outputs agree."""
    model = _model()
    hparams = DecodeHParams(beam_size=3, alpha=0.6, extra_length=4)
    alone = [t.numpy() for t in Decoder(model, hparams, IN_OUT_MATMUL).decode(INPUTS)]
    decoders = {"in_out": Decoder(model, hparams, IN_OUT_MATMUL),
                "out_in": Decoder(model, hparams, OUT_IN_BATCH_MATMUL)}
    start, results = threading.Barrier(2, timeout=60), {name: [] for name in decoders}

    def decode(name):
        start.wait()  # both trace their first call at once
        for _ in range(3):
            results[name].append([t.numpy() for t in decoders[name].decode(INPUTS)])

    _run_together([lambda name=name: decode(name) for name in decoders])
    for runs in results.values():
        for ids, scores in runs:
            np.testing.assert_array_equal(ids, alone[0])
            np.testing.assert_allclose(scores, alone[1], atol=1e-5)
    # Two decoder layers' step: self-attention's q, k and v in one product, its output; cross-attention q, output;
    # FFN 2; then the logits.
    products = 2 * 6 + 1
    in_out, out_in = _step_products(decoders["in_out"]), _step_products(decoders["out_in"])
    assert in_out.get(("MatMul", False)) == products and ("MatMul", True) not in in_out
    assert out_in.get(("BatchMatMulV2", True)) == products and not any(op == "MatMul" for op, _ in out_in)
