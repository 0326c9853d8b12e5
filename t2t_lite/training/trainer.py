"""The Trainer: one run directory's model, optimizer and data, put together with the loop's parts.

The parts: run_config (the settings, resolved once before the Trainer is made), checkpoints (restore
with fallback, save, averaging sources), loop (updates until a stop rule says why the run ends),
evaluator (dev loss, dev metric, best checkpoint, patience). What is left here is building the model and steps under the strategy and
precision, and the end of a run.
"""
import functools
import time
from collections.abc import Callable

import keras
import tensorflow as tf

from t2t_lite import precision
from t2t_lite.config import HParams
from t2t_lite.data.problem import Problem
from t2t_lite.models import build_model
from t2t_lite.run_dir import EVAL_LOGS, TRAIN_LOGS, RunDir, restore_checkpoint
from t2t_lite.training import checkpoints as ckpt, distribution, loop, run_config
from t2t_lite.training.averaging import average_after_training, finish_averaging
from t2t_lite.training.averaging_schedule import AveragingSources, end_of_run_points
from t2t_lite.training.batches import eval_batches, train_batches
from t2t_lite.training.best_checkpoint import BestCheckpoint, save_model_weights_as_best
from t2t_lite.training.dev_score import DevScorer
from t2t_lite.training.evaluator import EvalResult, Evaluator, dev_loss
from t2t_lite.training.loop import StopReason
from t2t_lite.training.memory_probe import probe_memory
from t2t_lite.training.progress import Progress, clock as hms
from t2t_lite.training.signals import stop_on_signals
from t2t_lite.training.schedules import EndAwareSchedule, set_last_step
from t2t_lite.training.steps import TrainStep, learning_rate_schedule, make_eval_step, make_optimizer
from t2t_lite.training.time_budget import PaceRecord, TrainingClock
from t2t_lite.training.warm_start import warm_start


