"""The batches a run trains and evaluates on."""
import tensorflow as tf

from t2t_lite.config import HParams
from t2t_lite.data.batching import batch_by_length
from t2t_lite.data.problem import Problem

SHUFFLE_BUFFER = 10_000


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
    """The first eval_steps dev batches (all of them for 0), in the same order at every evaluation."""
    t = hparams.train
    dataset = batch_by_length(problem.dataset("dev"), t.batch_size, t.max_length)
    return dataset.take(eval_steps) if eval_steps > 0 else dataset
