"""Warm start (--warm_start_from): a new run begins from another run's weights, with a fresh step."""
import dataclasses
import shutil

import numpy as np
import pytest
import tensorflow as tf

import t2t_lite.hparams  # noqa: F401
import t2t_lite.problems  # noqa: F401
from t2t_lite import config
from t2t_lite.errors import UserError
from t2t_lite.registry import hparams_sets
from t2t_lite.run_dir import RunDir
from t2t_lite.training.run_config import RunConfig, resolve_for
from t2t_lite.training.checkpoints import Checkpoints
from t2t_lite.training.trainer import Trainer
from small_training import small_problem
from trained_runs import REVERSE_STEPS, REVERSE_TINY


def trainer(problem_name, output_dir, overrides=REVERSE_TINY, train_steps=2, **run_settings):
    """A trainer of reverse_run's model shape on a small `problem_name`, without the memory probe."""
    problem = small_problem(problem_name)
    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(), f"{overrides},vocab_size={problem.vocab_size}")
    run = RunConfig(mixed_precision="none", output_dir=str(output_dir), train_steps=train_steps, eval_steps=4,
                    memory_probe=False, **run_settings)
    return Trainer(problem, hparams, resolve_for(run, problem, hparams), log=lambda _: None)


def test_a_warm_started_run_starts_from_the_source_models_dev_loss_at_step_0(reverse_run, tmp_path):
    source = trainer("algorithmic_copy", tmp_path / "source")  # the source model, on the new problem's dev data
    assert source.restore() is None  # nothing to resume, no warm start: fresh weights (the seed's), as warm's start
    fresh_loss = source.evaluate().loss
    tf.train.Checkpoint(model=source.model).restore(tf.train.latest_checkpoint(reverse_run)).expect_partial()
    source_loss = source.evaluate().loss

    warm = trainer("algorithmic_copy", tmp_path / "warm", warm_start_from=reverse_run)
    warm.restore()
    assert warm.step == 0
    np.testing.assert_allclose(warm.evaluate().loss, source_loss, rtol=1e-5)
    assert abs(source_loss - fresh_loss) > 0.5  # the two starting points are far apart, so the check means something
    for variable, expected in zip(warm.model.weights, source.model.weights):
        np.testing.assert_array_equal(variable.numpy(), expected.numpy())
    # A fresh optimizer: Adam's moments are zero.
    assert all(not np.any(v.numpy()) for v in warm.optimizer.variables if "momentum" in v.path or "velocity" in v.path)


def test_warm_start_optimizer_keeps_adams_moments_but_restarts_the_step(reverse_run, tmp_path):
    shutil.copytree(reverse_run, tmp_path / "source")
    source = trainer("algorithmic_reverse", tmp_path / "source")
    source.restore()
    assert source.step == REVERSE_STEPS
    warm = trainer("algorithmic_reverse", tmp_path / "warm", warm_start_from=f"{reverse_run}/ckpt-{REVERSE_STEPS}",
                   warm_start_optimizer=True)
    warm.restore()
    assert warm.step == 0
    def moments(optimizer):  # in creation order, which the same model gives both optimizers
        return [v.numpy() for v in optimizer.variables if "momentum" in v.path or "velocity" in v.path]

    assert moments(source.optimizer) and any(np.any(m) for m in moments(source.optimizer))
    for warm_moment, source_moment in zip(moments(warm.optimizer), moments(source.optimizer), strict=True):
        np.testing.assert_array_equal(warm_moment, source_moment)


