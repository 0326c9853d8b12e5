"""Mixed precision: matmuls in float16 or bfloat16, variables, softmax and loss in float32.

The model already keeps the numerically delicate parts in float32 whatever
the policy: attention logits and softmax (layers/attention.py), the output
logits (SharedEmbedding.logits), LayerNorm statistics (Keras computes them in
float32 and casts back), the loss (losses.py, whose logits are summed in float32
from half-precision operands: float32_product.py) and beam scores.
"""
import contextlib

import keras

PRECISIONS = ("none", "mixed_float16", "mixed_bfloat16")


def check(precision: str) -> str:
    """Returns precision if it is one of PRECISIONS, else raises ValueError naming it."""
    if precision not in PRECISIONS:
        raise ValueError(f"mixed precision must be one of {', '.join(PRECISIONS)}; got {precision!r}")
    return precision


def compute_dtype(precision: str) -> str:
    """The dtype the matmuls run in under precision: "float32" for "none", else the policy's name."""
    return "float32" if check(precision) == "none" else precision


@contextlib.contextmanager
def layers_compute_in(precision: str):
    """Layers constructed inside the block compute in precision's dtype; their variables stay float32.

    A Keras layer takes the global dtype policy when it is constructed, so the
    policy is set only for the block and restored after it: models built
    later in the same process (a decoder, another test) are unaffected.

    Args:
      precision: one of PRECISIONS; "none" is float32.
    """
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(compute_dtype(precision))
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def loss_scaled(optimizer: keras.optimizers.Optimizer, precision: str) -> keras.optimizers.Optimizer:
    """optimizer wrapped in dynamic loss scaling under mixed_float16, else optimizer itself.

    float16 gradients underflow below ~6e-8 unless the loss is scaled up first;
    bfloat16 has float32's exponent range and needs no scaling.
    """
    if check(precision) == "mixed_float16":
        return keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer
