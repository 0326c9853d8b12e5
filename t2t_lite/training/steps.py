"""The compiled training and evaluation steps."""
import dataclasses

import keras
import tensorflow as tf
from keras.optimizers.schedules import LearningRateSchedule

from t2t_lite import compat
from t2t_lite.config import HParams
from t2t_lite.training.adam import FusedAdam
from t2t_lite.training.losses import loss_slices
from t2t_lite.training.schedules import LinearDecaySchedule, NoamSchedule, WarmupStableDecaySchedule

BATCH_SIGNATURE = {"inputs": tf.TensorSpec([None, None], tf.int32), "targets": tf.TensorSpec([None, None], tf.int32)}


def learning_rate_schedule(hparams: HParams, last_step: int | None = None) -> LearningRateSchedule:
    """The set's learning-rate schedule, hparams.train.schedule (config.py).

    Args:
      hparams: model.d_model and train's schedule, warmup_steps, learning_rate_constant,
        min_learning_rate_fraction, warmup_fraction and cooldown_fraction.
      last_step: where linear_decay and wsd reach their floor; the training loop moves it
        (schedules.set_last_step). Default hparams.train.train_steps; rsqrt ignores it.
    """
    t, d_model = hparams.train, hparams.model.d_model
    if t.schedule == "rsqrt":
        return NoamSchedule(d_model, t.warmup_steps, t.learning_rate_constant)
    end_aware = (d_model, t.warmup_steps, t.train_steps if last_step is None else last_step,
                 t.learning_rate_constant, t.min_learning_rate_fraction, t.warmup_fraction)
    if t.schedule == "linear_decay":
        return LinearDecaySchedule(*end_aware)
    return WarmupStableDecaySchedule(*end_aware, t.cooldown_fraction)


def make_optimizer(hparams: HParams, schedule: LearningRateSchedule | None = None) -> keras.optimizers.Optimizer:
    """Adam with the set's learning-rate schedule, or with `schedule` (the loop keeps it to move its last step)."""
    t = hparams.train
    schedule = learning_rate_schedule(hparams) if schedule is None else schedule
    return FusedAdam(learning_rate=schedule, beta_1=t.adam_beta1, beta_2=t.adam_beta2, epsilon=t.adam_epsilon)


@dataclasses.dataclass(frozen=True)
class StepResult:
    """What one TrainStep call did, as Python values."""

    loss: float  # mean over the step's target tokens (NaN or inf when skipped)
    tokens: float  # target tokens in the step, over all replicas
    stop: bool  # some process was asked to stop
    skipped: bool  # a loss or gradient was not finite on some replica: no variable changed


