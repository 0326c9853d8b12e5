"""Speed mechanics below the layers: how a decoding step multiplies on a CPU, and a float32-result product.

  step_matmul.py     the one interface: StepMatmulSettings, StepKernels (passed to a step's call), Dense, product
  kernel_layout.py   which weight layout is faster here, measured once per process (CPU only)
  matmul_threads.py  which op spreads a small product over every core (TensorFlow's threading rule)
  float32_product.py a bfloat16 / float16 matmul whose sums come out in float32 (the training loss)

The layers call their Dense sub-layers as usual and know nothing of these choices: a decoding step's call
takes an optional `kernels=` (StepKernels) that they hand on, and None multiplies by the weights as they are.
"""
from t2t_lite.ops.step_matmul import Dense, StepKernels, StepMatmulSettings, product

__all__ = ["Dense", "StepKernels", "StepMatmulSettings", "product"]
