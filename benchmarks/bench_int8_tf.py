"""An experiment: bench_decode.py's protocol with the decoding step's products in int8, from TensorFlow itself.

  python benchmarks/bench_int8_tf.py                  # every step product in int8
  python benchmarks/bench_int8_tf.py --output_only    # only the output projection, the largest
  python benchmarks/bench_int8_tf.py --quick
  python benchmarks/bench_int8_tf.py --products       # one step product alone, float32 against int8

Dynamic int8 as CTranslate2's: each weight in int8 with one scale per output channel, made once per
batch; each step's rows quantized per row, multiplied by an XLA s8 dot with an int32 result (TensorFlow's
own int8 BatchMatMulV3 on a CPU is several times slower than its float32), and rescaled to float32. Each
product is its own XLA cluster inside the decoder's graph: the decoding loop itself cannot be compiled,
its self-attention cache grows every step. Not shipped; docs/performance.md has the figures.
"""
import sys
import time

import numpy as np
import tensorflow as tf

import bench_decode
from t2t_lite.ops import step_matmul


@tf.function(jit_compile=True, autograph=False)
def int8_product(rows, weight, weight_scale):
    """rows [R, in] float32 x weight [in, out] int8 with weight_scale [1, out] -> [R, out] float32."""
    row_scale = tf.maximum(tf.reduce_max(tf.abs(rows), axis=-1, keepdims=True) / 127.0, 1e-30)
    quantized = tf.cast(tf.round(rows / row_scale), tf.int8)
    return tf.cast(tf.matmul(quantized, weight, output_type=tf.int32), rows.dtype) * row_scale * weight_scale


class Int8StepKernel:
    """A StepKernel's interface (depth, width, a call on rows) over an int8 copy of the weight; the bias and
    activation, if any, are applied to the rescaled product as a StepKernel's are."""

    def __init__(self, matrix, stored_as, bias=None, activation=None):
        in_out = matrix if stored_as == step_matmul.IN_OUT else tf.transpose(matrix)
        self.scale = tf.maximum(tf.reduce_max(tf.abs(in_out), axis=0, keepdims=True) / 127.0, 1e-30)
        self.weight = tf.cast(tf.round(in_out / self.scale), tf.int8)
        self.depth, self.width = (int(size) for size in in_out.shape)
        self.bias, self.activation = bias, activation

    def __call__(self, rows):
        y = int8_product(rows, self.weight, self.scale)
        if self.bias is not None:
            y = tf.nn.bias_add(y, tf.cast(self.bias, y.dtype))
        if self.activation is not None:
            y = self.activation(y)
        return y


def time_products(repeats: int = 100) -> None:
    """A decoding step's products alone (128 rows): float32, TensorFlow's int8 op, the XLA int8 product."""
    for depth, width in [(512, 512), (512, 2048), (2048, 512), (512, 32768)]:
        rows = tf.constant(np.random.default_rng(0).standard_normal((128, depth), np.float32))
        weight = tf.constant(np.random.default_rng(1).standard_normal((depth, width), np.float32) * 0.05)
        kernel = Int8StepKernel(weight, step_matmul.IN_OUT)
        quantized_rows = tf.cast(tf.round(rows * 20), tf.int8)
        candidates = {
            "float32 MatMul": tf.function(lambda x: tf.matmul(x, weight)),
            "int8 BatchMatMulV3 (Eigen), ints only": tf.function(
                lambda x: tf.raw_ops.BatchMatMulV3(x=quantized_rows, y=kernel.weight, Tout=tf.int32)),
            "int8 through XLA, quantizing included": tf.function(kernel),
        }
        times = {}
        for name, product in candidates.items():
            product(rows).numpy()
            start = time.perf_counter()
            for _ in range(repeats):
                result = product(rows)
            result.numpy()
            times[name] = (time.perf_counter() - start) / repeats * 1e3
        print(f"products: [128, {depth}] x [{depth}, {width}]: "
              + ", ".join(f"{name} {ms:.2f} ms" for name, ms in times.items()), flush=True)


def use_int8(output_only: bool) -> None:
    """Every step kernel the decoder prepares in int8 (StepKernelMaker.dense makes its kernels through .weight
    too), or with output_only only the output projection: the embedding, the one weight stored [out, in]."""
    float_weight = step_matmul.StepKernelMaker.weight

    def weight(self, weight, stored_as=step_matmul.IN_OUT, bias=None, activation=None):
        if output_only and stored_as != step_matmul.OUT_IN:  # a Dense layer's kernel, kept in float
            return float_weight(self, weight, stored_as, bias, activation)
        return Int8StepKernel(tf.cast(weight, tf.float32), stored_as, bias, activation)

    step_matmul.StepKernelMaker.weight = weight


if __name__ == "__main__":
    if "--products" in sys.argv:
        time_products()
        sys.exit()
    output_only = "--output_only" in sys.argv
    if output_only:
        sys.argv.remove("--output_only")
    use_int8(output_only)
    which = "the output projection's" if output_only else "all"
    print(f"decode: the next line has {which} step products in int8, through XLA", flush=True)
    bench_decode.main()
