"""Dense projections through pre-transposed kernels, for the small matmuls of step-by-step decoding.

A decoding step multiplies 128 rows (32 sentences x 4 beams) by each
[512, 512]-to-[2048, 512] kernel. At those shapes oneDNN on a 2-core AVX2
CPU ran `matmul(x, W_t, transpose_b=True)` on an [out, in] copy 1.2-1.5x
faster than `matmul(x, W)` on Keras's [in, out] kernel (benchmarks/RESULTS.md).
The copies are made once per decoded batch, outside the decoding loop.
"""
import keras
import tensorflow as tf


class TransposedKernels:
    """The [out, in] kernels of every Dense layer under some layers, cast to one dtype.

    A plain object rather than a dict so that Keras passes it to `call` untouched.

    Args:
      layers: layers whose Dense sub-layers (at any depth) get a transposed copy.
      dtype: the compute dtype the copies are cast to.
    """

    def __init__(self, layers, dtype):
        self._kernels = {}
        for layer in layers:
            # _flatten_layers walks every sub-layer; Keras 3 has no public recursive walk.
            for sublayer in layer._flatten_layers(include_self=True, recursive=True):
                if isinstance(sublayer, keras.layers.Dense):
                    self._kernels[id(sublayer)] = tf.transpose(tf.cast(sublayer.kernel, dtype))  # [out, in]

    def __contains__(self, dense):
        return id(dense) in self._kernels

    def project(self, dense, x):
        """dense(x) through its transposed kernel: x [..., in] -> [..., out] (bias and activation included)."""
        kernel = self._kernels[id(dense)]  # [out, in]
        rows = tf.reshape(x, [-1, kernel.shape[1]])  # [R, in]
        y = tf.matmul(rows, kernel, transpose_b=True)  # [R, out]
        if dense.use_bias:
            y = tf.nn.bias_add(y, tf.cast(dense.bias, y.dtype))
        if dense.activation is not None:
            y = dense.activation(y)
        return tf.reshape(y, tf.concat([tf.shape(x)[:-1], [kernel.shape[0]]], axis=0))


def project(dense, x, kernels=None):
    """dense(x), through `kernels`' transposed copy of its kernel when it has one."""
    if kernels is not None and dense in kernels:
        return kernels.project(dense, x)
    return dense(x)
