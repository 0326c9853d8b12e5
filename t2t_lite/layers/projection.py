"""Dense projections through kernels laid out for step-by-step decoding's small matmuls.

A decoding step multiplies 128 rows (32 sentences x 4 beams) by each
[512, 512]-to-[2048, 512] kernel, and at those shapes the faster layout,
Keras's [in, out] kernel or an [out, in] copy multiplied with transpose_b,
depends on the CPU and the dtype (layers/kernel_layout.py), and so does the
op that spreads a small product over every core (layers/matmul_threads.py).
The kernels are made once per decoded batch, outside the decoding loop.
"""
import keras
import tensorflow as tf

from t2t_lite.layers.kernel_layout import IN_OUT, OUT_IN, STEP_ROWS
from t2t_lite.layers.matmul_threads import BATCH_MATMUL, MATMUL, step_matmul_op


class StepKernel:
    """A weight [in, out] kept in one layout: as it is (IN_OUT), or as an [out, in] copy (OUT_IN).

    Args:
      kernel: the weight, [in, out] (or [out, in] when stored_as is OUT_IN), already in the compute dtype.
      layout: IN_OUT or OUT_IN, the layout to multiply in.
      stored_as: the layout `kernel` comes in.
      op: MATMUL or BATCH_MATMUL, the TensorFlow op to multiply with; None
        takes the one that uses every core at a decoding step's STEP_ROWS rows.
    """

    def __init__(self, kernel, layout, stored_as=IN_OUT, op=None):
        if layout not in (IN_OUT, OUT_IN):
            raise ValueError(f"layout must be {IN_OUT!r} or {OUT_IN!r}, not {layout!r}")
        self.layout = layout
        self.matrix = kernel if layout == stored_as else tf.transpose(kernel)
        depth, self.width = (int(size) for size in (self.matrix.shape if layout == IN_OUT else self.matrix.shape[::-1]))
        self.op = op or step_matmul_op(STEP_ROWS, depth, self.width, self.matrix.dtype)
        if self.op not in (MATMUL, BATCH_MATMUL):
            raise ValueError(f"op must be {MATMUL!r} or {BATCH_MATMUL!r}, not {self.op!r}")

    def __call__(self, rows):
        """rows [R, in] -> [R, out]."""
        if self.op == BATCH_MATMUL:  # the same product, on every intra-op thread
            return tf.raw_ops.BatchMatMulV2(x=rows, y=self.matrix, adj_y=self.layout == OUT_IN)
        return tf.matmul(rows, self.matrix, transpose_b=self.layout == OUT_IN)


class DecodingKernels:
    """Every Dense kernel under some layers as a StepKernel in one dtype and layout.

    A plain object rather than a dict so that Keras passes it to `call` untouched.

    Args:
      layers: layers whose Dense sub-layers (at any depth) get a StepKernel.
      dtype: the compute dtype the kernels are cast to.
      layout: IN_OUT or OUT_IN (kernel_layout.faster_layout measures which).
    """

    def __init__(self, layers, dtype, layout):
        self._kernels = {}
        for layer in layers:
            # _flatten_layers walks every sub-layer; Keras 3 has no public recursive walk.
            for sublayer in layer._flatten_layers(include_self=True, recursive=True):
                if isinstance(sublayer, keras.layers.Dense):
                    self._kernels[id(sublayer)] = StepKernel(tf.cast(sublayer.kernel, dtype), layout)

    def __contains__(self, dense):
        return id(dense) in self._kernels

    def project(self, dense, x):
        """dense(x) through its StepKernel: x [..., in] -> [..., out] (bias and activation included)."""
        kernel = self._kernels[id(dense)]
        y = kernel(tf.reshape(x, [-1, x.shape[-1]]))  # [R, out]
        if dense.use_bias:
            y = tf.nn.bias_add(y, tf.cast(dense.bias, y.dtype))
        if dense.activation is not None:
            y = dense.activation(y)
        return tf.reshape(y, tf.concat([tf.shape(x)[:-1], [kernel.width]], axis=0))


def project(dense, x, kernels=None):
    """dense(x), through `kernels`' StepKernel for it when it has one."""
    if kernels is not None and dense in kernels:
        return kernels.project(dense, x)
    return dense(x)
