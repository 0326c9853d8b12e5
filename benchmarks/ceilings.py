"""What this CPU's matrix products can do, measured in the benchmark's own process: the ceilings MFU is against.

    python benchmarks/ceilings.py        # float32 and bfloat16, 4096^3 and a decoding step's shapes

A ceiling is the median GFLOP/s of one tf.matmul in a tf.function after warm-up, as the peers measured
theirs (float32, 4096^3). bfloat16 is measured beside it because on CPUs that multiply it natively
(avx512_bf16, AMX) it is several times faster, and a model running in bfloat16 is measured against that.
"""
import time

import numpy as np

# Before anything imports TensorFlow: t2t_lite sets the allocator TensorFlow reads when it makes its first tensor.
import t2t_lite  # noqa: F401,E402
from t2t_lite.precision import onednn_crashes_bfloat16  # noqa: E402

# The products of a transformer_base decoding step at the protocol's 32 sentences x beam 4: the output
# projection onto the 32,768 ids and a feed-forward layer.
STEP_SHAPES = ((128, 512, 32_768), (128, 512, 2_048))


def matmul_gflops(rows: int, depth: int, width: int, dtype: str = "float32", reps: int = 10) -> float:
    """Median GFLOP/s of a [rows, depth] x [depth, width] tf.matmul in `dtype`."""
    import tensorflow as tf

    a = tf.cast(tf.random.stateless_normal((rows, depth), seed=(1, 2)), dtype)
    b = tf.cast(tf.random.stateless_normal((depth, width), seed=(3, 4)), dtype)
    matmul = tf.function(tf.matmul)
    for _ in range(3):
        matmul(a, b).numpy()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        matmul(a, b).numpy()
        times.append(time.perf_counter() - start)
    return 2.0 * rows * depth * width / float(np.median(times)) / 1e9


def ceiling_gflops(dtype: str = "float32", n: int = 4096) -> float:
    """The n^3 ceiling in `dtype` (the peers' is float32 at 4096)."""
    return matmul_gflops(n, n, n, dtype)


def compute_dtype(mixed_precision: str) -> str:
    """The dtype a model's matmuls run in under a t2t-lite --mixed_precision value."""
    return "bfloat16" if "bfloat16" in mixed_precision else "float16" if "float16" in mixed_precision else "float32"


def measurable(dtypes):
    """The dtypes this process can multiply: not bfloat16 where TensorFlow would crash on it (oneDNN capped
    below AVX-512 on a CPU with it: precision.onednn_crashes_bfloat16), which is said in a line."""
    if "bfloat16" in dtypes and onednn_crashes_bfloat16():
        print("ceiling bfloat16: not measured (oneDNN capped below AVX-512 on a CPU with it crashes on bfloat16; "
              "set TF_ENABLE_ONEDNN_OPTS=0 to measure Eigen's)", flush=True)
        return tuple(dtype for dtype in dtypes if dtype != "bfloat16")
    return tuple(dtypes)


def print_ceilings(dtypes=("float32", "bfloat16")) -> dict[str, float]:
    """Prints and returns the 4096^3 ceiling of each dtype (lines begin "ceiling", which run_protocol.sh logs)."""
    found = {}
    for dtype in measurable(dtypes):
        found[dtype] = ceiling_gflops(dtype)
        print(f"ceiling {dtype} matmul (4096^3, median of 10): {found[dtype]:.1f} GFLOP/s", flush=True)
    if len(found) > 1:
        print(f"ceiling ratio bfloat16/float32: {found['bfloat16'] / found['float32']:.2f}x", flush=True)
    return found


def print_step_ceilings() -> None:
    """Prints each STEP_SHAPES product's GFLOP/s in float32 and bfloat16 (lines begin "ceiling")."""
    for rows, depth, width in STEP_SHAPES:
        figures = ", ".join(f"{dtype} {matmul_gflops(rows, depth, width, dtype):.0f}"
                            for dtype in measurable(("float32", "bfloat16")))
        print(f"ceiling at a step's [{rows},{depth}]x[{depth},{width}]: {figures} GFLOP/s", flush=True)


if __name__ == "__main__":
    print_ceilings()
    print_step_ceilings()