class TrainStep:
    """One optimizer update per call, from accumulation_steps micro-batches on every replica.

    The update is the gradient of (summed loss of every target token in the
    step) / (number of those tokens), however the tokens fall across replicas
    and micro-batches. Each replica differentiates loss_sum / nominal_tokens (a
    fixed divisor that keeps float16 gradients in range) and sums over its
    micro-batches; the token count is then all-reduced, each replica rescales
    by nominal_tokens / global tokens, and the optimizer sums the replicas'
    gradients (Keras all-reduces them with SUM).

    A non-finite loss or gradient on any replica skips the update on every
    replica: weights, optimizer slots and the step counter stay as they were
    (under float16 the loss scale is lowered, as loss scaling does anyway).

    Construct it inside strategy.scope(): it creates the accumulators.

    Args:
      model: the model, created in strategy.scope().
      optimizer: what applies the update (a LossScaleOptimizer under float16), built in strategy.scope().
      strategy: the tf.distribute strategy of model and optimizer.
      label_smoothing: eps_ls.
      nominal_tokens: tokens per replica micro-batch (hparams.train.batch_size).
      accumulation_steps: micro-batches per update.
      jit_compile: compile each replica's forward and backward pass with XLA.
      float32_output_projection: under mixed precision, give the loss's
        projection onto the vocabulary float32 operands (the kernel not
        rounded to the compute dtype) and take its two gradient matmuls in
        float32 too. Without it the logits are still summed in float32, from
        compute-dtype operands (float32_product.py), and the gradient matmuls
        run in the compute dtype. It brings the bfloat16 loss curve closer to
        float32's, at the cost of running these products without the CPU's
        bfloat16 matmul units (docs/performance.md has both figures).

    Attributes:
      gradients: the compiled pass of one replica, batch -> (gradients, loss_sum,
        target tokens), nothing applied; the trainer's memory probe calls it too.
    """

    def __init__(self, model, optimizer, strategy, label_smoothing: float, nominal_tokens: int,
                 accumulation_steps: int = 1, jit_compile: bool = False, float32_output_projection: bool = False):
        self.model, self.optimizer, self.strategy = model, optimizer, strategy
        self.float32_output_projection = float32_output_projection
        self.label_smoothing, self.nominal_tokens = label_smoothing, float(nominal_tokens)
        self.accumulation_steps = accumulation_steps
        self.loss_slices = loss_slices(nominal_tokens, model.vocab_size)
        self._sums = _Accumulators(model.trainable_variables) if accumulation_steps > 1 else None
        # No autograph, here and in the decoder: the steps write tf.cond and tf.while_loop themselves, and
        # converting the source of every function they call cost seconds at each process's first step.
        self.gradients = tf.function(self._replica_gradients, input_signature=[BATCH_SIGNATURE],
                                      jit_compile=jit_compile, autograph=False)
        self._accumulate = tf.function(self._accumulate_micro_batch, autograph=False)
        self._update = tf.function(self._update_from_micro_batch, autograph=False)

    def __call__(self, iterator, stop_requested: bool = False):
        """Takes accumulation_steps batches (per replica) from iterator and applies one update.

        Args:
          iterator: yields {"inputs", "targets"} batches; per replica under a distribution strategy.
          stop_requested: this process was asked to stop; the answer tells every process.
        Returns:
          StepResult.
        """
        for _ in range(self.accumulation_steps - 1):
            self._accumulate(iterator)
        loss, tokens, stop_votes, not_finite = self._update(iterator, tf.constant(float(stop_requested)))
        return StepResult(loss=float(loss), tokens=float(tokens), stop=bool(stop_votes > 0),
                          skipped=bool(not_finite > 0))

    def _replica_gradients(self, batch):
        """One replica's micro-batch -> (gradients of loss_sum / nominal_tokens, loss_sum, target tokens)."""
        with tf.GradientTape() as tape:
            states = self.model.decoder_states(batch, training=True)  # [B, T_tgt, D]
            if self.float32_output_projection:
                states = tf.cast(states, tf.float32)  # the states' gradient is cast back on the way down
            # The projection onto the vocabulary happens inside the loss, in slices: no [B, T_tgt, V] logits.
            loss_sum, tokens, _, _ = self.model.token_losses(states, batch["targets"], self.label_smoothing,
                                                             self.loss_slices, differentiable=True)
            # Multiplied by the loss scale under float16; scale_loss is the identity otherwise.
            scaled = self.optimizer.scale_loss(loss_sum / self.nominal_tokens)
        gradients = tape.gradient(scaled, self.model.trainable_variables)
        # An unshared embedding's gradient is IndexedSlices; Adam densifies it anyway, and sums need dense.
        return [tf.convert_to_tensor(g) for g in gradients], loss_sum, tokens

    def _accumulate_micro_batch(self, iterator):
        self.strategy.run(lambda batch: self._sums.add(*self.gradients(batch)), args=(next(iterator),))

    def _update_from_micro_batch(self, iterator, stop_requested):
        results = self.strategy.run(self._replica_update, args=(next(iterator), stop_requested))
        # Every replica returns the same all-reduced values.
        return [self.strategy.experimental_local_results(value)[0] for value in results]

    def _replica_update(self, batch, stop_requested):
        """Adds the last micro-batch to the sums, normalises by the global token count, applies the update."""
        gradients, loss_sum, tokens = self.gradients(batch)
        if self._sums is not None:
            gradients, loss_sum, tokens = self._sums.take(gradients, loss_sum, tokens)
        not_finite = 1.0 - tf.cast(_all_finite(gradients + [loss_sum]), tf.float32)
        # One all-reduce carries everything the replicas must agree on. The stop flag is copied onto
        # this replica's device: MirroredStrategy cannot all-reduce a tensor placed on none.
        loss_sum, tokens, not_finite, stop_votes = tf.distribute.get_replica_context().all_reduce(
            tf.distribute.ReduceOp.SUM, [loss_sum, tokens, not_finite, tf.identity(stop_requested)])
        rescale = self.nominal_tokens / tf.maximum(tokens, 1.0)
        variables = self.model.trainable_variables
        if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
            # LossScaleOptimizer judges finiteness per replica (or by replica 0 alone under MirroredStrategy);
            # NaN on every replica makes all of them skip the update and lower the scale together.
            rescale = tf.where(not_finite > 0, float("nan"), rescale)
            self.optimizer.apply_gradients(zip([g * rescale for g in gradients], variables))
        else:
            _apply_unless(not_finite > 0, self.optimizer, [g * rescale for g in gradients], variables)
        return loss_sum / tf.maximum(tokens, 1.0), tokens, stop_votes, not_finite


