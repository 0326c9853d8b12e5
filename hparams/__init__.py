"""Registered hparams sets; importing this package registers them."""
from t2t_lite.hparams import parsing, transformer  # noqa: F401
