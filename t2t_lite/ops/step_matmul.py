"""A decoding step's products through weights prepared once per decoded batch: the CPU speed mechanics.

A decoding step multiplies few rows (32 sentences x 4 beams = 128) by each
weight. On a CPU two things then decide the speed: the weight's layout,
Keras's [in, out] kernel or an [out, in] copy multiplied with transpose_b
(kernel_layout.py), and the op, MatMul or BatchMatMulV2, which uses every
core where MatMul keeps to one (matmul_threads.py). `StepMatmulSettings`
chooses both.

The whole interface is one argument. A decoder prepares the `StepKernels` of
the layers its steps run and passes them down its step's call,
`model.decode(..., kernels=kernels)`; each layer hands them on to its
sub-layers, and each `Dense`, and each `product(owner, ..., kernels)` of an
owner given a weight, multiplies through the StepKernel prepared for it, if
any; a layer given one joined for itself (`add_joined`, its cached
self-attention's query, key and value) makes several products one. With the
default `kernels=None`, `Dense` is keras.layers.Dense and `product` is
tf.matmul, so training and export never see any of this.
Nothing is set on the layers: decoders of one model with different kernels
may trace their steps at once, from any threads. The settings are always
passed in: nothing here reads the environment (t2t_lite/environment.py does,
for the commands).
"""
import dataclasses

import keras
import tensorflow as tf

from t2t_lite.ops.kernel_layout import IN_OUT, OUT_IN, STEP_ROWS, measured_layout
from t2t_lite.ops.matmul_threads import BATCH_MATMUL, MATMUL, step_matmul_op

AUTO = "auto"


@dataclasses.dataclass(frozen=True)
class StepMatmulSettings:
    """How a decoding step multiplies by its weights; the default (auto, auto) is the fastest this CPU knows."""

    # "auto": on a CPU, the faster of the two layouts, measured once per process and dtype at the output
    # projection's shape (about a second, at the first decode); on a GPU or TPU, in_out without measuring.
    # "in_out" (Keras's kernel as it is) or "out_in" (a transposed copy) fixes it and skips the measurement.
    layout: str = AUTO
    # "auto": on a CPU, BatchMatMulV2 where TensorFlow's MatMul would run a product on one thread of several
    # (a rule, nothing measured); elsewhere MatMul. "matmul" or "batch_matmul" fixes it.
    op: str = AUTO

    def __post_init__(self):
        if self.layout not in (AUTO, IN_OUT, OUT_IN):
            raise ValueError(f"layout must be {AUTO!r}, {IN_OUT!r} or {OUT_IN!r}, got {self.layout!r}")
        if self.op not in (AUTO, MATMUL, BATCH_MATMUL):
            raise ValueError(f"op must be {AUTO!r}, {MATMUL!r} or {BATCH_MATMUL!r}, got {self.op!r}")

    def resolved_layout(self, depth: int, width: int, dtype) -> str:
        """IN_OUT or OUT_IN for every weight, chosen at the step's [STEP_ROWS, depth] x [depth, width] product."""
        if self.layout != AUTO:
            return self.layout
        if not on_cpu():
            return IN_OUT  # the measurement is about oneDNN's CPU kernels
        return measured_layout(STEP_ROWS, depth, width, keras.backend.standardize_dtype(dtype))

    def resolved_op(self, depth: int, width: int, dtype) -> str:
        """MATMUL or BATCH_MATMUL for a [depth, width] weight at a step's STEP_ROWS rows."""
        if self.op != AUTO:
            return self.op
        if not on_cpu():
            return MATMUL
        return step_matmul_op(STEP_ROWS, depth, width, tf.as_dtype(keras.backend.standardize_dtype(dtype)))


def on_cpu() -> bool:
    """Whether TensorFlow places a model's matmuls on the CPU: it sees no GPU or TPU."""
    return not (tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))


class StepKernel:
    """A weight [in, out] kept in one layout, as it is (IN_OUT) or as an [out, in] copy (OUT_IN), and one op.

    Args:
      kernel: the weight, [in, out] (or [out, in] when stored_as is OUT_IN), already in the compute dtype.
      layout: IN_OUT or OUT_IN, the layout to multiply in.
      stored_as: the layout `kernel` comes in.
      op: MATMUL or BATCH_MATMUL, the TensorFlow op to multiply with.
      bias: [out] added to the product, or None (a Dense adds its own).
    """

    def __init__(self, kernel, layout, stored_as=IN_OUT, op=MATMUL, bias=None):
        if layout not in (IN_OUT, OUT_IN):
            raise ValueError(f"layout must be {IN_OUT!r} or {OUT_IN!r}, not {layout!r}")
        if op not in (MATMUL, BATCH_MATMUL):
            raise ValueError(f"op must be {MATMUL!r} or {BATCH_MATMUL!r}, not {op!r}")
        self.layout, self.op, self.bias = layout, op, bias
        self.matrix = kernel if layout == stored_as else tf.transpose(kernel)
        self.depth, self.width = (int(size) for size in (self.matrix.shape if layout == IN_OUT
                                                         else self.matrix.shape[::-1]))

    def __call__(self, rows):
        """rows [R, in] -> [R, out]."""
        if self.op == BATCH_MATMUL:  # the same product, on every intra-op thread
            y = tf.raw_ops.BatchMatMulV2(x=rows, y=self.matrix, adj_y=self.layout == OUT_IN)
        else:
            y = tf.matmul(rows, self.matrix, transpose_b=self.layout == OUT_IN)
        return y if self.bias is None else tf.nn.bias_add(y, self.bias)


