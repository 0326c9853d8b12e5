"""The compiled training and evaluation steps."""
import keras
import tensorflow as tf

from t2t_lite.config import HParams
from t2t_lite.training.losses import correct_tokens, smoothed_cross_entropy
from t2t_lite.training.schedules import NoamSchedule

BATCH_SIGNATURE = {
    "inputs": tf.TensorSpec([None, None], tf.int32),
    "targets": tf.TensorSpec([None, None], tf.int32),
}


def learning_rate_schedule(hparams: HParams) -> NoamSchedule:
    """The set's learning-rate schedule (paper 5.3, or t2t's constant 2.0 / warmup 8000)."""
    return NoamSchedule(hparams.model.d_model, hparams.train.warmup_steps, hparams.train.learning_rate_constant)


def make_optimizer(hparams: HParams) -> keras.optimizers.Optimizer:
    """Adam with the Transformer learning-rate schedule."""
    t = hparams.train
    return keras.optimizers.Adam(learning_rate=learning_rate_schedule(hparams), beta_1=t.adam_beta1, beta_2=t.adam_beta2,
                                 epsilon=t.adam_epsilon)


class TrainStep:
    """One optimizer update per call, from accumulation_steps micro-batches on every replica.

    The update is the gradient of (summed loss of every target token in the
    step) / (number of those tokens), however the tokens fall across replicas
    and micro-batches. Each replica differentiates loss_sum / nominal_tokens (a
    fixed divisor that keeps float16 gradients in range) and sums over its
    micro-batches; the token count is then all-reduced, each replica rescales
    by nominal_tokens / global tokens, and the optimizer sums the replicas'
    gradients (Keras all-reduces them with SUM).

    Construct it inside strategy.scope(): it creates the accumulators.

    Args:
      model: the model, created in strategy.scope().
      optimizer: what applies the update (a LossScaleOptimizer under float16), built in strategy.scope().
      strategy: the tf.distribute strategy of model and optimizer.
      label_smoothing: eps_ls.
      nominal_tokens: tokens per replica micro-batch (hparams.train.batch_size).
      accumulation_steps: micro-batches per update.
      jit_compile: compile each replica's forward and backward pass with XLA.
    """

    def __init__(self, model, optimizer, strategy, label_smoothing: float, nominal_tokens: int,
                 accumulation_steps: int = 1, jit_compile: bool = False):
        self.model, self.optimizer, self.strategy = model, optimizer, strategy
        self.label_smoothing, self.nominal_tokens = label_smoothing, float(nominal_tokens)
        self.accumulation_steps = accumulation_steps
        self._loss_scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
        self._sums = _Accumulators(model.trainable_variables) if accumulation_steps > 1 else None
        self._gradients = tf.function(self._replica_gradients, input_signature=[BATCH_SIGNATURE],
                                      jit_compile=jit_compile)
        self._accumulate = tf.function(self._accumulate_micro_batch)
        self._update = tf.function(self._update_from_micro_batch)

    def __call__(self, iterator, stop_requested: bool = False):
        """Takes accumulation_steps batches (per replica) from iterator and applies one update.

        Args:
          iterator: yields {"inputs", "targets"} batches; per replica under a distribution strategy.
          stop_requested: this process was asked to stop; the answer tells every process.
        Returns:
          (loss: mean over the step's target tokens, tokens: target tokens in the step
          over all replicas, stop: True if any process asked to stop).
        """
        for _ in range(self.accumulation_steps - 1):
            self._accumulate(iterator)
        loss, tokens, stop_votes = self._update(iterator, tf.constant(float(stop_requested)))
        return loss, tokens, bool(stop_votes > 0)

    def _replica_gradients(self, batch):
        """One replica's micro-batch -> (gradients of loss_sum / nominal_tokens, loss_sum, target tokens)."""
        with tf.GradientTape() as tape:
            logits = self.model(batch, training=True)  # [B, T_tgt, V] float32
            loss_sum, tokens = smoothed_cross_entropy(logits, batch["targets"], self.label_smoothing)
            # Multiplied by the loss scale under float16; scale_loss is the identity otherwise.
            scaled = self.optimizer.scale_loss(loss_sum / self.nominal_tokens)
        gradients = tape.gradient(scaled, self.model.trainable_variables)
        # An unshared embedding's gradient is IndexedSlices; Adam densifies it anyway, and sums need dense.
        return [tf.convert_to_tensor(g) for g in gradients], loss_sum, tokens

    def _accumulate_micro_batch(self, iterator):
        self.strategy.run(lambda batch: self._sums.add(*self._gradients(batch)), args=(next(iterator),))

    def _update_from_micro_batch(self, iterator, stop_requested):
        results = self.strategy.run(self._replica_update, args=(next(iterator), stop_requested))
        # Every replica returns the same all-reduced values.
        return [self.strategy.experimental_local_results(value)[0] for value in results]

    def _replica_update(self, batch, stop_requested):
        """Adds the last micro-batch to the sums, normalises by the global token count, applies the update."""
        gradients, loss_sum, tokens = self._gradients(batch)
        if self._sums is not None:
            gradients, loss_sum, tokens = self._sums.take(gradients, loss_sum, tokens)
        not_finite = tf.zeros(())
        if self._loss_scaled:
            not_finite = 1.0 - tf.cast(self.optimizer.check_finite(gradients), tf.float32)
        # One all-reduce carries everything the replicas must agree on. The stop flag is copied onto
        # this replica's device: MirroredStrategy cannot all-reduce a tensor placed on none.
        loss_sum, tokens, not_finite, stop_votes = tf.distribute.get_replica_context().all_reduce(
            tf.distribute.ReduceOp.SUM, [loss_sum, tokens, not_finite, tf.identity(stop_requested)])
        rescale = self.nominal_tokens / tf.maximum(tokens, 1.0)
        if self._loss_scaled:
            # LossScaleOptimizer judges finiteness per replica (or by replica 0 alone under MirroredStrategy);
            # NaN on every replica makes all of them skip the update and lower the scale together.
            rescale = tf.where(not_finite > 0, float("nan"), rescale)
        self.optimizer.apply_gradients(zip([g * rescale for g in gradients], self.model.trainable_variables))
        return loss_sum / tf.maximum(tokens, 1.0), tokens, stop_votes


