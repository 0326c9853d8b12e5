"""The best checkpoint so far on a dev score, and early stopping: the bookkeeping, kept across resumes.

After every evaluation the trainer hands `BestCheckpoint.record` the dev
scores of the checkpoint it just saved. When the tracked score improves, that
checkpoint's weights are copied into `<output_dir>/best/` (with best.json
saying its step and score, and the run's hparams.json, so `t2t-lite-decoder
--checkpoint=best` opens it); otherwise the count of evaluations without
improvement goes up, and early stopping ends the run when it reaches the
patience. The best score, the count and every evaluation's scores are kept in
`<output_dir>/dev_scores.json`, so a resumed run carries on with them. Both
are written whole or not at all; best/ is written first, so a kill between the
two leaves a best/ newer than dev_scores.json, and loading prefers best.json's
step and score.
"""
import dataclasses
import json
import os
from collections.abc import Callable

import keras

from t2t_lite.files import atomic_write_text, read_json
from t2t_lite.run_dir import BEST_FILE, HPARAMS_FILE, RunDir, restore_checkpoint
from t2t_lite.training.checkpoint_dir import write_model_dir



@dataclasses.dataclass
class BestState:
    """What dev_scores.json holds."""

    metric: str | None = None  # the tracked score's name, e.g. "BLEU" or "loss"; None before any evaluation
    best_step: int | None = None
    best_score: float | None = None
    best_loss: float | None = None  # breaks ties in the tracked score
    evaluations_without_improvement: int = 0
    # Every evaluation: {"step": S, "<score name>": value, ...}, oldest first.
    evaluations: list = dataclasses.field(default_factory=list)


class BestCheckpoint:
    """Tracks one dev score across evaluations (and resumes) of the run in run_dir.

    Args:
      run_dir: the run directory; best/ and dev_scores.json go in it.
      higher_is_better: True for BLEU-like metrics, False for the loss.
      patience: early stopping after this many evaluations in a row without
        improvement; 0 never stops.
      log: receives a line when tracking restarts because the metric changed.
    """

    def __init__(self, run_dir: RunDir, higher_is_better: bool, patience: int = 0, log: Callable[[str], None] = print):
        self.run_dir, self.higher_is_better, self.patience, self.log = run_dir, higher_is_better, patience, log
        self.best_dir = run_dir.best
        self.state = load_state(run_dir)

    @property
    def should_stop(self) -> bool:
        """Whether `patience` evaluations in a row have not improved on the best score."""
        return self.patience > 0 and self.state.evaluations_without_improvement >= self.patience

    def improves(self, score: float, loss: float | None = None) -> bool:
        """Whether score beats the best; on a tie (BLEU 0 early on, exact match 100 late), a lower dev loss does."""
        best = self.state.best_score
        if best is None:
            return True
        if score == best:
            return loss is not None and self.state.best_loss is not None and loss < self.state.best_loss
        return score > best if self.higher_is_better else score < best

    def record(self, step: int, metric: str, scores: dict[str, float], save_best: Callable[[str, dict], None]) -> bool:
        """Records one evaluation; when scores[metric] improves on the best, first calls save_best(best_dir, best_json).

        Args:
          step: the evaluated checkpoint's step.
          metric: the tracked score's name, a key of scores.
          scores: every dev score of this evaluation, e.g. {"loss": 2.1, "BLEU": 17.0}; "loss" breaks ties.
          save_best: writes the checkpoint of `step` into best_dir with best.json (the given dict) beside it.
        Returns:
          Whether the score improved (and best/ now holds this step).
        """
        state = self.state
        if state.metric not in (None, metric):
            self.log(f"the best checkpoint was chosen on dev {state.metric}, now on dev {metric}: "
                     f"tracking starts again")
            self.state = state = BestState(evaluations=state.evaluations)  # the evaluations so far are kept
        state.metric = metric
        scores = {name: float(value) for name, value in scores.items()}
        score, loss = scores[metric], scores.get("loss")
        if improved := self.improves(score, loss):
            save_best(self.best_dir, {"step": step, "metric": metric, "score": score, "scores": scores})
            state.best_step, state.best_score, state.best_loss = step, score, loss
            state.evaluations_without_improvement = 0
        else:
            state.evaluations_without_improvement += 1
        state.evaluations.append({"step": step, **scores})
        atomic_write_text(self.run_dir.dev_scores_file, json.dumps(dataclasses.asdict(state), indent=2) + "\n")
        return improved

    def describe_best(self, digits: int = 4) -> str:
        """E.g. "dev BLEU 17 at step 400", the score to `digits` significant digits."""
        return f"dev {self.state.metric} {self.state.best_score:.{digits}g} at step {self.state.best_step}"


def load_state(run_dir: RunDir) -> BestState:
    """dev_scores.json of run_dir (a fresh BestState if absent), its best taken from best/best.json if newer."""
    path = run_dir.dev_scores_file
    state = BestState(**read_json(path)) if os.path.exists(path) else BestState()
    best = read_best_json(run_dir)
    if best is not None and best["metric"] == state.metric and best["step"] != state.best_step:
        # Killed after writing best/ but before dev_scores.json: best/ holds the newer best.
        state.best_step, state.best_score, state.evaluations_without_improvement = best["step"], best["score"], 0
        state.best_loss = best["scores"].get("loss")
    return state


def read_best_json(run_dir: RunDir) -> dict | None:
    """best/best.json of run_dir: {"step", "metric", "score", "scores"}; None when there is no best yet."""
    return read_json(run_dir.best_file) if os.path.exists(run_dir.best_file) else None


def save_model_weights_as_best(model: keras.Model, checkpoint: str, run_dir: RunDir, best_dir: RunDir,
                               best_json: dict) -> str:
    """Copies the model weights of a training checkpoint into best_dir, with best.json and the run's hparams.json.

    Args:
      model: a model of the run's hparams outside any distribution strategy, restored into
        from `checkpoint` and saved from, so the live training model is never touched.
      checkpoint: the trainer's checkpoint of the evaluated step.
      run_dir: the run directory, whose hparams.json is copied beside the weights.
      best_dir: where they go (replaced whole).
      best_json: what best.json holds; its "step" names the checkpoint.
    Returns:
      The best checkpoint's prefix.
    """
    restore_checkpoint(checkpoint, model=model)
    files = {BEST_FILE: json.dumps(best_json, indent=2) + "\n"}
    if os.path.exists(run_dir.spec_file):
        with open(run_dir.spec_file, encoding="utf-8") as f:
            files[HPARAMS_FILE] = f.read()
    return write_model_dir(model, best_dir, best_json["step"], files)
