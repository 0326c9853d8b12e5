"""The training loop: batches, steps, progress, evaluation, checkpoints, resume, clean stops."""
import dataclasses
import os
import shutil
import tempfile
import time
from collections.abc import Callable

import keras
import tensorflow as tf

from t2t_lite import precision
from t2t_lite.config import HParams
from t2t_lite.data.batching import batch_by_length, largest_batch_shapes
from t2t_lite.data.problem import Problem
from t2t_lite.errors import UserError
from t2t_lite.models import build_model
from t2t_lite.training import distribution
from t2t_lite.training.averaging import average_after_training
from t2t_lite.training.averaging_schedule import SOURCES_SUBDIR, AveragingSources, averaging_points, averaging_steps
from t2t_lite.training.best_checkpoint import METRIC_CHOICES, BestCheckpoint, save_model_weights_as_best
from t2t_lite.training.dev_score import DevScore, DevScorer
from t2t_lite.training.progress import Progress
from t2t_lite.training.progress import clock as hms
from t2t_lite.training.signals import stop_on_signals
from t2t_lite.training.steps import TrainStep, make_eval_step, make_optimizer
from t2t_lite.training.time_budget import TrainingClock
from t2t_lite.training.warm_start import warm_start

SHUFFLE_BUFFER = 10_000
# Restored from every checkpoint. The other entries, "data" (the iterator's position), "loss_scale"
# (float16) and "clock" (seconds trained), are restored when the checkpoint has them and this run uses them.
REQUIRED_STATE = ("model", "optimizer")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """How long, how observably and on what numerics to train; not part of the model's hparams."""

    output_dir: str
    train_steps: int
    # Dev batches per evaluation; 0 evaluates the whole dev split.
    eval_steps: int = 100
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 20
    random_seed: int = 1234
    log_every_steps: int = 100
    # XLA for each replica's forward and backward pass; batches are then padded to bucket bounds.
    jit_compile: bool = False
    # "none", "mixed_float16" (GPUs, with loss scaling) or "mixed_bfloat16" (CPUs, TPUs, Ampere+ GPUs);
    # "auto" (the command's default): mixed_bfloat16 where the CPU has native bfloat16, else none.
    # A property of the hardware, not the model: checkpoints hold float32 variables either way.
    mixed_precision: str = "none"
    # Under mixed precision, the loss's projection onto the vocabulary with float32 operands and
    # gradients (its logits are summed in float32 either way): a loss curve closer to float32's,
    # for a fifth to a third less speed (TrainStep).
    float32_output_projection: bool = False
    # Stop after this many updates in a row were skipped for a non-finite loss or gradient.
    # Float16 loss scaling skips a few on its own while it finds its scale.
    max_nonfinite_steps: int = 20
    # Before training, one forward and backward pass on the largest batch shape the bucketing
    # can produce, so a batch that does not fit in memory fails at once rather than hours in.
    memory_probe: bool = True
    # At every evaluation, decode the first this many dev sentences with hparams.decode's beam settings and
    # score them with the problem's dev metric (BLEU, bracket F1, exact match); 0 decodes nothing.
    # None: the problem's dev_metric_sentences (200 for translation and parsing, 0 for algorithmic problems).
    eval_bleu_sentences: int | None = None
    # What chooses the best checkpoint (output_dir/best/): "bleu", the problem's dev metric, or "loss";
    # None: "bleu" when eval_bleu_sentences > 0, else "loss".
    best_checkpoint_metric: str | None = None
    # Stop after this many evaluations in a row without a better best-checkpoint score; 0 never stops.
    early_stopping_patience: int = 0
    # A fresh run starts from this run directory's (or checkpoint's) weights: fine-tuning (warm_start.py).
    # A run that has checkpoints of its own resumes from them instead.
    warm_start_from: str | None = None
    # With warm_start_from, also take the source's Adam moments (the step and schedule restart either way).
    warm_start_optimizer: bool = False
    # Stop, save and average (as at train_steps) once the run has trained this long (time_budget.py: counted
    # across restarts, start-up excluded); whichever of this and train_steps comes first ends it. 0 = no budget.
    train_minutes: float = 0.0

    @property
    def tracked_metric(self) -> str:
        """best_checkpoint_metric with its default resolved (eval_bleu_sentences must be resolved first)."""
        return self.best_checkpoint_metric or ("bleu" if self.eval_bleu_sentences > 0 else "loss")


