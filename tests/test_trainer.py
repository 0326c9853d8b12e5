"""The training loop: learning, exact resume, clean stops, non-finite steps, the memory probe."""
import os
import shutil
import signal
import time

import numpy as np
import pytest
import tensorflow as tf

import t2t_lite.hparams  # noqa: F401
import t2t_lite.problems  # noqa: F401
from t2t_lite import config
from t2t_lite.models import build_model
from t2t_lite.models.transformer import Transformer
from t2t_lite.registry import hparams_sets
from t2t_lite.errors import UserError
from t2t_lite.run_dir import RunDir, RunSpec, save_spec
from t2t_lite import run_dir
from t2t_lite.training import checkpoints as ckpt
from t2t_lite.training import distribution, steps
from t2t_lite.training.averaging_schedule import AveragingSources
from t2t_lite.training.evaluator import Evaluator
from t2t_lite.training.steps import make_eval_step
from t2t_lite.training.loop import NonFiniteTrainingError
from t2t_lite.training.dev_score import DevScorer
from t2t_lite.training.run_config import RunConfig, resolve_for
from t2t_lite.training.trainer import Trainer
from small_training import TINY, small_problem
from cli_helpers import start_tool
from checkpoint_reads import assert_every_tensor_reads


def make_trainer(output_dir, train_steps, save_every, log=lambda line: None, average_last=0, overrides="",
                 memory_probe=False, **run_options):
    """A trainer of TINY on a small algorithmic_reverse; without the memory probe unless a test is about it."""
    problem = small_problem()
    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(),
                                     f"{TINY},average_last_checkpoints={average_last}{overrides}")
    # What the trainer CLI writes first; averaging rebuilds the model from it.
    run_dir.ensure_writable(RunDir(str(output_dir)))
    save_spec(RunDir(str(output_dir)), RunSpec("algorithmic_reverse", "transformer_tiny", TINY, hparams))
    run = RunConfig(mixed_precision="none", output_dir=str(output_dir), train_steps=train_steps, eval_steps=2,
                    save_checkpoints_steps=save_every, log_every_steps=save_every, random_seed=7,
                    memory_probe=memory_probe, **run_options)
    return Trainer(problem, hparams, resolve_for(run, problem, hparams, log=log), log=log)


def weights(trainer):
    return [v.numpy() for v in trainer.model.weights]


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """An uninterrupted run of 60 steps with checkpoints at 30 and 60, averaging the last 2 at its end
    (read-only: copy it to change it). One run serves every test that only reads one: tracing a trainer's
    steps, not its steps, is what a run costs here.

    Returns a dict: output_dir; trainer; weights and optimizer variables after step 60; dev_loss_before
    (before the first step); lines (its log); scored (the (checkpoint, score) pairs handed to
    Evaluator.compare_with_best).
    """
    output_dir, lines = tmp_path_factory.mktemp("straight"), []
    with pytest.MonkeyPatch.context() as monkeypatch:
        scored = averaged_scores(monkeypatch)
        trainer = make_trainer(output_dir, train_steps=60, save_every=30, average_last=2, log=lines.append)
        dev_loss_before = trainer.evaluate().loss
        trainer.train()
    assert trainer.step == 60
    return {"output_dir": output_dir, "trainer": trainer, "weights": weights(trainer),
            "optimizer": [np.asarray(v) for v in trainer.optimizer.variables], "dev_loss_before": dev_loss_before,
            "lines": lines, "scored": scored}


def test_the_trainer_takes_only_settings_resolved_before_it(tmp_path):
    problem = small_problem()
    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(), TINY)
    given = RunConfig(mixed_precision="none", output_dir=str(tmp_path), train_steps=1, eval_bleu_sentences=0)
    with pytest.raises(TypeError, match="^Trainer takes the settings resolved once, by run_config.resolve_for; "
                                        "got a RunConfig$"):
        Trainer(problem, hparams, given)
    assert Trainer(problem, hparams, resolve_for(given, problem, hparams)).run.train_steps == 1


def test_resume_gives_the_same_weights_as_an_uninterrupted_run(tmp_path, straight):
    first_half = make_trainer(tmp_path / "resumed", train_steps=30, save_every=30, average_last=2)
    first_half.train()
    lines = []
    second_half = make_trainer(tmp_path / "resumed", train_steps=60, save_every=30, average_last=2, log=lines.append)
    second_half.train()
    assert any("resumed from" in line and "step 30" in line for line in lines)
    assert second_half.step == 60
    for a, b in zip(straight["weights"], weights(second_half)):
        np.testing.assert_array_equal(a, b)
    # The optimizer state came back too: its step counter and moments match.
    for a, b in zip(straight["optimizer"], second_half.optimizer.variables):
        np.testing.assert_array_equal(a, np.asarray(b))


def test_training_lowers_dev_loss_and_writes_summaries_checkpoints_and_average(straight):
    trainer, output_dir = straight["trainer"], straight["output_dir"]
    assert trainer.evaluate().loss < straight["dev_loss_before"] - 0.1
    assert tf.train.latest_checkpoint(str(output_dir)).endswith("ckpt-60")
    assert os.listdir(output_dir / "train") and os.listdir(output_dir / "eval")
    # The last 2 checkpoints (steps 30 and 60) were averaged at the end.
    def model_weights(path):
        model = build_model(trainer.hparams)
        tf.train.Checkpoint(model=model).restore(path).expect_partial()
        return [w.numpy() for w in model.weights]

    step30, step60 = model_weights(str(output_dir / "ckpt-30")), model_weights(str(output_dir / "ckpt-60"))
    for averaged, a, b in zip(model_weights(str(output_dir / "averaged" / "ckpt-60")), step30, step60):
        np.testing.assert_allclose(averaged, (a + b) / 2, rtol=1e-5, atol=1e-7)


@pytest.mark.slow  # a process of its own and a signal
def test_sigterm_saves_a_checkpoint_and_exits_zero(tmp_path):
    # Forked with TensorFlow already imported (cli_helpers.start_tool): a fresh interpreter's import costs ~5 s of
    # CPU and is no part of what a signal does to a run.
    process = start_tool("trainer", "--problem=algorithmic_reverse", "--hparams_set=transformer_tiny", f"--hparams={TINY}",
                         f"--output_dir={tmp_path}", "--train_steps=100000", "--save_checkpoints_steps=100000",
                         "--log_every_steps=1", "--eval_steps=1", "--nomemory_probe")
    read = []
    for line in process.stream:
        read.append(line)
        if line.startswith("step 3/"):
            break
    else:
        pytest.fail(f"trainer ended before step 3 (exit {process.wait().returncode})")
    process.send_signal(signal.SIGTERM)
    start = time.monotonic()
    output = "".join(read) + process.wait(timeout=60).stdout
    assert process.returncode == 0, output
    assert time.monotonic() - start < 30
    assert "SIGTERM received" in output
    saved = tf.train.latest_checkpoint(str(tmp_path))
    assert saved is not None and int(saved.rsplit("-", 1)[1]) >= 3


def test_corrupt_newest_checkpoint_falls_back_to_the_previous_one(tmp_path, straight):
    run = tmp_path / "run"
    shutil.copytree(straight["output_dir"], run)
    newest = tf.train.latest_checkpoint(str(run))
    assert newest == str(run / "ckpt-60")
    data_file = next(p for p in run.iterdir() if p.name.startswith("ckpt-60.data"))
    data_file.write_bytes(data_file.read_bytes()[:100])  # a crash or a bad disk truncated it
    lines = []
    resumed = make_trainer(run, train_steps=60, save_every=30, average_last=2, log=lines.append)
    resumed.train()
    assert any("ckpt-60 is unreadable" in line for line in lines)
    assert any(line.startswith("resumed from") and "ckpt-30 at step 30" in line for line in lines)
    assert resumed.step == 60
    # ckpt-60 was written again by the resumed run and now loads: every tensor, not only the .index's list.
    assert_every_tensor_reads(str(run / "ckpt-60"))


def test_a_non_chief_removes_its_scratch_directory_only_after_its_last_save(tmp_path, monkeypatch):
    # A worker that is not the chief saves into a scratch directory (tf.distribute may need every worker in a
    # save) and removes it when the run ends: after the end of the run's save of the averaging sources.
    monkeypatch.setattr(distribution, "is_chief", lambda strategy: False)
    events = []

    def spy(cls, name):
        real = getattr(cls, name)

        def recorded(self, *args):
            path = self.run_dir.path
            directory = path if isinstance(self, ckpt.Checkpoints) else os.path.dirname(path)
            events.append((name, directory, os.path.isdir(directory)))
            return real(self, *args)

        monkeypatch.setattr(cls, name, recorded)

    spy(ckpt.Checkpoints, "save")
    spy(AveragingSources, "save")
    spy(ckpt.Checkpoints, "close")
    trainer = make_trainer(tmp_path, train_steps=4, save_every=2, average_last=2, overrides=",average_span=0.5")
    trainer.train()
    assert trainer.step == 4
    scratch = events[0][1]
    assert not scratch.startswith(str(tmp_path)) and tf.train.latest_checkpoint(str(tmp_path)) is None
    assert [name for name, _, _ in events].count("close") == 1 and events[-1][0] == "close"
    # Every save, the end of the run's included, found its directory in place; close then removed it.
    assert {directory for _, directory, _ in events} == {scratch} and all(present for _, _, present in events)
    assert any(name == "save" for name, _, _ in events) and not os.path.exists(scratch)


def averaged_scores(monkeypatch):
    """Records the (checkpoint, score) pairs the trainer hands Evaluator.compare_with_best, then lets it run."""
    calls = []
    real = Evaluator.compare_with_best

    def recorded(self, name, score):
        calls.append((name, score))
        return real(self, name, score)

    monkeypatch.setattr(Evaluator, "compare_with_best", recorded)
    return calls


def restored_model(trainer, path):
    model = build_model(trainer.hparams)
    tf.train.Checkpoint(model=model).restore(path).expect_partial().assert_existing_objects_matched()
    return model


def test_the_averaged_checkpoint_is_scored_on_the_dev_loss_when_the_best_was_chosen_on_it(straight):
    trainer, calls = straight["trainer"], straight["scored"]
    assert trainer.evaluator.best.state.metric == "loss"
    averaged = str(straight["output_dir"] / "averaged" / "ckpt-60")
    assert [name for name, _ in calls] == [averaged]
    # The dev loss of the averaged weights, computed here: not the live model's (step 60), which differs.
    expected = trainer.dev_loss(make_eval_step(restored_model(trainer, averaged),
                                               trainer.hparams.train.label_smoothing)).loss
    assert calls[0][1] == pytest.approx(expected, rel=1e-6)
    assert abs(trainer.evaluate().loss - expected) > 1e-4
    assert any(line.startswith(f"averaged checkpoint {averaged}: dev loss {expected:.4g}; best checkpoint: dev loss")
               for line in straight["lines"])


def test_the_averaged_checkpoint_is_scored_on_the_dev_metric_when_the_best_was_chosen_on_it(tmp_path, monkeypatch):
    calls = averaged_scores(monkeypatch)
    trainer = make_trainer(tmp_path, train_steps=4, save_every=2, average_last=2, eval_bleu_sentences=4,
                           overrides=",beam_size=1,extra_length=2")
    trainer.train()
    assert trainer.evaluator.best.state.metric == "exact match"
    averaged = str(tmp_path / "averaged" / "ckpt-4")
    # The exact match of the averaged weights' own decoding of the dev sentences, not their dev loss.
    scorer = DevScorer(trainer.problem, restored_model(trainer, averaged), trainer.hparams.decode, 4)
    assert calls == [(averaged, scorer.score().value)]


def poison_loss(monkeypatch, is_bad):
    """Makes the training loss NaN on the calls (1, 2, ...) of the loss for which is_bad(call) is true."""
    calls = tf.Variable(0)

    finite_losses = Transformer.token_losses

    def losses(model, *args, differentiable=False, **kwargs):
        given = finite_losses(model, *args, differentiable=differentiable, **kwargs)
        if not differentiable:  # the dev loss's
            return given
        calls.assign_add(1)
        return given._replace(loss_sum=tf.where(is_bad(calls), float("nan"), given.loss_sum))

    monkeypatch.setattr(Transformer, "token_losses", losses)


def variables(trainer):
    """The weights, Adam's moments and the step counter, as arrays."""
    return weights(trainer) + [np.asarray(v) for v in trainer.optimizer.variables]


