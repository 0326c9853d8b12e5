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


def make_train_step(model, optimizer, label_smoothing: float, jit_compile: bool = False):
    """A tf.function: batch -> (mean loss over target tokens, number of target tokens); applies one update."""

    @tf.function(input_signature=[BATCH_SIGNATURE], jit_compile=jit_compile)
    def train_step(batch):
        with tf.GradientTape() as tape:
            logits = model(batch, training=True)  # [B, T_tgt, V] float32
            loss_sum, tokens = smoothed_cross_entropy(logits, batch["targets"], label_smoothing)
            loss = loss_sum / tf.maximum(tokens, 1.0)
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss, tokens

    return train_step


def make_eval_step(model, label_smoothing: float):
    """A tf.function: batch -> (loss sum, correct tokens, target tokens), no update."""

    @tf.function(input_signature=[BATCH_SIGNATURE])
    def eval_step(batch):
        logits = model(batch, training=False)
        loss_sum, tokens = smoothed_cross_entropy(logits, batch["targets"], label_smoothing)
        correct, _ = correct_tokens(logits, batch["targets"])
        return loss_sum, correct, tokens

    return eval_step
