"""Speed mechanics below the decoder: how a decoding step multiplies on a CPU, and a float32-result product.

  step_matmul.py     the one interface: StepMatmulSettings, and StepKernel (a weight prepared for a step's products)
  kernel_layout.py   which weight layout is faster here, measured once per process (CPU only)
  matmul_threads.py  which op spreads a small product over every core (TensorFlow's threading rule)
  float32_product.py a bfloat16 / float16 matmul whose sums come out in float32 (the training loss)

The layers know none of these choices: the decoder's step (decoding/cached_step.py) hands
StepKernelMaker.prepare to the model, whose layers give it their weights and multiply through what it returns
(layers/prepared.py).
"""
from t2t_lite.ops.step_matmul import StepKernel, StepKernelMaker, StepMatmulSettings

__all__ = ["StepKernel", "StepKernelMaker", "StepMatmulSettings"]
