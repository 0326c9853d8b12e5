"""Shared pytest set-up: quiet TensorFlow, and the trained runs modules share (trained_runs.py)."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
_ONEDNN_CHOSEN = "TF_ENABLE_ONEDNN_OPTS" in os.environ

from t2t_lite import precision  # noqa: E402  (imports no TensorFlow: the switch below still takes effect)

# The bfloat16 tests run on every CPU (precisions.py). With ONEDNN_MAX_CPU_ISA capped below AVX-512 on a CPU
# that has it, TensorFlow would send their matmuls to a oneDNN without bfloat16 kernels and crash; the session
# then runs without oneDNN, as TensorFlow runs bfloat16 on a CPU without AVX-512, unless the caller chose.
if not _ONEDNN_CHOSEN and precision.onednn_crashes_bfloat16():
    os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"

from trained_runs import multi30k_run, reverse_run  # noqa: E402,F401  (session fixtures)
from tiny_parsers import words_parser  # noqa: E402,F401  (a session fixture)

# pytest-xdist (--dist loadfile) hands whole modules to whichever worker is free, in collection order
# (--no-loadscope-reorder in pyproject.toml; by default it would order them by their number of tests).
# Starting with the longest modules leaves the short ones to fill in at the end (longest-first scheduling);
# the order is from each module's CPU time (docs/testing.md).
LONGEST_MODULES_FIRST = [
    # The first two train the two shared runs (trained_runs.py), one on each worker; the third reads both in
    # another interpreter (the tests marked isa, again with AVX2 forced); then by the CPU time a
    # module's tests take, slow ones included (the README's command runs them all in one session).
    "test_decoder.py", "test_export.py", "test_forced_isa.py", "test_crash_safety.py", "test_multi_worker.py", "test_trainer.py",
    "test_distribution.py", "test_faults.py", "test_best_checkpoint.py", "test_time_budget.py",
    "test_mixed_precision.py", "test_datagen_restart.py", "test_flag_walk.py", "test_extending.py",
    "test_usr_dir_per_run.py", "test_translator_settings.py", "test_quiet_python.py", "test_checkout_python.py", "test_streaming.py", "test_ctranslate2_export.py",
    "test_ctranslate2_without_tensorflow.py", "test_constraints.py", "test_parser_trees.py", "test_multi30k.py", "test_ptb_sample.py",
    "test_train_api.py", "test_decoder_factory.py", "test_ensemble.py", "test_decoder_outputs.py", "test_transformer.py", "test_scorer.py",
    "test_translator.py", "test_trainer_cli.py", "test_warm_start.py", "test_visualize.py", "test_quiet_start.py",
    "test_random_sampling.py", "test_words_target.py", "test_wsj_parsing.py", "test_averaging.py", "test_reproduce_recipe.py",
    "test_layer_contract.py", "test_shuffle.py", "test_shard_writer.py", "test_shards.py", "test_bad_inputs.py",
]


def pytest_collection_modifyitems(items):
    rank = {name: index for index, name in enumerate(LONGEST_MODULES_FIRST)}
    # A stable sort: each module's tests stay together and in their own order.
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
