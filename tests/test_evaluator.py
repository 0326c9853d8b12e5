"""The evaluator with scripted scores: the best checkpoint, patience, the log and the averaged comparison."""
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.run_dir import DEV_SCORES_FILE, RunDir
from t2t_lite.training.best_checkpoint import BestCheckpoint
from t2t_lite.training.dev_score import DevScore
from t2t_lite.training.evaluator import EvalResult, Evaluator, dev_loss


def scripted(tmp_path, losses, bleus=None, metric="bleu", patience=0, summaries=None, metric_name="BLEU"):
    """An Evaluator whose dev loss and BLEU come from lists; returns it, its save_best calls and its lines."""
    losses, bleus = list(losses), list(bleus or [])
    saved, lines = [], []

    def save_best(checkpoint, best_dir, best_json):
        assert best_dir == RunDir(str(tmp_path / "best"))
        saved.append((checkpoint, best_json))

    evaluator = Evaluator(
        dev_loss=lambda: EvalResult(loss=losses.pop(0), accuracy=0.5),
        dev_metric=(lambda: DevScore(metric_name, bleus.pop(0), 10, 0.1)) if bleus else None,
        best=BestCheckpoint(RunDir(str(tmp_path)), higher_is_better=metric != "loss", patience=patience, log=lines.append),
        tracked_metric=metric, save_best=save_best,
        summaries=summaries or tf.summary.create_noop_writer(), log=lines.append)
    return evaluator, saved, lines


def evaluate(evaluator, steps):
    return [evaluator.evaluate_checkpoint(step, f"run/ckpt-{step}") for step in steps]


def test_the_best_is_the_highest_bleu_and_patience_counts_evaluations_without_a_better_one(tmp_path):
    evaluator, saved, lines = scripted(tmp_path, losses=[3.0, 2.5, 2.4, 2.3], bleus=[10.0, 12.0, 11.0, 11.5],
                                       patience=2)
    assert evaluate(evaluator, (100, 200, 300, 400)) == [False, False, False, True]
    assert [checkpoint for checkpoint, _ in saved] == ["run/ckpt-100", "run/ckpt-200"]
    assert saved[-1][1] == {"step": 200, "metric": "BLEU", "score": 12.0, "scores": {"loss": 2.5, "BLEU": 12.0}}
    assert "step 300: dev loss 2.4000  dev accuracy 0.5000  dev BLEU 11.00 (10 sentences decoded in 0.1 s)" in lines
    assert f"best checkpoint so far (dev BLEU 12 at step 200) copied to {tmp_path / 'best'}" in lines
    assert "no improvement on the best dev BLEU 12 at step 200 for 2 of 2 evaluations (early stopping patience)" in lines
    assert evaluator.early_stopping_line().startswith("early stopping: 2 evaluations in a row without improving on "
                                                      "the best dev BLEU 12 at step 200")
    state = json.loads((tmp_path / DEV_SCORES_FILE).read_text())
    assert [e["BLEU"] for e in state["evaluations"]] == [10.0, 12.0, 11.0, 11.5]


def test_a_tie_goes_to_the_lower_loss_and_loss_tracking_wants_it_lower(tmp_path):
    (tmp_path / "tie").mkdir()
    (tmp_path / "loss").mkdir()
    tie, saved, _ = scripted(tmp_path / "tie", losses=[3.0, 2.0], bleus=[5.0, 5.0])
    evaluate(tie, (1, 2))
    assert [c for c, _ in saved] == ["run/ckpt-1", "run/ckpt-2"]
    by_loss, saved, _ = scripted(tmp_path / "loss", losses=[3.0, 3.5, 2.0], metric="loss")
    evaluate(by_loss, (1, 2, 3))
    assert [c for c, _ in saved] == ["run/ckpt-1", "run/ckpt-3"]


