"""A decoding step's products through weights prepared once per decoded batch: the CPU speed mechanics.

A decoding step multiplies few rows (32 sentences x 4 beams = 128) by each
weight. On a CPU two things then decide the speed: the weight's layout,
Keras's [in, out] kernel or an [out, in] copy multiplied with transpose_b
(kernel_layout.py), and the op, MatMul or BatchMatMulV2, which uses every
core where MatMul keeps to one (matmul_threads.py). `StepMatmulSettings`
chooses both.

The whole interface is `StepKernel`: a weight prepared once (cast, laid
out, its op chosen) and called on a step's rows. The decoder's step
(decoding/cached_step.py) hands `StepKernelMaker.prepare` to the model, whose
layers give it their weights (layers/prepared.py, which joins several Dense
layers' kernels side by side) and multiply through what it returns in their
own cached `call`; without them (training, scoring, the full pass) the layers
multiply by the variables as Keras does. Nothing is set on the layers:
decoders of one model with different kernels may trace their steps at once,
from any threads. The settings are always passed in: nothing here reads the
environment (t2t_lite/environment.py does, for the commands).
"""
import dataclasses

import keras
import tensorflow as tf

from t2t_lite.ops.kernel_layout import IN_OUT, OUT_IN, STEP_ROWS, measured_layout, recorded_layout
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
    # A JSON file keeping the "auto" layout measured on this machine (kernel_layout.recorded_layout), so that
    # every process here multiplies alike; None measures once per process. The commands keep one in
    # ~/.cache/t2t_lite/ (environment.step_matmul_settings).
    layout_record: str | None = None

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
        dtype = keras.backend.standardize_dtype(dtype)
        return (recorded_layout(self.layout_record, STEP_ROWS, depth, width, dtype) if self.layout_record is not None
                else measured_layout(STEP_ROWS, depth, width, dtype))

    def resolved_op(self, depth: int, width: int, dtype) -> str:
        """MATMUL or BATCH_MATMUL for a [depth, width] weight at a step's STEP_ROWS rows."""
        if self.op != AUTO:
            return self.op
        return (step_matmul_op(STEP_ROWS, depth, width, tf.as_dtype(keras.backend.standardize_dtype(dtype)))
                if on_cpu() else MATMUL)


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
      bias: [out] added to the product, or None.
      activation: applied last (a Keras activation, e.g. a Dense layer's), or None.
    """

    def __init__(self, kernel, layout, stored_as=IN_OUT, op=MATMUL, bias=None, activation=None):
        if layout not in (IN_OUT, OUT_IN):
            raise ValueError(f"layout must be {IN_OUT!r} or {OUT_IN!r}, not {layout!r}")
        if op not in (MATMUL, BATCH_MATMUL):
            raise ValueError(f"op must be {MATMUL!r} or {BATCH_MATMUL!r}, not {op!r}")
        self.layout, self.op, self.bias, self.activation = layout, op, bias, activation
        self.matrix = kernel if layout == stored_as else tf.transpose(kernel)
        self.depth, self.width = map(int, self.matrix.shape if layout == IN_OUT else self.matrix.shape[::-1])

    def __call__(self, x):
        """x [..., in] -> [..., out], through a [R, in] x [in, out] product."""
        rows = x if len(x.shape) == 2 else tf.reshape(x, [-1, self.depth])  # [R, in]
        if self.op == BATCH_MATMUL:  # the same product, on every intra-op thread
            y = tf.raw_ops.BatchMatMulV2(x=rows, y=self.matrix, adj_y=self.layout == OUT_IN)
        else:
            y = tf.matmul(rows, self.matrix, transpose_b=self.layout == OUT_IN)
        if self.bias is not None:
            y = tf.nn.bias_add(y, self.bias)
        if self.activation is not None:
            y = self.activation(y)
        # Reshaped back as Keras's Dense does, which also keeps TensorFlow from fusing a following residual
        # addition into the product, where bfloat16 would round differently from the layers' own math.
        return y if len(x.shape) == 2 else tf.reshape(y, tf.concat([tf.shape(x)[:-1], [self.width]], axis=0))


class StepKernelMaker:
    """Prepares StepKernels in one dtype and layout, each with the op its shape multiplies fastest with.

    Made once per decoded batch, outside the decoding loop: the kernels are
    snapshots of the weights when made.

    Args:
      dtype: the compute dtype the weights are cast to.
      layout: IN_OUT or OUT_IN (StepMatmulSettings.resolved_layout).
      settings: chooses each weight's op.
    """

    def __init__(self, dtype, layout: str, settings: StepMatmulSettings = StepMatmulSettings()):
        self.dtype, self.layout, self.settings = dtype, layout, settings
        self.ops: dict[str, str] = {}  # "<in>x<out>" -> the op of each weight shape made so far

    def prepare(self, kernel, bias=None, activation=None, transposed=False) -> StepKernel:
        """A layer's weight prepared (layers/prepared.py's contract): kernel [in, out], or [out, in] if transposed,
        with an optional bias [out] and activation."""
        matrix = tf.cast(kernel, self.dtype)
        depth, width = map(int, matrix.shape[::-1] if transposed else matrix.shape)
        op = self.ops[f"{depth}x{width}"] = self.settings.resolved_op(depth, width, self.dtype)
        bias = None if bias is None else tf.cast(bias, self.dtype)
        return StepKernel(matrix, self.layout, stored_as=OUT_IN if transposed else IN_OUT, op=op, bias=bias,
                          activation=activation)


