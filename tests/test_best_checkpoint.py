"""Dev metric during training, the best checkpoint, early stopping and their resume."""
import json
import os

import pytest
import tensorflow as tf

import t2t_lite.hparams  # noqa: F401
import t2t_lite.problems  # noqa: F401
from t2t_lite import config
from t2t_lite.errors import UserError
from t2t_lite.metrics.bleu import problem_dev_metric
from t2t_lite.registry import hparams_sets, problems
from t2t_lite.decoding.request import DecodeRequest
from t2t_lite.run import RunRequest, open_run
from t2t_lite.run_dir import BEST_FILE, BEST_SUBDIR, RunDir, RunSpec, save_spec
from t2t_lite import run_dir
from t2t_lite.run_dir import DEV_SCORES_FILE as STATE_FILE
from t2t_lite.training.best_checkpoint import BestCheckpoint, read_best_json
from t2t_lite.training.dev_score import DevScore, DevScorer
from t2t_lite.training.run_config import RunConfig, resolve_for
from t2t_lite.training.trainer import Trainer
from cli_helpers import run_tool
from small_training import small_problem

TINY = "vocab_size=12,d_model=16,d_ff=32,num_heads=2,num_encoder_layers=1,num_decoder_layers=1,dropout=0," \
       "attention_dropout=0,relu_dropout=0,train.batch_size=256"


def fake_save(saved):
    def save_best(best_dir, best_json):
        saved.append(best_json["step"])
    return save_best


# The bookkeeping alone, on scripted scores.

def test_best_is_the_highest_score_and_patience_counts_evaluations_without_improvement(tmp_path):
    tracker = BestCheckpoint(RunDir(str(tmp_path)), higher_is_better=True, patience=2, log=lambda _: None)
    saved = []
    script = [(100, 10.0), (200, 12.0), (300, 11.0), (400, 13.0), (500, 12.9), (600, 13.0)]
    stops = []
    for step, bleu in script:
        tracker.record(step, "BLEU", {"loss": 1.0, "BLEU": bleu}, fake_save(saved))
        stops.append(tracker.should_stop)
    assert saved == [100, 200, 400]  # each new best, and only those
    assert (tracker.state.best_step, tracker.state.best_score) == (400, 13.0)
    # 500 and 600 do not improve (a tie with an equal loss is no improvement): stop after exactly 2.
    assert stops == [False, False, False, False, False, True]
    state = json.loads((tmp_path / STATE_FILE).read_text())
    assert [e["step"] for e in state["evaluations"]] == [s for s, _ in script]
    assert state["evaluations_without_improvement"] == 2


def test_loss_is_lower_better_and_breaks_ties_of_the_metric(tmp_path):
    by_loss = BestCheckpoint(RunDir(str(tmp_path / "a")), higher_is_better=False)
    os.makedirs(tmp_path / "a")
    saved = []
    for step, loss in [(1, 3.0), (2, 2.0), (3, 2.5)]:
        by_loss.record(step, "loss", {"loss": loss}, fake_save(saved))
    assert saved == [1, 2]
    os.makedirs(tmp_path / "b")
    by_metric = BestCheckpoint(RunDir(str(tmp_path / "b")), higher_is_better=True)
    saved = []
    for step, loss in [(1, 3.0), (2, 2.0), (3, 2.5)]:  # BLEU 0 throughout: the lower loss wins the tie
        by_metric.record(step, "BLEU", {"loss": loss, "BLEU": 0.0}, fake_save(saved))
    assert saved == [1, 2]


def test_state_survives_a_new_tracker_and_a_kill_between_best_and_state(tmp_path):
    out = RunDir(str(tmp_path))
    first = BestCheckpoint(out, higher_is_better=True, patience=3)
    first.record(1, "BLEU", {"loss": 2.0, "BLEU": 5.0}, fake_save([]))
    first.record(2, "BLEU", {"loss": 2.0, "BLEU": 4.0}, fake_save([]))
    again = BestCheckpoint(out, higher_is_better=True, patience=3)
    assert (again.state.best_step, again.state.best_score, again.state.evaluations_without_improvement) == (1, 5.0, 1)
    # best/ was rewritten for step 3, then the process died before dev_scores.json: best.json wins.
    os.makedirs(tmp_path / BEST_SUBDIR)
    (tmp_path / BEST_SUBDIR / BEST_FILE).write_text(json.dumps(
        {"step": 3, "metric": "BLEU", "score": 6.0, "scores": {"loss": 1.5, "BLEU": 6.0}}))
    reloaded = BestCheckpoint(out, higher_is_better=True, patience=3)
    assert (reloaded.state.best_step, reloaded.state.best_score) == (3, 6.0)
    assert reloaded.state.evaluations_without_improvement == 0