def test_a_resumed_run_resumes_itself_rather_than_warm_starting_again(reverse_run, tmp_path):
    run = trainer("algorithmic_reverse", tmp_path / "run", warm_start_from=reverse_run)
    run.restore()
    # What training would leave: the step moved on and the weights moved away from the source's.
    run.optimizer.iterations.assign(2)
    for variable in run.model.trainable_variables:
        variable.assign_add(tf.ones_like(variable))
    Checkpoints(RunDir(str(tmp_path / "run")), {"model": run.model, "optimizer": run.optimizer},
                run.optimizer.iterations, max_to_keep=5, chief=True).save(2)
    again = trainer("algorithmic_reverse", tmp_path / "run", warm_start_from=reverse_run)
    again.restore()
    assert again.step == 2
    for variable, expected in zip(again.model.weights, run.model.weights, strict=True):
        np.testing.assert_array_equal(variable.numpy(), expected.numpy())


def test_another_model_shape_or_vocabulary_is_refused_naming_what_differs(reverse_run, tmp_path):
    wider = trainer("algorithmic_reverse", tmp_path / "wider", overrides=REVERSE_TINY.replace("d_model=32", "d_model=16"),
                    warm_start_from=reverse_run)
    with pytest.raises(UserError, match=r"^cannot warm start from .*: its model differs from this run's in "
                                        r"d_model 32 vs 16 \(source vs this run\)"):
        wider.restore()
    addition = trainer("algorithmic_addition", tmp_path / "addition", warm_start_from=reverse_run)
    with pytest.raises(UserError, match=r"in vocab_size 12 vs 13 \(source"):  # addition adds a "+" token
        addition.restore()
    with pytest.raises(UserError, match="is neither a checkpoint .* nor a run directory"):
        trainer("algorithmic_reverse", tmp_path / "x", warm_start_from=str(tmp_path / "nowhere")).restore()
    # Dropout may differ: it changes no weight.
    dropout = trainer("algorithmic_reverse", tmp_path / "dropout", overrides=REVERSE_TINY.replace("dropout=0,", "dropout=0.3,", 1),
                      warm_start_from=reverse_run)
    dropout.restore()
    assert dataclasses.asdict(dropout.hparams.model)["dropout"] == 0.3


def test_a_source_with_another_vocabulary_of_the_same_size_is_refused(multi30k_run, tmp_path):
    """Only the vocabulary's size used to be compared: a run on other data, with another vocabulary of the same
    size, warm-started from ids that meant other pieces."""
    from t2t_lite.registry import problems
    from trained_runs import MULTI30K_TINY, MULTI30K_VOCAB_SIZE, multi30k_lines

    raw = tmp_path / "raw"
    raw.mkdir()
    for split, count in (("train", 1500), ("val", 50)):  # other sentences: another vocabulary of the same size
        for language in ("en", "de"):
            (raw / f"{split}.{language}").write_text(
                "".join(multi30k_lines(split, language, 2000 + count).splitlines(keepends=True)[2000:]),
                encoding="utf-8")
    data_dir = str(tmp_path / "data")
    other = problems.get("translate_files")(data_dir)
    other.generate_data(None, vocab_size=MULTI30K_VOCAB_SIZE, num_shards=1, train_files=f"{raw}/train.en,{raw}/train.de",
                        dev_files=f"{raw}/val.en,{raw}/val.de", log=lambda line: None)
    assert other.vocab_size == problems.get("translate_files")(multi30k_run["data_dir"]).vocab_size

    def warm_started(problem_data_dir, name):
        problem = problems.get("translate_files")(problem_data_dir)
        hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(),
                                         f"{MULTI30K_TINY},vocab_size={problem.vocab_size}")
        run = RunConfig(mixed_precision="none", output_dir=str(tmp_path / name), train_steps=1, eval_steps=1,
                        memory_probe=False, warm_start_from=multi30k_run["output_dir"])
        return Trainer(problem, hparams, resolve_for(run, problem, hparams), log=lambda _: None)

    with pytest.raises(UserError, match=r"^cannot warm start from .*: its vocabulary is not this run's "
                                        r"\(in .*\), so its ids mean other pieces"):
        warm_started(data_dir, "other").restore()
    warm_started(multi30k_run["data_dir"], "same").restore()  # the source's own data: its vocabulary
