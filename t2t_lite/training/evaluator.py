"""Evaluation during training: dev loss, the dev metric, the best checkpoint so far and early stopping.

The evaluator is handed what measures the model (a dev-loss function and, when the run decodes, a
dev-metric function) and what saves a checkpoint as the best; it owns what follows from the scores:
the log line and summaries, best/ and dev_scores.json (BestCheckpoint), and patience.
"""
import dataclasses
from collections.abc import Callable

import tensorflow as tf

from t2t_lite.run_dir import RunDir
from t2t_lite.training.best_checkpoint import BestCheckpoint
from t2t_lite.training.dev_score import DevScore


@dataclasses.dataclass(frozen=True)
class EvalResult:
    loss: float
    accuracy: float
    dev: DevScore | None = None  # the dev metric, when the run decodes dev sentences


def dev_loss(eval_step: Callable, batches) -> EvalResult:
    """The label-smoothed loss and accuracy per target token of eval_step's model over the dev batches."""
    totals = [0.0, 0.0, 0.0]  # the loss sum, correct tokens and target tokens
    for batch in batches:
        totals = [total + float(value) for total, value in zip(totals, eval_step(batch))]
    loss_sum, correct, tokens = totals
    return EvalResult(loss=loss_sum / max(tokens, 1.0), accuracy=correct / max(tokens, 1.0))


class Evaluator:
    """Evaluates checkpoints and keeps the best one.

    Args:
      dev_loss: the model's label-smoothed dev loss and accuracy (an EvalResult without `dev`).
      dev_metric: decodes and scores dev sentences; None when the run does not.
      best: the run's BestCheckpoint (its patience is the run's).
      tracked_metric: "loss" or "bleu" (the dev metric's own name is taken from its scores).
      save_best: save_best(checkpoint, best_dir, best_json) copies a checkpoint's weights into best/.
      summaries: the "eval" summary writer.
      log: where the lines go.
    """

    def __init__(self, dev_loss: Callable[[], EvalResult], dev_metric: Callable[[], DevScore] | None,
                 best: BestCheckpoint, tracked_metric: str, save_best: Callable[[str, RunDir, dict], None],
                 summaries: tf.summary.SummaryWriter, log: Callable[[str], None] = print):
        self.dev_loss, self.dev_metric, self.best = dev_loss, dev_metric, best
        self.tracked_metric, self.save_best, self.summaries, self.log = tracked_metric, save_best, summaries, log

    @property
    def should_stop(self) -> bool:
        """Whether early stopping's patience has run out (possibly in an earlier process)."""
        return self.best.should_stop

    def evaluate(self, step: int) -> EvalResult:
        """Dev loss, accuracy and (when the run decodes) the dev metric at `step`; logged and summarised."""
        result = self.dev_loss()
        if self.dev_metric is not None:
            result = dataclasses.replace(result, dev=self.dev_metric())
        with self.summaries.as_default(step=step):
            tf.summary.scalar("loss", result.loss)
            tf.summary.scalar("accuracy", result.accuracy)
            if result.dev is not None:
                tf.summary.scalar(result.dev.name.replace(" ", "_"), result.dev.value)
        dev = f"  {result.dev}" if result.dev is not None else ""
        self.log(f"step {step}: dev loss {result.loss:.4f}  dev accuracy {result.accuracy:.4f}{dev}")
        return result

    def evaluate_checkpoint(self, step: int, checkpoint: str) -> bool:
        """Evaluates the checkpoint just saved at `step` and records it; returns whether the run should stop."""
        result = self.evaluate(step)
        scores = {"loss": result.loss}
        if result.dev is not None:
            scores[result.dev.name] = result.dev.value
        metric = "loss" if self.tracked_metric == "loss" else result.dev.name
        if self.best.record(step, metric, scores, lambda *best: self.save_best(checkpoint, *best)):
            self.log(f"best checkpoint so far ({self.best.describe_best()}) copied to {self.best.best_dir.path}")
        elif self.best.patience:
            self.log(f"no improvement on the best {self.best.describe_best()} for "
                     f"{self.best.state.evaluations_without_improvement} of {self.best.patience} "
                     f"evaluations (early stopping patience)")
        return self.should_stop

    def early_stopping_line(self) -> str:
        return (f"early stopping: {self.best.state.evaluations_without_improvement} evaluations in a row without "
                f"improving on the best {self.best.describe_best()}; the best checkpoint is in "
                f"{self.best.best_dir.path}")

    def compare_with_best(self, name: str, score: float | None) -> None:
        """Says whether a checkpoint (the averaged one) scoring `score` on the best's metric beat the best.

        score is None when it could not be scored as the best was (chosen on the dev metric in an
        earlier run, while this one decodes nothing); nothing is said then.
        """
        state = self.best.state
        if score is None or state.best_step is None:
            return
        verdict = ("both scored the same" if score == state.best_score
                   else f"the {'averaged' if self.best.improves(score) else 'best'} checkpoint scored better")
        digits = digits_to_tell_apart(score, state.best_score)
        self.log(f"averaged checkpoint {name}: dev {state.metric} {score:.{digits}g}; best checkpoint: "
                 f"{self.best.describe_best(digits)}; {verdict}")


def digits_to_tell_apart(a: float, b: float) -> int:
    """The fewest significant digits, at least 4, at which a and b print differently (4 when they are equal):
    two dev losses a verdict calls different must not print alike (0.5084 and 0.5084)."""
    return next((digits for digits in range(4, 18) if f"{a:.{digits}g}" != f"{b:.{digits}g}"), 4)