def test_patience_survives_a_new_evaluator_on_the_same_run(tmp_path):
    first, _, _ = scripted(tmp_path, losses=[2.0, 2.5], metric="loss", patience=2)
    evaluate(first, (1, 2))
    resumed, _, _ = scripted(tmp_path, losses=[2.6], metric="loss", patience=2)
    assert not resumed.should_stop and evaluate(resumed, (3,)) == [True] and resumed.should_stop


def test_the_averaged_checkpoints_line_names_the_better_one_and_nothing_is_said_without_a_score(tmp_path):
    # Which metric the averaged checkpoint is scored on (the best's) is the trainer's choice:
    # test_trainer.py's tests of the averaged checkpoint's score.
    evaluator, _, lines = scripted(tmp_path, losses=[2.0], metric="loss")
    evaluate(evaluator, (10,))
    evaluator.compare_with_best("run/averaged/ckpt-10", 1.5)
    assert lines[-1] == ("averaged checkpoint run/averaged/ckpt-10: dev loss 1.5; best checkpoint: dev loss 2 at "
                         "step 10; the averaged checkpoint scored better")
    evaluator.compare_with_best("run/averaged/ckpt-10", None)  # could not be scored as the best was: nothing said
    assert len(lines) == 3
    evaluator.compare_with_best("run/averaged/ckpt-10", 2.5)
    assert lines[-1].endswith("dev loss 2.5; best checkpoint: dev loss 2 at step 10; the best checkpoint scored better")
    evaluator.compare_with_best("run/averaged/ckpt-10", 2.0)
    assert lines[-1].endswith("dev loss 2; best checkpoint: dev loss 2 at step 10; both scored the same")
    # Scores that differ past the fourth digit are printed with the digits that tell them apart.
    evaluator.compare_with_best("run/averaged/ckpt-10", 2.00003)
    assert lines[-1].endswith("dev loss 2.00003; best checkpoint: dev loss 2 at step 10; the best checkpoint "
                              "scored better")


def test_without_a_dev_metric_the_line_has_the_loss_and_accuracy_only(tmp_path):
    evaluator, _, lines = scripted(tmp_path, losses=[2.0], metric="loss")
    assert evaluator.evaluate(7) == EvalResult(loss=2.0, accuracy=0.5)
    assert lines == ["step 7: dev loss 2.0000  dev accuracy 0.5000"]


def test_each_evaluation_is_summarised_at_its_step(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path / "eval"))
    evaluator, _, _ = scripted(tmp_path, losses=[3.0, 2.5], bleus=[10.0, 20.0], summaries=writer,
                               metric_name="exact match")
    evaluate(evaluator, (100, 200))
    writer.flush()
    summaries = {}
    for name in os.listdir(tmp_path / "eval"):
        for event in tf.compat.v1.train.summary_iterator(str(tmp_path / "eval" / name)):
            for value in event.summary.value:
                summaries[(event.step, value.tag)] = float(tf.make_ndarray(value.tensor))
    assert summaries == {(100, "loss"): 3.0, (100, "accuracy"): 0.5, (100, "exact_match"): 10.0,
                         (200, "loss"): 2.5, (200, "accuracy"): 0.5, (200, "exact_match"): 20.0}


def test_dev_loss_is_the_loss_and_accuracy_per_target_token_over_every_batch():
    batches = [(6.0, 2.0, 4.0), (3.0, 1.0, 2.0)]  # each (loss sum, correct tokens, tokens), as an eval step gives
    result = dev_loss(lambda batch: tuple(np.float32(x) for x in batch), batches)
    assert result == EvalResult(loss=pytest.approx(9.0 / 6.0), accuracy=pytest.approx(3.0 / 6.0))
    assert dev_loss(lambda batch: batch, [(0.5, 1.0, 1.0)]) == EvalResult(loss=0.5, accuracy=1.0)  # one token
    assert dev_loss(lambda batch: batch, []) == EvalResult(loss=0.0, accuracy=0.0)  # no dev batches: no division by 0