@dataclasses.dataclass(frozen=True)
class EvalResult:
    loss: float
    accuracy: float
    dev: DevScore | None = None  # the dev metric, when RunConfig.eval_bleu_sentences > 0


def train_batches(problem: Problem, hparams: HParams, seed: int, pad_to_boundary: bool = False,
                  input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
    """The endless, shuffled, length-bucketed training batches of one input pipeline.

    Args:
      problem: where the examples come from.
      hparams: train.batch_size (tokens per batch, i.e. per replica) and train.max_length.
      seed: the shuffle seed.
      pad_to_boundary: pad every batch to its bucket's bound, a fixed set of shapes for XLA.
      input_context: from distribute_datasets_from_function; with several input
        pipelines (one per worker) this one keeps every num_input_pipelines-th example.
    Returns:
      Batches {"inputs" int32 [B, T_src], "targets" int32 [B, T_tgt]}.
    """
    t = hparams.train
    dataset = problem.dataset("train")
    if input_context is not None and input_context.num_input_pipelines > 1:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    dataset = dataset.repeat().shuffle(SHUFFLE_BUFFER, seed=seed)
    return batch_by_length(dataset, t.batch_size, t.max_length, pad_to_boundary=pad_to_boundary,
                           both_sides=t.bucket_both_sides).prefetch(tf.data.AUTOTUNE)


def eval_batches(problem: Problem, hparams: HParams, eval_steps: int) -> tf.data.Dataset:
    t = hparams.train
    dataset = batch_by_length(problem.dataset("dev"), t.batch_size, t.max_length)
    return dataset.take(eval_steps) if eval_steps > 0 else dataset


class NonFiniteTrainingError(UserError):
    """Too many updates in a row were skipped because the loss or a gradient was not finite."""


class Trainer:
    """Owns the model, optimizer, data iterator and checkpoints of one run directory.

    Under a distribution strategy every replica takes its own batches of
    hparams.train.batch_size tokens and the loss is normalised by the global
    token count (see TrainStep). Only the chief writes checkpoints, summaries
    and the averaged checkpoint; other workers save into a temporary
    directory, because tf.distribute may need every worker to take part in a save.

    Args:
      problem: where the examples come from.
      hparams: the resolved hparams (vocab_size set).
      run: RunConfig.
      log: where progress lines go.
      strategy: from distribution.make_strategy; default TensorFlow's default (one device).
      clock: the monotonic clock the time budget is counted with (tests pass their own).
    """

    def __init__(self, problem: Problem, hparams: HParams, run: RunConfig, log=print,
                 strategy: tf.distribute.Strategy | None = None, clock: Callable[[], float] = time.monotonic):
        if run.eval_bleu_sentences is None:
            run = dataclasses.replace(run, eval_bleu_sentences=problem.dev_metric_sentences)
        if run.best_checkpoint_metric not in (None, *METRIC_CHOICES):
            raise UserError(f"--best_checkpoint_metric must be one of {', '.join(METRIC_CHOICES)}; "
                            f"got {run.best_checkpoint_metric!r}")
        if run.tracked_metric == "bleu" and run.eval_bleu_sentences < 1:
            raise UserError("the best checkpoint can be chosen on the dev metric only when it is computed: "
                            "set --eval_bleu_sentences=N (N > 0), or --best_checkpoint_metric=loss")
        if run.train_minutes < 0:
            raise UserError(f"--train_minutes must be 0 (no time budget) or more, got {run.train_minutes}")
        if run.train_minutes and distribution.cluster_tasks() > 1:
            # Each worker's clock would end its run at a different step.
            raise UserError("--train_minutes works in one process; give a multi-worker run --train_steps instead")
        if run.mixed_precision == precision.AUTO:
            run = dataclasses.replace(run, mixed_precision=precision.resolve(precision.AUTO))
            log(precision.describe_auto(run.mixed_precision))
            if run.float32_output_projection and run.mixed_precision == "none":
                # An explicit --mixed_precision=none with it is refused by the command; auto chose float32 here.
                log("--float32_output_projection is ignored: training runs in float32 here")
                run = dataclasses.replace(run, float32_output_projection=False)
        self.problem, self.hparams, self.run, self.log = problem, hparams, run, log
        self.strategy = strategy or tf.distribute.get_strategy()
        self.is_chief = distribution.is_chief(self.strategy)
        self._saved_step = None  # the step this process last saved or restored
        self.skipped_steps, self._skipped_in_a_row = 0, 0  # updates skipped for non-finite values
        self.clock = TrainingClock(clock)
        self.tokens_trained = 0.0  # target tokens of this process's updates: what a throughput is made of
        self._averaging: AveragingSources | None = None  # set up by train() when train.average_span > 0
        keras.utils.set_random_seed(run.random_seed)
        self._build_model_and_steps()
        # TensorFlow 2.21 checkpoints a tf.data iterator but not a distributed one.
        self._data_checkpointed = distribution.is_default(self.strategy)
        self.train_iterator = iter(self._train_data(tf.train.latest_checkpoint(run.output_dir)))
        self._state = self._checkpointed_state()
        self.checkpoint = tf.train.Checkpoint(**self._state)
        self._save_dir = run.output_dir if self.is_chief else tempfile.mkdtemp(prefix="t2t-lite-worker-")
        self.manager = tf.train.CheckpointManager(self.checkpoint, self._save_dir, max_to_keep=run.keep_checkpoint_max,
                                                  step_counter=self.optimizer.iterations, checkpoint_name="ckpt")
        self._writers = {name: (tf.summary.create_file_writer(os.path.join(run.output_dir, name)) if self.is_chief
                                else tf.summary.create_noop_writer()) for name in ("train", "eval")}
        # Every worker reads the best-so-far state (a finished early stop ends every worker at once); only the
        # chief decodes the dev sample and writes the state.
        self.best = BestCheckpoint(run.output_dir, higher_is_better=run.tracked_metric != "loss",
                                   patience=run.early_stopping_patience, log=log)
        self._dev_scorer = (DevScorer(problem, self.model, hparams.decode, run.eval_bleu_sentences)
                            if self.is_chief and run.eval_bleu_sentences > 0 else None)
        self._plain_model = None  # built on first use: the best and averaged checkpoints are restored into it
        self._dev_batches = None  # built on first use
        self._stopping_early = False

    def _build_model_and_steps(self) -> None:
        """Creates model, optimizers and steps under the strategy and the mixed-precision policy."""
        t = self.hparams.train
        with self.strategy.scope(), precision.layers_compute_in(self.run.mixed_precision):
            self.model = build_model(self.hparams)
            # Adam is what checkpoints hold and the learning rate is read from; under
            # float16 a LossScaleOptimizer around it applies the updates.
            self.optimizer = make_optimizer(self.hparams)
            self._update_optimizer = precision.loss_scaled(self.optimizer, self.run.mixed_precision)
            # A Keras 3 optimizer under MirroredStrategy needs its variables before the first strategy.run.
            self._update_optimizer.build(self.model.trainable_variables)
            self._train_step = TrainStep(self.model, self._update_optimizer, self.strategy, t.label_smoothing,
                                         t.batch_size, t.accumulation_steps, self.run.jit_compile,
                                         self.run.float32_output_projection)
        self._eval_step = make_eval_step(self.model, t.label_smoothing)

    def _checkpointed_state(self) -> dict:
        """What a checkpoint holds: REQUIRED_STATE, plus "data" and "loss_scale" when this run has them."""
        state = {"model": self.model, "optimizer": self.optimizer, "clock": self.clock.variable}
        if self._data_checkpointed:
            # The data iterator is checkpointed with the model so a resumed run
            # sees exactly the batches an uninterrupted one would have.
            state["data"] = self.train_iterator
        if self._update_optimizer is not self.optimizer:
            state["loss_scale"] = self._update_optimizer
        return state

    def _train_data(self, resume_from: str | None):
        """Training batches; under a strategy each replica takes its own batches of batch_size tokens.

        Shuffled with random_seed, unless resuming from a checkpoint that cannot
        restore the data position: then with random_seed + step, so the resumed
        run does not replay the batches it began with.
        """
        seed = self.run.random_seed
        if resume_from and not (self._data_checkpointed and "data" in _saved_entries(resume_from)):
            seed += _checkpoint_step(resume_from)

        def dataset_fn(input_context):
            return train_batches(self.problem, self.hparams, seed, self.run.jit_compile, input_context)

        return self.strategy.distribute_datasets_from_function(dataset_fn)

    @property
    def step(self) -> int:
        return int(self.optimizer.iterations.numpy())

    def restore_latest(self) -> None:
        """Resumes from the newest readable checkpoint in output_dir, if any.

        A checkpoint that cannot be read (a truncated or missing file) is
        reported and the one before it is tried; the next save of that step
        number overwrites it. Model and optimizer must match the checkpoint.
        The data position and the float16 loss scale come back when both the
        checkpoint and this run have them, so a run may resume under another
        distribution or precision. A run with no checkpoint yet starts from
        run.warm_start_from's weights when it is given.
        """
        state = tf.train.get_checkpoint_state(self.run.output_dir)
        candidates = list(reversed(state.all_model_checkpoint_paths)) if state else []
        for path in candidates:
            try:
                self._restore(path)
            except (tf.errors.OpError, ValueError, AssertionError, IndexError) as error:  # IndexError: truncated file
                reason = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
                self.log(f"checkpoint {path} is unreadable ({reason}); trying the one before it")
                continue
            self._saved_step = self.step
            self.log(f"resumed from {path} at step {self.step}")
            return
        if candidates:
            raise UserError(f"no checkpoint in --output_dir {self.run.output_dir!r} can be read; "
                            f"move them away to start afresh")
        if self.run.warm_start_from:
            source = warm_start(self.model, self.optimizer, self.hparams, self.run.warm_start_from,
                                self.run.warm_start_optimizer)
            self.log(f"warm start from {source}" + (" with its optimizer state" if self.run.warm_start_optimizer
                                                      else "") + ": step 0, a fresh learning-rate schedule")

    def _restore(self, path: str) -> None:
        saved = _saved_entries(path)
        state = {k: v for k, v in self._state.items() if k in REQUIRED_STATE or k in saved}
        tf.train.Checkpoint(**state).restore(path).assert_existing_objects_matched().expect_partial()

    def train(self) -> None:
        """Trains to run.train_steps, saving and evaluating every save_checkpoints_steps; stops cleanly on a signal.

        A signal to any worker stops every worker after the same step. Every
        evaluation may update output_dir/best/ (best_checkpoint.py); after
        run.early_stopping_patience evaluations without a better one the run
        ends as if it had reached train_steps. When training ends, the chief
        averages the last hparams.train.average_last_checkpoints checkpoints
        into output_dir/averaged/ and says whether they beat the best checkpoint.
        With hparams.train.average_span > 0 those are saved at the end of the run
        (averaging_schedule.py). With run.train_minutes the run also ends, as at
        train_steps, once it has trained that long.
        """
        self.restore_latest()
        start_step = self.step
        if self.best.should_stop:
            self.log(self._early_stopping_line() + " (in an earlier run); raise --early_stopping_patience to go on")
            return
        if self._budget_spent():
            self.log(f"the time budget of {self.run.train_minutes:g} minutes was spent by an earlier run "
                     f"(step {self.step}); raise --train_minutes to go on")
            return
        self._set_up_averaging()
        try:
            if self.run.memory_probe and self.step < self.run.train_steps:
                self.probe_memory()
            with stop_on_signals() as stop:
                if self._train_until_done(stop):
                    if self._averaging is not None:
                        # The step a stop vote came with can cross a point; a resumed run counts it as passed.
                        self._averaging.save_if_due(self._averaging_position(), self.step)
                    self.save()
                    if not self._stopping_early:
                        self.log(f"{stop.signal_name or 'stop request from another worker'} received: "
                                 f"saved step {self.step}, stopping")
                        return
        finally:
            if not self.is_chief:
                shutil.rmtree(self._save_dir, ignore_errors=True)
        if self._stopping_early:
            self.log(self._early_stopping_line())
        elif self._budget_spent():
            self.log(f"time budget of {self.run.train_minutes:g} minutes spent at step {self.step}")
        if self.step > start_step:
            self.log(f"trained steps {start_step + 1}-{self.step}: {self.tokens_trained:,.0f} target tokens; "
                     f"{hms(self.clock.seconds())} of training in this run directory")
        if self.step > start_step and self._averaging is not None:
            self._averaging.save(self.step)  # the end of training is always the last one averaged
        if self.step > start_step and self.is_chief:
            # The paper decodes from the average of the last checkpoints (6.1); do it once, when training ends.
            averaged = average_after_training(self.run.output_dir, self.hparams.train.average_last_checkpoints,
                                              self.log, checkpoint_dir=self._averaging and self._averaging.directory)
            if averaged and self.best.state.best_step is not None:
                self._compare_averaged_with_best(averaged)

    def _train_until_done(self, stop) -> bool:
        """Steps to run.train_steps (returns False) or until any worker is asked to stop (returns True)."""
        progress = Progress(first_step=self.step, last_step=self.run.train_steps)
        stop_requested = False
        self.clock.start()
        while self.step < self.run.train_steps and not self._budget_spent():
            result = self._train_step(self.train_iterator, stop.requested or stop_requested)
            if result.stop:
                return True
            if result.skipped:
                self._count_skipped_step(result.loss)
                continue
            self._skipped_in_a_row = 0
            self.tokens_trained += result.tokens
            progress.add(result.loss, result.tokens)
            if self.step % self.run.log_every_steps == 0:
                self._log_progress(progress)
                progress.restart_window()
            if self._averaging is not None:
                self._averaging.save_if_due(self._averaging_position(), self.step)
            if (self.step % self.run.save_checkpoints_steps == 0 or self.step == self.run.train_steps
                    or self._budget_spent()):
                self.save()
                if self.is_chief:
                    self._track_best(self.evaluate())
                progress.restart_window()  # keep eval time out of tokens/s
                if self.best.should_stop and self.is_chief:
                    self._stopping_early = True
                    if distribution.cluster_tasks() <= 1:
                        return True
                    # The other workers learn it from the stop vote of the next step, which they all take.
                    stop_requested = True
        return False

    def _budget_spent(self) -> bool:
        return self.run.train_minutes > 0 and self.clock.seconds() >= self.run.train_minutes * 60

    def _averaging_position(self) -> float:
        """Where the run is on the averaging schedule: seconds trained under a time budget, else steps."""
        return self.clock.seconds() if self.run.train_minutes else self.step

    def _set_up_averaging(self) -> None:
        """With train.average_span > 0, the points of the run's end to save checkpoints for averaging at."""
        t = self.hparams.train
        if t.average_span <= 0 or t.average_last_checkpoints <= 0:
            return
        if self.run.train_minutes:
            points = averaging_points(self.run.train_minutes * 60, t.average_span, t.average_last_checkpoints)
            where = ", ".join(hms(p) for p in points) + " of training"
        else:
            points = averaging_steps(self.run.train_steps, t.average_span, t.average_last_checkpoints)
            where = "steps " + ", ".join(str(p) for p in points)
        self._averaging = AveragingSources(points, self._averaging_position(), tf.train.Checkpoint(model=self.model),
                                           os.path.join(self._save_dir, SOURCES_SUBDIR),
                                           t.average_last_checkpoints, self.step)
        self.log(f"checkpoints for averaging at {where} (the last {t.average_span:g} of the run), "
                 f"kept in {self._averaging.directory}")

    def _count_skipped_step(self, loss: float) -> None:
        """Logs an update skipped for a non-finite loss or gradient; stops the run after too many in a row.

        Nothing is saved when stopping: the skipped updates changed no variable,
        and the newest checkpoint is the last good state.
        """
        self.skipped_steps += 1
        self._skipped_in_a_row += 1
        failed_step = self.step + 1
        with self._writers["train"].as_default(step=failed_step):
            tf.summary.scalar("skipped_nonfinite_steps", self.skipped_steps)
        self.log(f"step {failed_step}: loss {loss} or a gradient is not finite; update skipped "
                 f"({self._skipped_in_a_row} in a row, {self.skipped_steps} in this run)")
        if self._skipped_in_a_row >= self.run.max_nonfinite_steps:
            latest = self.manager.latest_checkpoint or "none yet"
            raise NonFiniteTrainingError(
                f"step {failed_step}: {self._skipped_in_a_row} updates in a row had a non-finite loss or gradient, "
                f"stopping (newest checkpoint: {latest}); lower train.learning_rate_constant, raise "
                f"train.warmup_steps or check the training data, or raise --max_nonfinite_steps")

    def probe_memory(self) -> None:
        """One forward and backward pass per replica on the largest batch shapes the bucketing can produce.

        Nothing is updated: the dropout seeds are put back afterwards, so a run
        with the probe trains exactly like one without it. tensor2tensor sorted
        its first batches longest-first for the same reason.
        """
        t = self.hparams.train
        seeds = [(variable, variable.numpy()) for variable in self.model.non_trainable_variables]
        for rows, length in largest_batch_shapes(t.batch_size, t.max_length):
            batch = {name: tf.ones([rows, length], tf.int32) for name in ("inputs", "targets")}
            start = time.perf_counter()
            try:
                self.strategy.run(self._train_step.gradients, args=(batch,))
            except tf.errors.ResourceExhaustedError:
                raise UserError(
                    f"a batch of {rows} x {length} tokens per replica (train.batch_size={t.batch_size} tokens, "
                    f"train.max_length={t.max_length}) does not fit in memory; lower train.batch_size or "
                    f"train.max_length with --hparams (raise train.accumulation_steps to keep the tokens per "
                    f"update)") from None
            self.log(f"memory probe: a {rows} x {length} batch fits ({time.perf_counter() - start:.1f} s)")
        for variable, value in seeds:
            variable.assign(value)

    def save(self) -> str:
        """Writes a checkpoint for the current step unless this run already saved or resumed from it."""
        if self._saved_step == self.step:
            return self.manager.latest_checkpoint
        self._saved_step = self.step
        self.clock.record()
        return self.manager.save(checkpoint_number=self.step)

    def evaluate(self) -> EvalResult:
        """Label-smoothed loss, per-token accuracy and (with eval_bleu_sentences) the dev metric; logged and summarised."""
        result = self._dev_loss(self._eval_step)
        if self._dev_scorer is not None:
            result = dataclasses.replace(result, dev=self._dev_scorer.score())
        with self._writers["eval"].as_default(step=self.step):
            tf.summary.scalar("loss", result.loss)
            tf.summary.scalar("accuracy", result.accuracy)
            if result.dev is not None:
                tf.summary.scalar(result.dev.name.replace(" ", "_"), result.dev.value)
        dev = f"  {result.dev}" if result.dev is not None else ""
        self.log(f"step {self.step}: dev loss {result.loss:.4f}  dev accuracy {result.accuracy:.4f}{dev}")
        return result

    def _dev_loss(self, eval_step) -> EvalResult:
        if self._dev_batches is None:  # made once: every evaluation reads the same batches from the start
            self._dev_batches = eval_batches(self.problem, self.hparams, self.run.eval_steps)
        loss_sum = correct = tokens = 0.0
        for batch in self._dev_batches:
            batch_loss, batch_correct, batch_tokens = eval_step(batch)
            loss_sum, correct, tokens = loss_sum + float(batch_loss), correct + float(batch_correct), tokens + float(batch_tokens)
        return EvalResult(loss=loss_sum / max(tokens, 1.0), accuracy=correct / max(tokens, 1.0))

    def _track_best(self, result: EvalResult) -> None:
        """Hands the evaluation of the checkpoint just saved to the best-checkpoint bookkeeping."""
        scores = {"loss": result.loss}
        if result.dev is not None:
            scores[result.dev.name] = result.dev.value
        metric = "loss" if self.run.tracked_metric == "loss" else result.dev.name
        checkpoint = self.manager.latest_checkpoint

        def save_best(best_dir, best_json):
            save_model_weights_as_best(self._plain(), checkpoint, self.run.output_dir, best_dir, best_json)

        if self.best.record(self.step, metric, scores, save_best):
            self.log(f"best checkpoint so far ({self.best.describe_best()}) copied to {self.best.best_dir}")
        elif self.run.early_stopping_patience:
            self.log(f"no improvement on the best {self.best.describe_best()} for "
                     f"{self.best.state.evaluations_without_improvement} of {self.run.early_stopping_patience} "
                     f"evaluations (early stopping patience)")

    def _plain(self) -> keras.Model:
        """A model of the run's hparams outside the distribution strategy, to restore saved checkpoints into."""
        if self._plain_model is None:
            self._plain_model = build_model(self.hparams)
        return self._plain_model

    def _early_stopping_line(self) -> str:
        return (f"early stopping: {self.best.state.evaluations_without_improvement} evaluations in a row without "
                f"improving on the best {self.best.describe_best()}; the best checkpoint is in {self.best.best_dir}")

    def _compare_averaged_with_best(self, averaged: str) -> None:
        """Scores the averaged checkpoint as the best one was scored, and says which did better."""
        model = self._plain()
        tf.train.Checkpoint(model=model).restore(averaged).expect_partial().assert_existing_objects_matched()
        state = self.best.state
        if state.metric == "loss":
            score = self._dev_loss(make_eval_step(model, self.hparams.train.label_smoothing)).loss
        elif self._dev_scorer is not None:
            score = self._dev_scorer.score_other(model).value
        else:
            return  # the best was chosen on the dev metric in an earlier run, but this one decodes nothing
        if score == state.best_score:
            verdict = "both scored the same"
        else:
            verdict = f"the {'averaged' if self.best.improves(score) else 'best'} checkpoint scored better"
        self.log(f"averaged checkpoint {averaged}: dev {state.metric} {score:.4g}; best checkpoint: "
                 f"{self.best.describe_best()}; {verdict}")

    def _log_progress(self, progress: Progress) -> None:
        """Logs and summarises the mean loss and throughput of the steps since the last progress line."""
        learning_rate, tokens_per_second = float(self.optimizer.learning_rate), progress.tokens_per_second()
        with self._writers["train"].as_default(step=self.step):
            tf.summary.scalar("loss", progress.mean_loss)
            tf.summary.scalar("learning_rate", learning_rate)
            tf.summary.scalar("target_tokens_per_second", tokens_per_second)
        if self.run.train_minutes:
            seconds, budget = self.clock.seconds(), self.run.train_minutes * 60
            times = f"trained {hms(seconds)}  remaining ~{hms(max(budget - seconds, 0.0))} of the time budget"
        else:
            times = progress.times(self.step)
        self.log(f"step {self.step}/{self.run.train_steps}  loss {progress.mean_loss:.4f} "
                 f"(mean of {progress.steps} steps)  lr {learning_rate:.3e}  "
                 f"target tokens/s {tokens_per_second:,.0f}  {times}")


def _saved_entries(checkpoint_path: str) -> set[str]:
    """The top-level names ("model", "optimizer", "data", ...) a checkpoint holds."""
    return {name.split("/")[0] for name, _ in tf.train.list_variables(checkpoint_path)}


def _checkpoint_step(checkpoint_path: str) -> int:
    return int(checkpoint_path.rsplit("-", 1)[1])  # the trainer names checkpoints ckpt-<step>