class Trainer:
    """Trains one run directory: resumes it, steps, evaluates, saves, and ends it (averaging).

    Under a distribution strategy every replica takes its own batches of hparams.train.batch_size
    tokens and the loss is normalised by the global token count (TrainStep). Only the chief writes
    checkpoints, summaries and the averaged checkpoint.

    Args:
      problem: where the examples come from.
      hparams: the resolved hparams (vocab_size set).
      run: the run's settings, resolved for this problem, hparams and strategy (run_config.resolve_for).
      log: where progress lines go.
      strategy: from distribution.make_strategy; default TensorFlow's default (one device). How many
        processes train is read from it.
      clock: the monotonic clock the time budget is counted with (tests pass their own).
    """

    def __init__(self, problem: Problem, hparams: HParams, run: run_config.ResolvedRunConfig, log=print,
                 strategy: tf.distribute.Strategy | None = None, clock: Callable[[], float] = time.monotonic):
        if not isinstance(run, run_config.ResolvedRunConfig):
            raise TypeError(f"Trainer takes the settings resolved once, by run_config.resolve_for; got a "
                            f"{type(run).__name__}")
        self.run, self.problem, self.hparams, self.log = run, problem, hparams, log
        self.run_dir = run.output_dir  # a RunDir since the RunConfig was made, handed to the parts that write into it
        self.strategy = strategy or tf.distribute.get_strategy()
        self.is_chief = distribution.is_chief(self.strategy)
        self.clock = TrainingClock(clock)
        self.pace = PaceRecord()  # checkpointed with the clock: a resumed run plans its last step as before
        keras.utils.set_random_seed(self.run.random_seed)
        t = hparams.train
        with self.strategy.scope(), precision.layers_compute_in(self.run.mixed_precision):
            self.model = build_model(hparams)
            self.model.configure_features(problem)
            # Adam is what checkpoints hold and the learning rate is read from; under
            # float16 a LossScaleOptimizer around it applies the updates.
            # Kept to move its last step as the end of training is estimated (end-aware schedules only).
            self.schedule = learning_rate_schedule(hparams, self.run.train_steps)
            self.optimizer = make_optimizer(hparams, self.schedule)
            self._update_optimizer = precision.loss_scaled(self.optimizer, self.run.mixed_precision)
            # A Keras 3 optimizer under MirroredStrategy needs its variables before the first strategy.run.
            self._update_optimizer.build(self.model.trainable_variables)
            self.train_step = TrainStep(self.model, self._update_optimizer, self.strategy, t.label_smoothing,
                                        t.batch_size, t.accumulation_steps, self.run.jit_compile,
                                        self.run.float32_output_projection)
        self._eval_step = make_eval_step(self.model, t.label_smoothing)
        self._writers = {name: (tf.summary.create_file_writer(self.run_dir.logs(name))
                                if self.is_chief else tf.summary.create_noop_writer())
                         for name in (TRAIN_LOGS, EVAL_LOGS)}
        # Read by every worker (a finished early stop ends them all); decoded and written by the chief.
        self._dev_scorer = (DevScorer(problem, self.model, hparams.decode, self.run.eval_bleu_sentences)
                            if self.is_chief and self.run.eval_bleu_sentences > 0 else None)
        # Made once: every evaluation reads the same dev batches from the start.
        self._dev_batches = eval_batches(problem, hparams, self.run.eval_steps)
        self.evaluator = Evaluator(
            lambda: self.dev_loss(self._eval_step), self._dev_scorer and self._dev_scorer.score,
            BestCheckpoint(self.run_dir, higher_is_better=self.run.tracked_metric != "loss",
                           patience=self.run.early_stopping_patience, log=log),
            self.run.tracked_metric, self._save_best, self._writers[EVAL_LOGS], log)
        self.tokens_trained = 0.0  # target tokens of this process's updates: what a throughput is made of

    @property
    def step(self) -> int:
        return int(self.optimizer.iterations.numpy())

    def training_data(self, seed: int):
        """Training batches; under a strategy each replica takes its own batches of batch_size tokens."""
        return self.strategy.distribute_datasets_from_function(
            lambda context: train_batches(self.problem, self.hparams, seed, self.run.jit_compile, context))

    def train(self) -> StopReason:
        """Resumes the run, trains until a stop rule ends it, and ends it; returns why it stopped.

        Saves and evaluates every save_checkpoints_steps and at the end; a signal to any worker stops
        every worker after the same step, saved. When the run ends otherwise (train_steps, time
        budget, early stopping), the chief averages the last checkpoints into output_dir/averaged/.
        """
        restored = self.restore()
        # TensorFlow 2.21 checkpoints a tf.data iterator but not a distributed one.
        data_checkpointed = distribution.is_default(self.strategy)
        iterator = iter(self.training_data(ckpt.data_seed(self.run.random_seed, restored, data_checkpointed)))
        state = self._checkpointed_state()
        if data_checkpointed:
            # With the model, so a resumed run sees exactly the batches an uninterrupted one would have.
            ckpt.restore_data(iterator, restored)
            state[ckpt.DATA] = iterator
        checkpoints = ckpt.Checkpoints(self.run_dir, state, self.optimizer.iterations,
                                       self.run.keep_checkpoint_max, self.is_chief, self.clock.record,
                                       restored and restored.step)
        try:
            with checkpoints.stop_on_storage_faults():  # a full disk: one line, the checkpoints intact
                return self._train(iterator, checkpoints)
        finally:
            checkpoints.close()

    def _checkpointed_state(self) -> dict:
        """What a checkpoint holds, but the data position (checkpoints.py)."""
        state = {"model": self.model, "optimizer": self.optimizer, "clock": self.clock.variable, "pace": self.pace}
        if self._update_optimizer is not self.optimizer:
            state["loss_scale"] = self._update_optimizer
        return state

    def restore(self) -> ckpt.Restored | None:
        """Resumes the newest readable checkpoint (all but the data position), or warm-starts a fresh run."""
        restored = ckpt.restore_latest(self.run_dir, self._checkpointed_state(), self.log)
        if restored is not None:
            self.log(f"resumed from {restored.path} at step {restored.step}")
        elif self.run.warm_start_from:
            source = warm_start(self.model, self.optimizer, self.hparams, self.run.warm_start_from,
                                self.run.warm_start_optimizer, self.problem)
            self.log(f"warm start from {source}" + (" with its optimizer state" if self.run.warm_start_optimizer
                                                      else "") + ": step 0, a fresh learning-rate schedule")
        return restored

    def _train(self, iterator, checkpoints: ckpt.Checkpoints) -> StopReason:
        start_step = self.step
        end_aware = isinstance(self.schedule, EndAwareSchedule)
        rules = loop.StopRules(self.run.train_steps, self.run.train_minutes * 60, self.clock,
                               self.run.save_checkpoints_steps,
                               on_plan=functools.partial(set_last_step, self.schedule) if end_aware else None,
                               pace=self.pace)
        if self.evaluator.should_stop:
            self.log(self.evaluator.early_stopping_line() + " (in an earlier run); raise "
                     "`early_stopping_patience` to go on")
            self._finish_averaging()
            return StopReason.EARLY_STOPPING
        if rules.budget_spent():
            self.log(f"the time budget of {self.run.train_minutes:g} minutes was spent by an earlier run "
                     f"(step {self.step}); raise `train_minutes` to go on")
            self._finish_averaging()
            return StopReason.TIME_BUDGET
        averaging = self._averaging_sources(checkpoints)
        if self.run.memory_probe and self.step < self.run.train_steps:
            probe_memory(self.strategy, self.train_step.gradients, self.model, self.hparams, self.log)
        progress = Progress(first_step=self.step, last_step=self.run.train_steps)
        guard = loop.NonFiniteGuard(self.run.max_nonfinite_steps)

        def updated(step, result):
            guard.passed()
            self.tokens_trained += result.tokens
            progress.add(result.loss, result.tokens)
            if averaging is not None:
                averaging.save_if_due(self._averaging_position(), step)

        def logged(step):
            self._log_progress(step, progress, rules.last_step)
            progress.restart_window()

        def checkpointed(step):
            checkpoints.save(step)
            stop = self.is_chief and self.evaluator.evaluate_checkpoint(step, checkpoints.latest)
            progress.restart_window()  # keep eval time out of tokens/s
            return stop

        def skipped(failed_step, loss):
            with self._writers[TRAIN_LOGS].as_default(step=failed_step):
                tf.summary.scalar("skipped_nonfinite_steps", guard.skipped + 1)
            self.log(guard.skip(failed_step, loss, checkpoints.latest))

        with stop_on_signals() as stop:
            self.clock.start()
            reason = loop.run(lambda vote: self.train_step(iterator, vote), lambda: self.step, rules,
                              self.run.save_checkpoints_steps, self.run.log_every_steps,
                              loop.Hooks(updated, logged, checkpointed, skipped), stop,
                              several_workers=distribution.worker_count(self.strategy) > 1)
        if reason in (StopReason.SIGNAL, StopReason.EARLY_STOPPING):
            if averaging is not None:  # the step a stop vote came with can cross a point
                averaging.save_if_due(self._averaging_position(), self.step)
            checkpoints.save(self.step)
        if reason is StopReason.SIGNAL:
            self.log(f"{stop.signal_name or 'stop request from another worker'} received: saved step "
                     f"{self.step}, stopping")
            return reason
        self._end_run(reason, start_step, averaging)
        return reason

    def _end_run(self, reason: StopReason, start_step: int, averaging: AveragingSources | None) -> None:
        """What ends every run that was not interrupted: the summary line and the averaged checkpoint."""
        if reason is StopReason.EARLY_STOPPING:
            self.log(self.evaluator.early_stopping_line())
        elif reason is StopReason.TIME_BUDGET:
            self.log(f"time budget of {self.run.train_minutes:g} minutes spent at step {self.step}")
        if self.step == start_step:
            self._finish_averaging()
            return
        self.log(f"trained steps {start_step + 1}-{self.step}: {self.tokens_trained:,.0f} target tokens; "
                 f"{hms(self.clock.seconds())} of training in this run directory")
        # Update s used the schedule at s - 1; an end-aware schedule is read with the last step it ended at.
        rates = keras.ops.convert_to_numpy(self.schedule(tf.range(self.step, dtype=tf.int64)))
        self.log(f"learning rate: {rates.max():.3e} at its highest, {rates[-1]:.3e} on the last update "
                 f"(step {self.step})")
        if averaging is not None:
            averaging.save(self.step)  # the end of training is always the last one averaged
        if self.is_chief:
            # The paper decodes from the average of the last checkpoints (6.1); do it once, when training ends.
            averaged = average_after_training(self.run_dir, self.hparams.train.average_last_checkpoints,
                                              self.log, sources=averaging and averaging.run_dir)
            if averaged:
                self.evaluator.compare_with_best(averaged, self._score_as_best_was(averaged))

    def _finish_averaging(self) -> None:
        """Training ended in an earlier run: the averaged checkpoint, if a signal, a full disk or a kill kept
        that run from writing it (averaging.finish_averaging)."""
        if self.is_chief:
            finish_averaging(self.run_dir, self.hparams.train, self.log)

    def evaluate(self) -> EvalResult:
        """Dev loss, accuracy and (when the run decodes) the dev metric of the model now; logged and summarised."""
        return self.evaluator.evaluate(self.step)

    def dev_loss(self, eval_step) -> EvalResult:
        """The dev loss and accuracy of eval_step's model (make_eval_step) over the run's dev batches."""
        return dev_loss(eval_step, self._dev_batches)

    @functools.cached_property
    def _plain_model(self) -> keras.Model:
        """A model outside the strategy, built when first needed, to restore saved checkpoints into."""
        return build_model(self.hparams)

    def _save_best(self, checkpoint: str, best_dir: RunDir, best_json: dict) -> None:
        save_model_weights_as_best(self._plain_model, checkpoint, self.run_dir, best_dir, best_json)

    def _score_as_best_was(self, checkpoint: str) -> float | None:
        """A checkpoint's score on the metric the best checkpoint was chosen on; None if this run cannot tell."""
        model = self._plain_model
        restore_checkpoint(checkpoint, model=model)  # its own run's: a mismatch is a bug, not the user's
        if self.evaluator.best.state.metric == "loss":
            return self.dev_loss(make_eval_step(model, self.hparams.train.label_smoothing)).loss
        return self._dev_scorer.score(model).value if self._dev_scorer is not None else None

    def _averaging_position(self) -> float:
        """Where the run is on the averaging schedule: seconds trained under a time budget, else steps."""
        return self.clock.seconds() if self.run.train_minutes else self.step

    def _averaging_sources(self, checkpoints: ckpt.Checkpoints) -> AveragingSources | None:
        """With train.average_span > 0, where at the run's end to save the checkpoints to average."""
        t = self.hparams.train
        if t.average_span <= 0 or t.average_last_checkpoints <= 0:
            return None
        points, where = end_of_run_points(self.run.train_steps, self.run.train_minutes * 60, t.average_span,
                                          t.average_last_checkpoints)
        sources = checkpoints.averaging_sources(points, self._averaging_position(), self.model,
                                                t.average_last_checkpoints, self.step)
        self.log(f"checkpoints for averaging at {where} (the last {t.average_span:g} of the run), "
                 f"kept in {sources.run_dir.path}")
        return sources

    def _log_progress(self, step: int, progress: Progress, last_step: int) -> None:
        """Logs and summarises the mean loss and throughput of the steps since the last progress line."""
        learning_rate = float(self.optimizer.learning_rate)
        with self._writers[TRAIN_LOGS].as_default(step=step):
            tf.summary.scalar("loss", progress.mean_loss)
            tf.summary.scalar("learning_rate", learning_rate)
            tf.summary.scalar("target_tokens_per_second", progress.tokens_per_second())
        self.log(progress.line(step, last_step, learning_rate, self.clock.seconds(), self.run.train_minutes * 60))
