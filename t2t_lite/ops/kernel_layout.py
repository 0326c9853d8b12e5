"""Which weight layout a decoding step's small matmuls run fastest in on this CPU, measured once per process,
or once per machine where a record file is given (`recorded_layout`).

A decoding step multiplies few rows (batch x beams: 128 at the default decode
batch) by each weight. Whether oneDNN runs that faster as `x W` on Keras's
[in, out] kernel or as `x W_t^T` (transpose_b) on an [out, in] copy depends on
the CPU and the dtype. On the CPUs measured, the output projection's
preference (the step's largest matmul) was the whole step's, and choosing per
shape from single-matmul timings lost to one layout for all
(docs/performance.md). So one layout per dtype is measured at the output
projection's shape and used for every decoder weight.
"""
import contextlib
import functools
import json
import os
import platform
import time

import tensorflow as tf

from t2t_lite.files import atomic_write_text, read_json
from t2t_lite.precision import cpuinfo_field, isa_cap

IN_OUT, OUT_IN = "in_out", "out_in"

# Rows a decoding step multiplies at the default decode batch (32 sentences x beam 4).
STEP_ROWS = 128
# The [out, in] copy must be this much faster to be chosen: Keras's own layout
# needs no copy, and a near tie would otherwise flip between runs.
COPY_MUST_SAVE = 0.05
ROUNDS = 7


@functools.lru_cache(maxsize=None)
def measured_layout(rows: int, depth: int, width: int, dtype: str) -> str:
    """IN_OUT or OUT_IN: the faster way to multiply [rows, depth] by a [depth, width] weight in dtype here.

    Times both in alternating rounds (medians of ROUNDS) the first time a
    shape is asked for in this process, about a second at transformer_base's
    output projection; later calls return the same answer, so one process
    always traces the same graph for a shape.
    """
    with tf.init_scope():  # eager even when called while a tf.function traces
        # Stateless: a tf.random.Generator is a variable, and one made while a tf.function first traces
        # makes TensorFlow trace it all over again (seconds for a beam search).
        x = tf.cast(tf.random.stateless_normal([rows, depth], seed=[0, 1]), dtype)
        kernel = tf.cast(tf.random.stateless_normal([depth, width], seed=[0, 2]), dtype)
        copy = tf.transpose(kernel)
        multiply = tf.function(lambda x, w, transpose: tf.matmul(x, w, transpose_b=transpose))
        # Enough repetitions for ~2e8 FLOP a timing (a few ms): a small model's matmul is too short to time.
        repeats = max(1, min(50, round(2e8 / (2 * rows * depth * width))))

        def seconds(weight, transpose):
            start = time.perf_counter()
            for _ in range(repeats):
                result = multiply(x, weight, transpose)
            result.numpy()
            return time.perf_counter() - start

        seconds(kernel, False), seconds(copy, True)  # trace and warm up
        rounds = [(seconds(kernel, False), seconds(copy, True)) for _ in range(ROUNDS)]  # alternating
    return choose(*zip(*rounds))


def recorded_layout(record: str, rows: int, depth: int, width: int, dtype: str) -> str:
    """measured_layout's answer as `record` (a JSON file) holds it for this machine, measured and added there
    the first time. A timing can tie, so two processes measuring for themselves may choose differently, and in
    bfloat16 the layouts round differently: with one record, a decoder and an export made by another process on
    this machine multiply alike and give the same lines. A record that cannot be read or written is ignored.

    """
    key = record_key(rows, depth, width, dtype)
    known = {}
    with contextlib.suppress(OSError, ValueError):
        known = read_json(record)
    known = known if isinstance(known, dict) else {}
    if known.get(key) in (IN_OUT, OUT_IN):
        return known[key]
    layout = measured_layout(rows, depth, width, dtype)
    with contextlib.suppress(OSError):  # a read-only home: this process measured, the next one will too
        os.makedirs(os.path.dirname(os.path.abspath(record)), exist_ok=True)
        atomic_write_text(record, json.dumps({**known, key: layout}, indent=1, sort_keys=True) + "\n")
    return layout


def record_key(rows: int, depth: int, width: int, dtype: str) -> str:
    """A shape's entry in a layout record: the machine (its CPU model, oneDNN's ISA cap ONEDNN_MAX_CPU_ISA,
    TensorFlow's version) and the product."""
    return f"{cpu_model()} | isa cap {isa_cap() or 'none'} | tensorflow {tf.__version__} | {rows}x{depth}x{width} {dtype}"


@functools.lru_cache(maxsize=None)
def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux), else what the platform says."""
    return cpuinfo_field("model name") or platform.processor() or platform.machine()


def choose(in_out_seconds, out_in_seconds) -> str:
    """OUT_IN if the copy's median time is at least COPY_MUST_SAVE below Keras's layout's, else IN_OUT."""
    in_out, out_in = sorted(in_out_seconds)[len(in_out_seconds) // 2], sorted(out_in_seconds)[len(out_in_seconds) // 2]
    return OUT_IN if out_in < (1.0 - COPY_MUST_SAVE) * in_out else IN_OUT
