"""The run's settings: checked when made, and resolved once by a pure function into the kind the Trainer takes."""
import dataclasses

import pytest

from t2t_lite.errors import UserError
from t2t_lite.run_dir import RunDir
from t2t_lite.training import run_config
from t2t_lite.training.run_config import ResolvedRunConfig, RunConfig


def resolve(run, dev_sentences=200, steps=100_000, auto="none", tasks=1):
    return run_config.resolve(run, dev_sentences, steps, auto, tasks)


def test_defaults_come_from_the_set_the_problem_and_the_machine():
    run, notes = resolve(RunConfig(output_dir="run"), dev_sentences=0, steps=1234, auto="mixed_bfloat16")
    assert (run.train_steps, run.eval_bleu_sentences, run.mixed_precision) == (1234, 0, "mixed_bfloat16")
    assert run.tracked_metric == "loss"
    assert notes == ["mixed precision: bfloat16 (`mixed_precision`=auto: this CPU multiplies bfloat16 natively; "
                     "`mixed_precision`=none trains in float32)"]
    given, _ = resolve(RunConfig(output_dir="run", train_steps=7, eval_bleu_sentences=5, mixed_precision="none"))
    assert (given.train_steps, given.eval_bleu_sentences, given.mixed_precision) == (7, 5, "none")
    assert given.tracked_metric == "bleu"


def test_resolving_is_pure_and_idempotent():
    raw = RunConfig(output_dir="run", float32_output_projection=True)
    once, notes = resolve(raw, auto="none")
    assert raw.train_steps is None and raw.mixed_precision == "auto"  # the input is not changed
    assert once.float32_output_projection is False
    assert "`float32_output_projection` is ignored: training runs in float32 here" in notes
    assert resolve(once) == (once, [])


@pytest.mark.parametrize("settings, message", [
    (dict(output_dir=""), "`output_dir` is required (the run directory)"),
    (dict(train_steps=0), "`train_steps` must be at least 1, got 0"),
    (dict(save_checkpoints_steps=0), "`save_checkpoints_steps` must be at least 1, got 0"),
    (dict(keep_checkpoint_max=0), "`keep_checkpoint_max` must be at least 1, got 0"),
    (dict(log_every_steps=0), "`log_every_steps` must be at least 1, got 0"),
    (dict(max_nonfinite_steps=0), "`max_nonfinite_steps` must be at least 1, got 0"),
    (dict(train_minutes=-0.5), "`train_minutes` must be 0 (no time budget) or more, got -0.5"),
    (dict(eval_steps=-1), "`eval_steps` must be 0 (the whole dev split) or more, got -1"),
    (dict(eval_bleu_sentences=-1), "`eval_bleu_sentences` must be 0 (off) or more, got -1"),
    (dict(early_stopping_patience=-2), "`early_stopping_patience` must be 0 (never stop early) or more, got -2"),
    (dict(best_checkpoint_metric="chrf"), "`best_checkpoint_metric` must be one of bleu, loss; got 'chrf'"),
    (dict(best_checkpoint_metric="bleu", eval_bleu_sentences=0),
     "`best_checkpoint_metric`=bleu needs the dev metric: set `eval_bleu_sentences`=N (N > 0), "
     "or use `best_checkpoint_metric`=loss"),
    (dict(mixed_precision="fp8"),
     "`mixed_precision` must be one of auto, none, mixed_float16, mixed_bfloat16; got 'fp8'"),
    (dict(float32_output_projection=True, mixed_precision="none"),
     "`float32_output_projection` changes nothing with `mixed_precision`=none: "
     "use `mixed_precision`=mixed_bfloat16 (or mixed_float16, or auto), or drop it"),
    (dict(warm_start_optimizer=True), "`warm_start_optimizer` needs `warm_start_from`"),
])
def test_settings_that_cannot_work_are_refused_in_one_line_when_made(settings, message):
    with pytest.raises(UserError) as error:
        RunConfig(**{"output_dir": "run", **settings})
    assert str(error.value) == message