# The trainer, with tiny real training.

def make_trainer(output_dir, train_steps, log=lambda line: None, average_last=0, **run_options):
    # 2,000 train and 200 dev examples (small_training.py): the bookkeeping of evaluations, the best checkpoint
    # and early stopping does not depend on how many there are.
    problem = small_problem()
    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(),
                                     f"{TINY},average_last_checkpoints={average_last},beam_size=2,extra_length=3")
    run_dir.ensure_writable(RunDir(str(output_dir)))
    save_spec(RunDir(str(output_dir)), RunSpec("algorithmic_reverse", "transformer_tiny", TINY, hparams))
    run = RunConfig(mixed_precision="none", output_dir=str(output_dir), train_steps=train_steps, eval_steps=1, save_checkpoints_steps=3,
                    log_every_steps=100, random_seed=7, memory_probe=False, **run_options)
    return Trainer(problem, hparams, resolve_for(run, problem, hparams, log=log), log=log)


def test_training_keeps_the_best_checkpoint_on_the_dev_metric_and_the_decoder_opens_it(tmp_path):
    lines = []
    trainer = make_trainer(tmp_path, train_steps=9, log=lines.append, average_last=2, eval_bleu_sentences=8)
    trainer.train()
    state = json.loads((tmp_path / STATE_FILE).read_text())
    evaluations = state["evaluations"]
    assert [e["step"] for e in evaluations] == [3, 6, 9]
    assert all("exact match" in e for e in evaluations)
    # The best is the evaluation with the highest exact match, the lowest loss among equals.
    best = max(evaluations, key=lambda e: (e["exact match"], -e["loss"]))
    best_json = read_best_json(RunDir(str(tmp_path)))
    assert (best_json["step"], best_json["metric"], best_json["score"]) == (best["step"], "exact match",
                                                                             best["exact match"])
    assert any(line.startswith("step 3: dev loss") and "dev exact match" in line and "sentences decoded in" in line
               for line in lines)
    assert any(line.startswith("averaged checkpoint") and "best checkpoint" in line for line in lines)
    opened = open_run(RunRequest(output_dir=str(tmp_path), checkpoint="best", decode=DecodeRequest(mixed_precision="none")))
    assert opened.checkpoint == os.path.join(str(tmp_path), BEST_SUBDIR, f"ckpt-{best['step']}")
    # The best directory holds that step's weights: its dev loss is the one recorded for it.
    restored = trainer.dev_loss(_eval_step(opened.model, trainer))
    assert restored.loss == pytest.approx(best["loss"], rel=1e-5)
    # keep_checkpoint_max never reaches best/: it is a directory of its own.
    assert tf.train.latest_checkpoint(str(tmp_path / BEST_SUBDIR)).endswith(f"ckpt-{best['step']}")


def _eval_step(model, trainer):
    from t2t_lite.training.steps import make_eval_step

    return make_eval_step(model, trainer.hparams.train.label_smoothing)


def scripted_scores(monkeypatch, values):
    """DevScorer.score returns `values` in turn, without decoding."""
    calls = iter(values)
    monkeypatch.setattr(DevScorer, "score", lambda self: DevScore("BLEU", next(calls), 8, 0.0))