@pytest.fixture(scope="module")
def nan_run(tmp_path_factory):
    """A run of 6 steps (saves at 3 and 6) whose loss is NaN on its 3rd and 4th calls, both at step 3.

    Both tests below read it: building and tracing a trainer is what costs here. Returns (trainer, its log
    lines, and per call of its train step: (variables before, StepResult, variables after)).
    """
    lines, calls = [], []
    with pytest.MonkeyPatch.context() as monkeypatch:
        poison_loss(monkeypatch, lambda call: (call == 3) | (call == 4))
        trainer = make_trainer(tmp_path_factory.mktemp("nan"), train_steps=6, save_every=3, log=lines.append)
        take_step = trainer.train_step

        def recorded_step(*args):
            before = variables(trainer)
            result = take_step(*args)
            calls.append((before, result, variables(trainer)))
            return result

        trainer.train_step = recorded_step  # what the loop calls for each update
        trainer.train()
    return trainer, lines, calls


def test_a_nan_loss_skips_the_update_and_changes_no_variable(nan_run):
    trainer, _, calls = nan_run
    for before, skipped, after in calls[2:4]:  # the 3rd and 4th calls: NaN loss
        assert skipped.skipped is True and np.isnan(skipped.loss)
        for a, b in zip(before, after):  # weights, Adam moments and the step counter
            np.testing.assert_array_equal(a, b)
    before, applied, after = calls[4]
    assert np.isfinite(applied.loss) and any(not np.array_equal(a, b) for a, b in zip(before, after))
    assert [result.skipped for _, result, _ in calls] == [False, False, True, True, False, False, False, False]
    assert trainer.step == 6


def test_nan_steps_are_counted_and_training_goes_on(nan_run):
    trainer, lines, _ = nan_run
    assert trainer.step == 6
    skipped = [line for line in lines if "update skipped" in line]
    assert [line.split(":")[0] for line in skipped] == ["step 3", "step 3"]
    assert "(1 in a row, 1 in this run)" in skipped[0] and "(2 in a row, 2 in this run)" in skipped[1]
    assert all(np.isfinite(w).all() for w in weights(trainer))


def test_too_many_nan_steps_in_a_row_stop_the_run_keeping_the_last_good_checkpoint(tmp_path, monkeypatch):
    trainer = make_trainer(tmp_path, train_steps=10, save_every=2, max_nonfinite_steps=3)
    poison_loss(monkeypatch, lambda call: trainer.optimizer.iterations >= 4)  # from the 5th update on
    with pytest.raises(NonFiniteTrainingError, match=r"^step 5: 3 updates in a row had a non-finite loss") as error:
        trainer.train()
    assert "ckpt-4" in str(error.value) and "learning_rate_constant" in str(error.value)
    assert trainer.step == 4
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-4")
    assert not any(name.startswith("ckpt-5") for name in os.listdir(tmp_path))


@pytest.mark.slow  # two runs compared
def test_memory_probe_changes_nothing_so_training_is_the_same_with_or_without_it(tmp_path):
    # The probe must put the dropout seeds back. max_length 256 as in transformer_tiny: with 32 the two runs'
    # weights differed by ~5e-5 after 3 steps (reported, not yet explained).
    overrides = ",dropout=0.2,train.max_length=256"
    lines = []
    probed = make_trainer(tmp_path / "probed", train_steps=3, save_every=3, log=lines.append, overrides=overrides,
                          memory_probe=True)
    probed.train()
    assert any(line.startswith("memory probe: a 1 x 256 batch fits") for line in lines)  # 256 tokens, max_length 256
    plain = make_trainer(tmp_path / "plain", train_steps=3, save_every=3, overrides=overrides)
    plain.train()
    for a, b in zip(weights(probed), weights(plain)):
        np.testing.assert_array_equal(a, b)


def test_memory_probe_fails_at_once_when_the_largest_batch_does_not_fit(tmp_path):
    # 2**17 rows x 128 tokens x d_model 512 floats: 32 GiB for the embedded inputs alone, more than this machine's RAM.
    trainer = make_trainer(tmp_path, train_steps=10, save_every=10, memory_probe=True,
                           overrides=",d_model=512,train.batch_size=16777216,train.max_length=128")
    with pytest.raises(UserError, match=r"a batch of 131072 x 128 tokens per replica .* does not fit in memory; "
                                        r"lower train.batch_size or train.max_length"):
        trainer.train()
    assert tf.train.latest_checkpoint(str(tmp_path)) is None