class _Accumulators:
    """Each replica's running sums of gradients, loss and target tokens between two updates.

    Args:
      variables: the trainable variables whose gradients are summed.
    """

    def __init__(self, variables):
        self.gradients = [_replica_local_zeros(v.shape, v.dtype) for v in variables]
        self.loss_sum, self.tokens = _replica_local_zeros((), tf.float32), _replica_local_zeros((), tf.float32)

    def add(self, gradients, loss_sum, tokens) -> None:
        for total, gradient in zip(self.gradients, gradients):
            total.assign_add(gradient)
        self.loss_sum.assign_add(loss_sum)
        self.tokens.assign_add(tokens)

    def take(self, gradients, loss_sum, tokens):
        """The sums with these values added, as (gradients, loss_sum, tokens); the sums are reset to zero."""
        totals = ([total + gradient for total, gradient in zip(self.gradients, gradients)],
                  self.loss_sum + loss_sum, self.tokens + tokens)
        for total in self.gradients + [self.loss_sum, self.tokens]:
            total.assign(tf.zeros_like(total))
        return totals


def _replica_local_zeros(shape, dtype) -> tf.Variable:
    # ON_READ: each replica adds to its own copy, with no communication until the update.
    return tf.Variable(tf.zeros(shape, dtype), trainable=False, synchronization=tf.VariableSynchronization.ON_READ,
                       aggregation=tf.VariableAggregation.SUM)


def make_eval_step(model, label_smoothing: float):
    """A tf.function: batch -> (loss sum, correct tokens, target tokens), no update."""

    @tf.function(input_signature=[BATCH_SIGNATURE])
    def eval_step(batch):
        logits = model(batch, training=False)
        loss_sum, tokens = smoothed_cross_entropy(logits, batch["targets"], label_smoothing)
        correct, _ = correct_tokens(logits, batch["targets"])
        return loss_sum, correct, tokens

    return eval_step