def _all_finite(tensors) -> tf.Tensor:
    return tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(t)) for t in tensors]))


def _apply_unless(skip, optimizer, gradients, variables) -> None:
    """optimizer.apply_gradients, unless skip (a boolean every replica agrees on).

    The same construction as Keras's LossScaleOptimizer: a strategy that
    applies updates through merge_call cannot have that call inside a tf.cond
    in replica context, so the cond is taken in cross-replica context.
    """

    def apply(replica_gradients):
        optimizer.apply_gradients(zip(replica_gradients, variables))

    if compat.strategy_supports_no_merge_call():
        tf.cond(skip, lambda: None, lambda: apply(gradients))
        return

    def cross_replica(strategy, skip, gradients):
        skip = strategy.experimental_local_results(skip)[0]  # identical on every replica: it was all-reduced
        tf.cond(skip, lambda: None, lambda: strategy.extended.call_for_each_replica(apply, args=(gradients,)))

    tf.distribute.get_replica_context().merge_call(cross_replica, args=(skip, gradients))


class _Accumulators:
    """Each replica's running sums of gradients, loss and target tokens between two updates.

    Args:
      variables: the trainable variables whose gradients are summed.
    """

    def __init__(self, variables):
        # One per gradient, then the loss sum's and the target tokens'.
        self.totals = [_replica_local_zeros(v.shape, v.dtype) for v in variables] + [
            _replica_local_zeros((), tf.float32) for _ in ("loss_sum", "tokens")]

    def add(self, gradients, loss_sum, tokens) -> None:
        for total, value in zip(self.totals, [*gradients, loss_sum, tokens]):
            total.assign_add(value)

    def take(self, gradients, loss_sum, tokens):
        """The sums with these values added, as (gradients, loss_sum, tokens); the sums are reset to zero."""
        sums = [total + value for total, value in zip(self.totals, [*gradients, loss_sum, tokens])]
        for total in self.totals:
            total.assign(tf.zeros_like(total))
        return sums[:-2], sums[-2], sums[-1]


def _replica_local_zeros(shape, dtype) -> tf.Variable:
    # ON_READ: each replica adds to its own copy, with no communication until the update.
    return tf.Variable(tf.zeros(shape, dtype), trainable=False, synchronization=tf.VariableSynchronization.ON_READ,
                       aggregation=tf.VariableAggregation.SUM)


def make_eval_step(model, label_smoothing: float):
    """A tf.function: batch -> (loss sum, correct tokens, target tokens), no update."""

    @tf.function(input_signature=[BATCH_SIGNATURE], autograph=False)
    def eval_step(batch):
        losses = model.token_losses(model.decoder_states(batch, training=False), batch["targets"], label_smoothing)
        return losses.loss_sum, losses.correct, losses.tokens

    return eval_step
