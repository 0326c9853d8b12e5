"""Shared pytest set-up: quiet TensorFlow, and the trained runs modules share (trained_runs.py)."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from trained_runs import multi30k_run, reverse_run  # noqa: E402,F401  (session fixtures)

# pytest-xdist (--dist loadfile) hands whole modules to whichever worker is free, in collection order.
# Starting with the longest modules leaves the short ones to fill in at the end (longest-first scheduling);
# the order is from `pytest --durations=0`, see docs/performance.md.
LONGEST_MODULES_FIRST = [
    "test_trainer.py", "test_export.py", "test_decoder.py", "test_trainer_cli.py", "test_best_checkpoint.py",
    "test_mixed_precision.py", "test_distribution.py", "test_crash_safety.py", "test_decoder_outputs.py",
    "test_time_budget.py", "test_ensemble.py", "test_batching.py", "test_scorer.py", "test_multi_worker.py",
    "test_wsj_parsing.py", "test_visualize.py", "test_warm_start.py", "test_bad_inputs.py",
]


def pytest_collection_modifyitems(items):
    rank = {name: index for index, name in enumerate(LONGEST_MODULES_FIRST)}
    # A stable sort: each module's tests stay together and in their own order.
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
