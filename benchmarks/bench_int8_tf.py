"""An experiment: bench_decode.py's protocol with the decoding step's products in int8, from TensorFlow itself.

  python benchmarks/bench_int8_tf.py                  # every step product in int8
  python benchmarks/bench_int8_tf.py --output_only    # only the output projection, the largest
  python benchmarks/bench_int8_tf.py --quick

Dynamic int8 as CTranslate2's: each weight in int8 with one scale per output channel, made once per
batch; each step's rows quantized per row, multiplied by an XLA s8 dot with an int32 result (TensorFlow's
own int8 BatchMatMulV3 on a CPU is several times slower than its float32), and rescaled to float32. Each
product is its own XLA cluster inside the decoder's graph: the decoding loop itself cannot be compiled,
its self-attention cache grows every step. Not shipped; docs/performance.md has the figures.
"""
import sys

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
    """A StepKernel's interface (depth, width, a call on rows) over an int8 copy of the weight."""

    def __init__(self, matrix, stored_as):
        in_out = matrix if stored_as == step_matmul.IN_OUT else tf.transpose(matrix)
        self.scale = tf.maximum(tf.reduce_max(tf.abs(in_out), axis=0, keepdims=True) / 127.0, 1e-30)
        self.weight = tf.cast(tf.round(in_out / self.scale), tf.int8)
        self.depth, self.width = (int(size) for size in in_out.shape)

    def __call__(self, rows):
        return int8_product(rows, self.weight, self.scale)


def use_int8(output_only: bool) -> None:
    float_add = step_matmul.StepKernels.add

    def add(self, owner, weight, stored_as=step_matmul.IN_OUT):
        if output_only and isinstance(owner, step_matmul.Dense):  # the output projection is the embedding's
            return float_add(self, owner, weight, stored_as)
        self._owners.append(owner)
        self._kernels.append(Int8StepKernel(tf.cast(weight, tf.float32), stored_as))

    step_matmul.StepKernels.add = add


if __name__ == "__main__":
    output_only = "--output_only" in sys.argv
    if output_only:
        sys.argv.remove("--output_only")
    use_int8(output_only)
    which = "the output projection's" if output_only else "all"
    print(f"decode: the next line has {which} step products in int8, through XLA", flush=True)
    bench_decode.main()
