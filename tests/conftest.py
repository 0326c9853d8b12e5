"""Shared pytest set-up: quiet TensorFlow, and the trained runs modules share (trained_runs.py)."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from trained_runs import multi30k_run, reverse_run  # noqa: E402,F401  (session fixtures)
