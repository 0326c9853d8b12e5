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

# Keras 3 picks its backend at import time; t2t-lite is TensorFlow all the way
# down (tf.data, tf-text, SavedModel), so make that the default.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

__version__ = "0.1.0"
