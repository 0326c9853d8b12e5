"""t2t-lite: the Transformer of "Attention Is All You Need" on TensorFlow 2 / Keras 3.

Shape letters used in every docstring and shape comment:
  B      batch size (sentences)
  T_src  source length, T_tgt target length, T when either
  D      d_model, the model width
  F      d_ff, the feed-forward inner width
  H      attention heads; Dk / Dv the per-head key / value width
  V      vocabulary size
  K      beam size
"""
import os
import platform
import sys

# Keras 3 picks its backend at import time; t2t-lite is TensorFlow all the way
# down (tf.data, tf-text, SavedModel), so make that the default.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

# TensorFlow's default CPU allocator hands every tensor to malloc, which maps
# large blocks fresh from the kernel and returns them when freed: a training
# step of transformer_base allocates gigabytes of logits and gradients, and
# the page faults that refill them showed up as 13 % system time. The BFC
# allocator (TensorFlow's GPU allocator, offered for CPUs through this
# variable) keeps freed memory for the next step: 1.17x faster steps for 0.75
# GiB more peak RSS (docs/performance.md). It is read when TensorFlow makes
# its first CPU tensor, so importing t2t_lite before TensorFlow allocates
# anything applies it; set TF_CPU_ALLOCATOR_USE_BFC=false to keep malloc.
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

# TensorFlow's x86 builds run matmuls and convolutions through oneDNN only on
# CPUs with AVX-512 VNNI/BF16 or AMX; elsewhere (an AVX2 EPYC, say) they fall
# back to Eigen, which reached 92 GFLOP/s on a 4096^3 matmul where oneDNN
# reached 179 on the same 2-core AVX2 machine, and transformer_base trained
# 1.31x faster (docs/performance.md). TensorFlow reads the variable when it
# is imported; set TF_ENABLE_ONEDNN_OPTS=0 to keep Eigen.
if platform.machine().lower() in ("x86_64", "amd64"):
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

__version__ = "0.2.0"

# setup.py installs problems/, hparams/ and bin/ as t2t_lite.problems, .hparams and .bin. Python started in
# a checkout imports this directory instead of the installed package (the working directory comes first on
# sys.path), where they sit beside it: the checkout's root then joins the package's path so that they resolve
# to the checkout's own, as an editable install maps them.
_checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if not os.path.isdir(os.path.join(__path__[0], "problems")) and all(
        os.path.isfile(os.path.join(_checkout, name, "__init__.py")) for name in ("problems", "hparams", "bin")):
    __path__.append(_checkout)

# Read, not imported: `import t2t_lite` stays light. Keras chose its backend already if it was imported first.
_backend = sys.modules["keras"].backend.backend() if "keras" in sys.modules else os.environ["KERAS_BACKEND"]
if _backend != "tensorflow":  # TensorFlow's ops on another backend's tensors fail far from here
    raise ImportError(f"t2t-lite runs on Keras's TensorFlow backend, not {_backend!r} "
                      f"(KERAS_BACKEND={os.environ.get('KERAS_BACKEND')!r}): unset KERAS_BACKEND or set it to "
                      "tensorflow, and import t2t_lite before keras")

from t2t_lite.training.api import train  # noqa: E402
from t2t_lite.inference.translator import Translator  # noqa: E402

__all__ = ["Translator", "train"]
