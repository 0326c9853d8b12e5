"""Dense layers' products prepared for a decoding step: the one place a step's fast kernels meet the layers.

A decoding step multiplies a few rows by each weight, where the weight's layout and the op matter on a CPU
(t2t_lite/ops/step_matmul.py). A layer hands its Dense layers' weights to the step's `prepare` once per batch
and gets back callables its own `call` then multiplies through; nothing is set on the layer. A Dense that is
not a plain keras.layers.Dense (a user's own) is never prepared: its layer multiplies through it as it trains.
"""
import keras
from keras import ops


def plain_denses(*denses) -> bool:
    """Whether every one is a keras.layers.Dense itself, whose product is x W + b then its activation."""
    return all(type(dense) is keras.layers.Dense for dense in denses)


def dense_product(prepare, *denses):
    """The product of Dense layers on the same rows as one prepared callable, rows [R, in] -> [R, out_1 + ...].

    Their kernels side by side and their biases too: one larger product runs faster than a few small ones.
    One layer keeps its activation; joined ones must have none.

    Args:
      prepare: (kernel [in, out], bias [out] or None, activation or None) -> a callable on rows.
      denses: plain keras Dense layers (plain_denses), built.
    """
    activations = [dense.activation for dense in denses if dense.activation not in (None, keras.activations.linear)]
    if activations and len(denses) > 1:
        raise ValueError("only Dense layers without an activation can be joined")
    kernel = ops.concatenate([dense.kernel for dense in denses], axis=1) if len(denses) > 1 else denses[0].kernel
    biases = [dense.bias if dense.use_bias else ops.zeros([dense.units], dense.kernel.dtype) for dense in denses]
    bias = (ops.concatenate(biases, axis=0) if len(biases) > 1 else biases[0]) \
        if any(dense.use_bias for dense in denses) else None
    return prepare(kernel, bias, activations[0] if activations else None)
