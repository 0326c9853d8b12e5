"""Which TensorFlow op multiplies a decoding step's small matmul on every core.

TensorFlow's oneDNN MatMul kernel runs a product on one thread when its
operands fit the L2 cache: itemsize * (m n + k (m + n)) < L2
(`ExecuteSingleThreadedGemm` in tensorflow/core/kernels/mkl/
mkl_matmul_ops_common.h). A decoding step has few rows (32 sentences x 4
beams = 128), so on a CPU with 2 MiB of L2 per core every [512, 512]
projection of transformer_base qualifies, and the other cores wait: a step's
projections mostly run one after another. TensorFlow's BatchMatMulV2 kernel
takes 2-D operands too, has no such rule and spreads the same product over
every intra-op thread, which made such products and whole float32 decoding
batches faster on a 2-core CPU (docs/performance.md).

So a step kernel uses BatchMatMulV2 exactly where MatMul would keep to one
thread and more than one is available. Where MatMul already spreads its
work, it stays: there BatchMatMulV2 was slower.
"""
import contextlib
import functools
import glob
import os

import tensorflow as tf

MATMUL, BATCH_MATMUL = "matmul", "batch_matmul"
# TensorFlow's kHeuristicMultiplier: single-threaded below 1.01 x L2.
L2_MARGIN = 1.01


def parse_cache_size(text: str) -> int:
    """Bytes in a sysfs cache size such as '2048K' or '2M'."""
    text = text.strip().upper()
    return int(text.rstrip("KMG")) * {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)


@functools.lru_cache(maxsize=None)
def l2_cache_bytes() -> int | None:
    """One core's L2 cache in bytes, from Linux's sysfs; None where it is not reported."""
    for index in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*")):
        with (contextlib.suppress(OSError, ValueError), open(os.path.join(index, "level")) as level,
              open(os.path.join(index, "size")) as size):
            if level.read().strip() == "2":
                return parse_cache_size(size.read())
    return None


def intra_op_threads() -> int:
    """Threads TensorFlow gives one op: its setting, or (0, the default) every CPU this process may use."""
    return tf.config.threading.get_intra_op_parallelism_threads() or len(os.sched_getaffinity(0))


def matmul_keeps_to_one_thread(rows: int, depth: int, width: int, itemsize: int, l2_bytes: int) -> bool:
    """TensorFlow's rule: oneDNN's MatMul of [rows, depth] x [depth, width] runs on one thread."""
    return itemsize * (rows * width + depth * (rows + width)) < l2_bytes * L2_MARGIN


def step_matmul_op(rows: int, depth: int, width: int, dtype) -> str:
    """MATMUL or BATCH_MATMUL: the op that multiplies [rows, depth] x [depth, width] on every core here."""
    l2_bytes, threads = l2_cache_bytes(), intra_op_threads()
    if l2_bytes is None or threads < 2:
        return MATMUL
    return BATCH_MATMUL if matmul_keeps_to_one_thread(rows, depth, width, tf.as_dtype(dtype).size, l2_bytes) else MATMUL