class StepKernels:
    """Prepared StepKernels, one per owner (a Dense, or a layer with a weight), in one dtype and layout.

    Made once per decoded batch, outside the decoding loop: the copies are
    snapshots of the weights when made. The decoder that made them passes
    them to its step's call; the layers only read them.

    Args:
      dtype: the compute dtype the weights are cast to.
      layout: IN_OUT or OUT_IN (StepMatmulSettings.resolved_layout).
      settings: chooses each weight's op.
    """

    def __init__(self, dtype, layout: str, settings: StepMatmulSettings = StepMatmulSettings()):
        self.dtype, self.layout, self.settings = dtype, layout, settings
        self._owners, self._kernels = [], []

    def add(self, owner, weight, stored_as=IN_OUT, bias=None) -> None:
        """Prepares `weight` ([in, out], or [out, in] if stored_as is OUT_IN) and an optional bias [out]
        for `owner`'s products."""
        matrix = tf.cast(weight, self.dtype)
        depth, width = (int(size) for size in (matrix.shape if stored_as == IN_OUT else matrix.shape[::-1]))
        op = self.settings.resolved_op(depth, width, self.dtype)
        bias = None if bias is None else tf.cast(bias, self.dtype)
        self._owners.append(owner)
        self._kernels.append(StepKernel(matrix, self.layout, stored_as=stored_as, op=op, bias=bias))

    def add_joined(self, owner, denses) -> None:
        """Prepares one product for `owner` that does the products of several Dense layers on the same rows:
        their kernels side by side ([in, out_1 + out_2 + ...]), their biases too; a step's one larger product
        runs faster than its few small ones."""
        if any(dense.activation not in (None, keras.activations.linear) for dense in denses):
            raise ValueError("only Dense layers without an activation can be joined")
        kernel = tf.concat([tf.cast(dense.kernel, self.dtype) for dense in denses], axis=1)
        biases = [tf.cast(dense.bias, self.dtype) if dense.use_bias else tf.zeros([dense.units], self.dtype)
                  for dense in denses]
        self.add(owner, kernel, bias=tf.concat(biases, axis=0) if any(d.use_bias for d in denses) else None)

    def add_dense_layers(self, layers, skip=()) -> None:
        """Prepares the kernel of every `Dense` under `layers`, at any depth, but those in `skip` (e.g. joined)."""
        for layer in layers:
            for dense in dense_sublayers(layer):
                if not any(dense is skipped for skipped in skip):
                    self.add(dense, dense.kernel)

    def get(self, owner) -> StepKernel | None:
        """The kernel prepared for `owner`, or None (owners are told apart by identity, not equality)."""
        return next((kernel for known, kernel in zip(self._owners, self._kernels) if known is owner), None)


def dense_sublayers(layer) -> list:
    """Every `Dense` at any depth under `layer` (itself included), found through public attributes.

    Keras 3 has no public recursive walk over sub-layers; t2t-lite's layers
    keep theirs in public attributes (or lists of them), which this follows.
    """
    seen, pending = [], [layer]
    while pending:
        current = pending.pop()
        if any(current is layer for layer in seen):  # a shared sub-layer is reached twice
            continue
        seen.append(current)
        for name, value in vars(current).items():
            if name.startswith("_"):
                continue
            values = value if isinstance(value, (list, tuple)) else [value]
            pending.extend(v for v in values if isinstance(v, keras.layers.Layer))
    return [layer for layer in seen if isinstance(layer, Dense)]


def product(owner, rows, weight, stored_as=IN_OUT, kernels: StepKernels | None = None):
    """rows [R, in] times `weight` ([in, out], or [out, in] if stored_as is OUT_IN) -> [R, out].

    Through the StepKernel `kernels` holds for `owner`, if any; else tf.matmul
    with the weight cast to the rows' dtype.
    """
    kernel = None if kernels is None else kernels.get(owner)
    if kernel is not None:
        return kernel(rows)
    return tf.matmul(rows, tf.cast(weight, rows.dtype), transpose_b=stored_as == OUT_IN)


@keras.saving.register_keras_serializable(package="t2t_lite")
class Dense(keras.layers.Dense):
    """keras.layers.Dense, whose product runs through the StepKernel `kernels` holds for it, if any."""

    def call(self, inputs, training=None, kernels: StepKernels | None = None):
        """inputs [..., in] -> [..., out]; kernels: prepared step kernels, or None for the layer's own."""
        kernel = None if kernels is None else kernels.get(self)
        if kernel is None:
            return super().call(inputs, training=training)
        y = kernel(tf.reshape(inputs, [-1, kernel.depth]))  # [R, out]
        if self.use_bias:
            y = tf.nn.bias_add(y, tf.cast(self.bias, y.dtype))
        if self.activation is not None:
            y = self.activation(y)
        return tf.reshape(y, tf.concat([tf.shape(inputs)[:-1], [kernel.width]], axis=0))
