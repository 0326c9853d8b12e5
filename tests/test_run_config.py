"""The run's settings: checked, and resolved once by a pure function."""
import dataclasses

import pytest

from t2t_lite.errors import UserError
from t2t_lite.training import run_config
from t2t_lite.training.run_config import RunConfig


def resolve(run, dev_sentences=200, steps=100_000, auto="none", tasks=1):
    return run_config.resolve(run, dev_sentences, steps, auto, tasks)


def test_defaults_come_from_the_set_the_problem_and_the_machine():
    run, notes = resolve(RunConfig(output_dir="run"), dev_sentences=0, steps=1234, auto="mixed_bfloat16")
    assert (run.train_steps, run.eval_bleu_sentences, run.mixed_precision) == (1234, 0, "mixed_bfloat16")
    assert run.tracked_metric == "loss"
    assert notes == ["mixed precision: bfloat16 (--mixed_precision=auto: this CPU multiplies bfloat16 natively; "
                     "--mixed_precision=none trains in float32)"]
    given, _ = resolve(RunConfig(output_dir="run", train_steps=7, eval_bleu_sentences=5, mixed_precision="none"))
    assert (given.train_steps, given.eval_bleu_sentences, given.mixed_precision) == (7, 5, "none")
    assert given.tracked_metric == "bleu"


def test_resolving_is_pure_and_idempotent():
    raw = RunConfig(output_dir="run", float32_output_projection=True)
    once, notes = resolve(raw, auto="none")
    assert raw.train_steps is None and raw.mixed_precision == "auto"  # the input is not changed
    assert once.float32_output_projection is False
    assert "--float32_output_projection is ignored: training runs in float32 here" in notes
    assert resolve(once) == (once, [])


@pytest.mark.parametrize("settings, message", [
    (dict(train_steps=0), "--train_steps must be at least 1, got 0"),
    (dict(eval_steps=-1), "--eval_steps must be 0 (the whole dev split) or more, got -1"),
    (dict(best_checkpoint_metric="bleu", eval_bleu_sentences=0), "--best_checkpoint_metric=bleu needs the dev metric"),
    (dict(mixed_precision="fp8"), "--mixed_precision must be one of auto, none, mixed_float16, mixed_bfloat16"),
    (dict(float32_output_projection=True, mixed_precision="none"), "--float32_output_projection changes nothing"),
    (dict(warm_start_optimizer=True), "--warm_start_optimizer needs --warm_start_from"),
])
def test_settings_that_cannot_work_are_one_line(settings, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_config.check(RunConfig(output_dir="run", **settings))


def test_what_needs_the_problem_or_the_cluster_is_refused_when_resolving():
    with pytest.raises(UserError, match="the best checkpoint can be chosen on the dev metric only when it is"):
        resolve(RunConfig(output_dir="run", best_checkpoint_metric="bleu"), dev_sentences=0)
    with pytest.raises(UserError, match="--train_minutes works in one process"):
        resolve(RunConfig(output_dir="run", train_minutes=5.0), tasks=2)


def test_settings_by_name_are_every_field_but_output_dir():
    assert set(run_config.SETTINGS) == {f.name for f in dataclasses.fields(RunConfig)} - {"output_dir"}
    assert run_config.from_settings("run", {"train_steps": 3}).train_steps == 3
    with pytest.raises(UserError, match="unknown training settings bogus, train_step; known: train_steps"):
        run_config.from_settings("run", {"train_step": 3, "bogus": 1})
