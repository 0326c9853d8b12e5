"""A matmul of bfloat16 or float16 operands whose sums come out in float32.

The loss's logits are sums of 512 or more products. tf.matmul on bfloat16
operands rounds each sum to bfloat16's 8 bits: for a logit near 20 that is an
error of up to 0.04, in the loss and in the softmax its gradient starts from.
The products of bfloat16 values are exact in float32 and the matmul units
accumulate in float32 anyway; only the result's dtype forces the rounding.

TensorFlow's CPU kernels offer no bfloat16 x bfloat16 -> float32 matmul
(tf.matmul's output_type=float32, BatchMatMulV3, has no CPU kernel for
them), but compiled by XLA the same public call becomes one dot whose result
type is float32. The speed of this product against bfloat16 and float32
tf.matmul is in docs/performance.md.
"""
import tensorflow as tf


@tf.function(jit_compile=True)
def _xla_float32_product(a, b):
    # Compiled once per pair of shapes (about 0.1 s each); a training run sees one per batch shape.
    return tf.matmul(a, b, output_type=tf.float32)


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
    # Grappler's shape inference does not see into the compiled call: without EnsureShape its result
    # has unknown rank there, and Grappler's cost model logs "Error in PredictCost() for the op: ...
    # Softmax" for the loss's softmax of each slice, in every graph it optimises.
    return tf.ensure_shape(_narrow_operands_product(a, b), [None, None])


@tf.custom_gradient
def _narrow_operands_product(a, b):
    # XLA's dot has no registered gradient: the tape is kept off it and given the matmul's own.
    product = _xla_float32_product(tf.stop_gradient(a), tf.stop_gradient(b))

    def gradient(upstream):
        upstream = tf.cast(upstream, a.dtype)
        return tf.matmul(upstream, b, transpose_b=True), tf.matmul(a, upstream, transpose_a=True)

    return product, gradient
