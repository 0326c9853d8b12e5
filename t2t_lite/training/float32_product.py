"""A matmul of bfloat16 or float16 operands whose sums come out in float32.

The loss's logits are sums of 512 or more products. tf.matmul on bfloat16
operands rounds each sum to bfloat16's 8 bits: for a logit near 20 that is an
error of up to 0.04, in the loss and in the softmax its gradient starts from.
The products of bfloat16 values are exact in float32 and the matmul units
accumulate in float32 anyway; only the result's dtype forces the rounding.

TensorFlow's CPU kernels offer no bfloat16 x bfloat16 -> float32 matmul
(BatchMatMulV3 with Tout=float32 has no CPU kernel for them), but XLA's dot
takes a result type. Measured for a [512, 512] x [512, 32768] product
(benchmarks/RESULTS.md): on a Xeon with AMX, bfloat16 tf.matmul 29.5 ms, this
41.5 ms, float32 tf.matmul 99 ms (sitting 10); on a Zen 5 with avx512_bf16 and
no AMX, 25.0, 26.0 and 52.5 ms (sitting 11).
"""
import tensorflow as tf
# Private modules: XLA's dot with a result type has no public Python wrapper.
from tensorflow.compiler.tf2xla.python import xla
from tensorflow.compiler.xla import xla_data_pb2

# a [N, D] x b [D, V]: contract a's columns with b's rows; no batch dimensions.
_MATRIX_PRODUCT = xla_data_pb2.DotDimensionNumbers(lhs_contracting_dimensions=[1], rhs_contracting_dimensions=[0])


@tf.function(jit_compile=True)
def _xla_float32_product(a, b):
    # Compiled once per pair of shapes (about 0.1 s each); a training run sees one per batch shape.
    return xla.dot_general(a, b, _MATRIX_PRODUCT, None, preferred_element_type=tf.float32)


def float32_product(a, b):
    """a [N, D] @ b [D, V] as float32, accumulated in float32 and never rounded to a narrower type.

    Args:
      a, b: matrices of one dtype: float32, bfloat16 or float16.
    Returns:
      float32 [N, V].
    """
    if a.dtype != b.dtype:
        raise ValueError(f"float32_product needs operands of one dtype; got {a.dtype.name} and {b.dtype.name}")
    if a.dtype == tf.float32:
        return tf.matmul(a, b)
    return _narrow_operands_product(a, b)


@tf.custom_gradient
def _narrow_operands_product(a, b):
    # XLA's dot has no registered gradient: the tape is kept off it and given the matmul's own.
    product = _xla_float32_product(tf.stop_gradient(a), tf.stop_gradient(b))

    def gradient(upstream):
        upstream = tf.cast(upstream, a.dtype)
        return tf.matmul(upstream, b, transpose_b=True), tf.matmul(a, upstream, transpose_a=True)

    return product, gradient
