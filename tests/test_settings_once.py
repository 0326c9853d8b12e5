"""The run's settings are checked once and resolved once, by the command and by t2t_lite.train alike, and
train(distribution=...) trains under the strategy the command's --distribution makes.

One process (the CPU split into 2 devices, as --cpu_devices=2 does) runs the command's main and
t2t_lite.train for each distribution, with run_config.check and run_config.resolve wrapped to count their
calls and Trainer.train replaced by a stop that records the Trainer's strategy: everything before training
runs as it does for a user.
"""
import collections
import json

import pytest

from cli_helpers import print_json, run_forked
from small_training import TINY

DISTRIBUTIONS = ("auto", "one_device", "mirrored")


class StopBeforeTraining(Exception):
    pass


def counting(module, name: str, counts: collections.Counter) -> None:
    """Replaces module.name by a wrapper that counts its calls in counts[name]."""
    real = getattr(module, name)

    def wrapper(*args, **kwargs):
        counts[name] += 1
        return real(*args, **kwargs)

    setattr(module, name, wrapper)


def settings_and_strategies(root: str) -> dict:
    """Run in a process of its own: {"command"|"train": {distribution: {"check", "resolve", "strategy", "replicas"}}}."""
    from t2t_lite.training import distribution

    distribution.split_cpu(2)  # before any op, as the command's --cpu_devices does
    from absl import flags

    import t2t_lite
    from t2t_lite.bin import trainer as command
    from t2t_lite.training import run_config
    from t2t_lite.training.trainer import Trainer

    counts, seen = collections.Counter(), {}
    for name in ("check", "resolve"):
        counting(run_config, name, counts)

    def stop(trainer):
        seen.update(strategy=type(trainer.strategy).__name__, replicas=trainer.strategy.num_replicas_in_sync)
        raise StopBeforeTraining

    Trainer.train = stop
    common = dict(problem="algorithmic_reverse", hparams_set="transformer_tiny", hparams=TINY, train_steps=1)

    def record(start) -> dict:
        counts.clear()
        seen.clear()
        try:
            start()
        except StopBeforeTraining:
            pass
        return {**counts, **seen}

    def by_command(name: str):
        argv = ["t2t-lite-trainer", *(f"--{key}={value}" for key, value in common.items()),
                f"--output_dir={root}/command_{name}", f"--distribution={name}"]
        flags.FLAGS.unparse_flags()
        flags.FLAGS(argv)
        command.main(argv)

    result = {"command": {}, "train": {}}
    for name in DISTRIBUTIONS:
        result["command"][name] = record(lambda: by_command(name))
        result["train"][name] = record(lambda: t2t_lite.train(output_dir=f"{root}/train_{name}", distribution=name,
                                                               log=lambda line: None, **common))
    result["train"]["default"] = record(lambda: t2t_lite.train(output_dir=f"{root}/train_default",
                                                                log=lambda line: None, **common))
    return result


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("settings_once")
    # Forked with TensorFlow imported but not started, so the CPU can still be split; no interpreter start-up.
    code, stdout, stderr = run_forked(print_json, settings_and_strategies, str(root), timeout=600)
    assert code == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("path", ["command", "train"])
def test_the_settings_are_checked_once_and_resolved_once(runs, path):
    for name, run in runs[path].items():
        assert (name, run["check"], run["resolve"]) == (name, 1, 1)


def test_train_makes_the_strategy_the_commands_distribution_makes_and_auto_is_the_default(runs):
    for name in DISTRIBUTIONS:
        assert runs["train"][name]["strategy"] == runs["command"][name]["strategy"]
        assert runs["train"][name]["replicas"] == runs["command"][name]["replicas"]
    # Two devices: auto mirrors over both, by default too, as the command does.
    assert runs["train"]["default"]["strategy"] == runs["command"]["auto"]["strategy"] == "MirroredStrategy"
    assert runs["train"]["default"]["replicas"] == runs["train"]["mirrored"]["replicas"] == 2
    assert runs["train"]["one_device"]["replicas"] == 1
