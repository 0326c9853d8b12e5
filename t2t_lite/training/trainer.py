"""The training loop: batches, steps, progress, evaluation, checkpoints, resume, clean stops."""
import dataclasses
import os
import time

import keras
import tensorflow as tf

from t2t_lite.config import HParams
from t2t_lite.data.batching import batch_by_length
from t2t_lite.data.problem import Problem
from t2t_lite.models import build_model
from t2t_lite.training.averaging import average_after_training
from t2t_lite.training.signals import stop_on_signals
from t2t_lite.training.steps import make_eval_step, make_optimizer, make_train_step

SHUFFLE_BUFFER = 10_000


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """How long and how observably to train; not part of the model's hparams."""

    output_dir: str
    train_steps: int
    # Dev batches per evaluation; 0 evaluates the whole dev split.
    eval_steps: int = 100
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 20
    random_seed: int = 1234
    log_every_steps: int = 100
    jit_compile: bool = False


@dataclasses.dataclass(frozen=True)
class EvalResult:
    loss: float
    accuracy: float


def train_batches(problem: Problem, hparams: HParams, seed: int) -> tf.data.Dataset:
    """The endless, shuffled, length-bucketed training batches."""
    t = hparams.train
    dataset = problem.dataset("train").repeat().shuffle(SHUFFLE_BUFFER, seed=seed)
    return batch_by_length(dataset, t.batch_size, t.max_length).prefetch(tf.data.AUTOTUNE)


def eval_batches(problem: Problem, hparams: HParams, eval_steps: int) -> tf.data.Dataset:
    t = hparams.train
    dataset = batch_by_length(problem.dataset("dev"), t.batch_size, t.max_length)
    return dataset.take(eval_steps) if eval_steps > 0 else dataset


class Trainer:
    """Owns the model, optimizer, data iterator and checkpoints of one run directory.

    Args:
      problem: where the examples come from.
      hparams: the resolved hparams (vocab_size set).
      run: RunConfig.
      log: where progress lines go.
    """

    def __init__(self, problem: Problem, hparams: HParams, run: RunConfig, log=print):
        self.problem, self.hparams, self.run, self.log = problem, hparams, run, log
        keras.utils.set_random_seed(run.random_seed)
        self.model = build_model(hparams)
        self.optimizer = make_optimizer(hparams)
        self.optimizer.build(self.model.trainable_variables)
        self.train_iterator = iter(train_batches(problem, hparams, run.random_seed))
        # The data iterator is checkpointed with the model so a resumed run
        # sees exactly the batches an uninterrupted one would have.
        self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer, data=self.train_iterator)
        self.manager = tf.train.CheckpointManager(self.checkpoint, run.output_dir, max_to_keep=run.keep_checkpoint_max,
                                                  step_counter=self.optimizer.iterations, checkpoint_name="ckpt")
        self._train_step = make_train_step(self.model, self.optimizer, hparams.train.label_smoothing, run.jit_compile)
        self._eval_step = make_eval_step(self.model, hparams.train.label_smoothing)
        self._writers = {name: tf.summary.create_file_writer(os.path.join(run.output_dir, name))
                         for name in ("train", "eval")}

    @property
    def step(self) -> int:
        return int(self.optimizer.iterations.numpy())

    def restore_latest(self) -> None:
        """Resumes from the newest checkpoint in output_dir, if any."""
        latest = self.manager.latest_checkpoint
        if latest:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
            self.log(f"resumed from {latest} at step {self.step}")

    def train(self) -> None:
        """Trains to run.train_steps, saving and evaluating every save_checkpoints_steps; stops cleanly on a signal.

        When training reaches train_steps, the last hparams.train.average_last_checkpoints
        checkpoints are averaged into output_dir/averaged/.
        """
        self.restore_latest()
        start_step = self.step
        window_tokens, window_start = 0.0, time.perf_counter()
        with stop_on_signals() as stop:
            while self.step < self.run.train_steps and not stop.requested:
                loss, tokens = self._train_step(next(self.train_iterator))
                window_tokens += float(tokens)
                if self.step % self.run.log_every_steps == 0:
                    elapsed = time.perf_counter() - window_start
                    self._log_progress(float(loss), window_tokens / elapsed)
                    window_tokens, window_start = 0.0, time.perf_counter()
                if self.step % self.run.save_checkpoints_steps == 0 or self.step == self.run.train_steps:
                    self.save()
                    self.evaluate()
                    window_tokens, window_start = 0.0, time.perf_counter()  # keep eval time out of tokens/s
            if stop.requested:
                self.save()
                self.log(f"{stop.signal_name} received: saved step {self.step}, stopping")
                return
        if self.step > start_step:
            # The paper decodes from the average of the last checkpoints (6.1); do it once, when training ends.
            average_after_training(self.run.output_dir, self.hparams.train.average_last_checkpoints, self.log)

    def save(self) -> str:
        """Writes a checkpoint for the current step (unless one exists) and returns its path."""
        if self.manager.latest_checkpoint and self.manager.latest_checkpoint.endswith(f"-{self.step}"):
            return self.manager.latest_checkpoint
        return self.manager.save(checkpoint_number=self.step)

    def evaluate(self) -> EvalResult:
        """Label-smoothed loss and per-token accuracy on the dev split; logged and summarised."""
        loss_sum = correct = tokens = 0.0
        for batch in eval_batches(self.problem, self.hparams, self.run.eval_steps):
            batch_loss, batch_correct, batch_tokens = self._eval_step(batch)
            loss_sum, correct, tokens = loss_sum + float(batch_loss), correct + float(batch_correct), tokens + float(batch_tokens)
        result = EvalResult(loss=loss_sum / max(tokens, 1.0), accuracy=correct / max(tokens, 1.0))
        with self._writers["eval"].as_default(step=self.step):
            tf.summary.scalar("loss", result.loss)
            tf.summary.scalar("accuracy", result.accuracy)
        self.log(f"step {self.step}: dev loss {result.loss:.4f}  dev accuracy {result.accuracy:.4f}")
        return result

    def _log_progress(self, loss: float, tokens_per_second: float) -> None:
        learning_rate = float(self.optimizer.learning_rate)
        with self._writers["train"].as_default(step=self.step):
            tf.summary.scalar("loss", loss)
            tf.summary.scalar("learning_rate", learning_rate)
            tf.summary.scalar("target_tokens_per_second", tokens_per_second)
        self.log(f"step {self.step}/{self.run.train_steps}  loss {loss:.4f}  lr {learning_rate:.3e}  "
                 f"target tokens/s {tokens_per_second:,.0f}")