def test_the_least_settings_that_work_are_accepted():
    run_config.check(RunConfig(output_dir="run", train_steps=1, save_checkpoints_steps=1, keep_checkpoint_max=1,
                               log_every_steps=1, max_nonfinite_steps=1, train_minutes=0, eval_steps=0,
                               eval_bleu_sentences=0, early_stopping_patience=0, best_checkpoint_metric="loss",
                               float32_output_projection=True, mixed_precision="mixed_float16",
                               warm_start_optimizer=True, warm_start_from="other_run"))
    # One dev sentence is enough to choose the best on the dev metric; a budget alone, or a cluster alone, is fine.
    one_sentence = RunConfig(output_dir="run", best_checkpoint_metric="bleu", eval_bleu_sentences=1)
    assert resolve(one_sentence)[0].tracked_metric == "bleu"
    assert resolve(RunConfig(output_dir="run", train_minutes=5.0), tasks=1)[0].train_minutes == 5.0
    assert run_config.resolve(RunConfig(output_dir="run", train_minutes=5.0), 0, 10, "none")[0].train_minutes == 5.0
    assert resolve(RunConfig(output_dir="run"), tasks=2)[0].train_minutes == 0


def test_auto_precision_keeps_the_float32_projection_where_it_means_something():
    run, notes = resolve(RunConfig(output_dir="run"), auto="none")
    assert run.mixed_precision == "none" and notes == [
        "mixed precision: none, float32 (`mixed_precision`=auto: no native bfloat16 here)"]
    kept, notes = resolve(RunConfig(output_dir="run", float32_output_projection=True), auto="mixed_bfloat16")
    assert kept.float32_output_projection is True and kept.mixed_precision == "mixed_bfloat16" and len(notes) == 1


def test_what_needs_the_problem_or_the_cluster_is_refused_when_resolving():
    with pytest.raises(UserError) as error:
        resolve(RunConfig(output_dir="run", best_checkpoint_metric="bleu"), dev_sentences=0)
    assert str(error.value) == ("the best checkpoint can be chosen on the dev metric only when it is computed: "
                                "set `eval_bleu_sentences`=N (N > 0), or `best_checkpoint_metric`=loss")
    with pytest.raises(UserError) as error:
        resolve(RunConfig(output_dir="run", train_minutes=5.0), tasks=2)
    assert str(error.value) == "`train_minutes` works in one process; give a multi-worker run `train_steps` instead"


def test_resolved_settings_hold_no_default_left_to_fill_and_only_resolve_makes_them():
    resolved, _ = resolve(RunConfig(output_dir="run"))
    assert type(resolved) is ResolvedRunConfig and isinstance(resolved, RunConfig)
    for unresolved, names in ((dict(train_steps=None), "train_steps"),
                              (dict(eval_bleu_sentences=None), "eval_bleu_sentences"),
                              (dict(mixed_precision="auto"), "mixed_precision")):
        with pytest.raises(ValueError, match=f"^{names} not resolved .*; make a ResolvedRunConfig with "
                                             f"run_config.resolve$"):
            dataclasses.replace(resolved, **unresolved)
    with pytest.raises(ValueError, match="^train_steps, eval_bleu_sentences, mixed_precision not resolved"):
        ResolvedRunConfig(output_dir="run")


def test_settings_by_name_are_every_field_but_output_dir():
    assert set(run_config.SETTINGS) == {f.name for f in dataclasses.fields(RunConfig)} - {"output_dir"}
    given = run_config.from_settings("run", {"train_steps": 3})
    assert (given.output_dir, given.train_steps) == (RunDir("run"), 3)  # the path made a RunDir
    with pytest.raises(UserError) as error:
        run_config.from_settings("run", {"train_step": 3, "bogus": 1})
    assert str(error.value) == f"unknown training settings bogus, train_step; known: {', '.join(run_config.SETTINGS)}"
    with pytest.raises(UserError) as error:
        run_config.from_settings("run", {"train_step": 3})
    assert str(error.value).startswith("unknown training setting train_step; known: train_steps, ")
