"""Shared pytest set-up: quiet TensorFlow, fixed seeds."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

# pytest-xdist runs the suite in one worker process per core (pyproject.toml).
# Each worker and the command-line runs its tests start get one intra-op thread:
# two workers each running two-thread kernels on two cores spent 21 min of CPU
# where the serial suite spent 16, for a 1.18x shorter run.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