def test_early_stopping_after_exactly_patience_evaluations_and_resume_keeps_the_counters(tmp_path, monkeypatch):
    scripted_scores(monkeypatch, [5.0, 7.0, 6.0])
    first = make_trainer(tmp_path, train_steps=9, eval_bleu_sentences=8, early_stopping_patience=2)
    first.train()
    state = json.loads((tmp_path / STATE_FILE).read_text())
    assert (state["best_step"], state["best_score"], state["evaluations_without_improvement"]) == (6, 7.0, 1)
    # More steps: the resumed run carries on the count, and the second non-improving evaluation stops it.
    scripted_scores(monkeypatch, [6.5, 9.0])
    lines = []
    resumed = make_trainer(tmp_path, train_steps=30, log=lines.append, eval_bleu_sentences=8,
                           early_stopping_patience=2)
    resumed.train()
    assert resumed.step == 12
    state = json.loads((tmp_path / STATE_FILE).read_text())
    assert [e["step"] for e in state["evaluations"]] == [3, 6, 9, 12]
    assert (state["best_step"], state["evaluations_without_improvement"]) == (6, 2)
    stop_lines = [line for line in lines if line.startswith("early stopping")]
    assert len(stop_lines) == 1 and f"{tmp_path / BEST_SUBDIR}" in stop_lines[0] and "step 6" in stop_lines[0]
    assert read_best_json(RunDir(str(tmp_path)))["step"] == 6
    # A rerun trains nothing more: the stop is remembered.
    again = make_trainer(tmp_path, train_steps=30, eval_bleu_sentences=8, early_stopping_patience=2)
    again.train()
    assert again.step == 12


def test_zero_sentences_decodes_nothing_and_the_best_is_chosen_on_loss(tmp_path, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("decoded with eval_bleu_sentences=0")

    monkeypatch.setattr("t2t_lite.training.dev_score.decode_lines", fail)
    make_trainer(tmp_path, train_steps=6, eval_bleu_sentences=0).train()
    state = json.loads((tmp_path / STATE_FILE).read_text())
    assert state["metric"] == "loss" and all(set(e) == {"step", "loss"} for e in state["evaluations"])
    losses = {e["step"]: e["loss"] for e in state["evaluations"]}
    assert read_best_json(RunDir(str(tmp_path)))["step"] == min(losses, key=losses.get)


def test_algorithmic_problems_decode_nothing_by_default_and_bleu_needs_sentences(tmp_path):
    assert problems.get("algorithmic_reverse").dev_metric_sentences == 0
    assert make_trainer(tmp_path / "a", train_steps=1).run.eval_bleu_sentences == 0
    with pytest.raises(UserError, match="`eval_bleu_sentences`"):
        make_trainer(tmp_path / "b", train_steps=1, best_checkpoint_metric="bleu")


def test_dev_metrics_per_problem():
    reverse = problems.get("algorithmic_reverse")()
    assert reverse.dev_metric(["123", "45", "6"], ["123", "54", "6"], ["321", "54", "6"]) == (
        "exact match", pytest.approx(200 / 3))
    name, bleu = problem_dev_metric(problems.get("translate_files")(), ["the cat sat on the mat"] * 2,
                                    ["the cat sat on the mat"] * 2, ["x", "y"])
    assert name == "BLEU" and bleu == pytest.approx(100.0)
    wsj = problems.get("wsj_parsing")()
    name, f1 = wsj.dev_metric(["S NP DT NN /NP VP VBD /VP . /S"], ["S NP DT NN /NP VP VBD /VP . /S"],
                              ["The cat sat ."])
    assert name == "bracket F1" and f1 == pytest.approx(100.0)
    _, worse = wsj.dev_metric(["S DT NN VBD . /S"], ["S NP DT NN /NP VP VBD /VP . /S"], ["The cat sat ."])
    assert worse < 100.0


def test_cli_stops_early_with_exit_zero_and_one_line(tmp_path):
    # A learning rate of 0 leaves the dev loss where it was: no evaluation after the first improves.
    run = tmp_path / "run"
    result = run_tool(
        "trainer", "--problem=algorithmic_reverse", "--hparams_set=transformer_tiny", f"--output_dir={run}",
        f"--hparams={TINY},learning_rate_constant=0", "--train_steps=100", "--save_checkpoints_steps=2",
        "--eval_steps=1", "--nomemory_probe", "--early_stopping_patience=2")
    assert result.returncode == 0, result.stderr[-2000:]
    output = result.stdout + result.stderr
    stop_lines = [line for line in output.splitlines() if "early stopping:" in line]
    assert len(stop_lines) == 1 and "2 evaluations in a row" in stop_lines[0] and f"{run / BEST_SUBDIR}" in stop_lines[0]
    assert read_best_json(RunDir(str(run)))["step"] == 2
    assert tf.train.latest_checkpoint(str(run)).endswith("ckpt-6")
