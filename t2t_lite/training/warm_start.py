"""Warm start: a new run that begins from another run's weights (fine-tuning, t2t's --warm_start_from).

The new run has its own output_dir, step, learning-rate schedule and
(unless asked otherwise) optimizer state; only the weights come from the
source. Its problem and data may differ, but its vocabulary and model shape
must be the source's, or the weights would mean nothing.
"""
import dataclasses
import os

import keras

from t2t_lite.config import HParams
from t2t_lite.data.problem import Problem
from t2t_lite.errors import UserError
from t2t_lite.registry import problems
from t2t_lite.run_dir import (CheckpointMismatch, as_run_dir, checkpoint_exists, find_checkpoint, restore_checkpoint,
                              spec_beside)

# Model settings that change no weight's shape or meaning: a fine-tuning run may choose its own.
FREE_MODEL_FIELDS = ("dropout", "attention_dropout", "relu_dropout")


def source_checkpoint(source: str) -> str:
    """The checkpoint a --warm_start_from names: a checkpoint path, or a run directory (its averaged
    checkpoint if any, else its newest, as the decoder picks)."""
    if checkpoint_exists(source):
        return source
    if os.path.isdir(source):
        return find_checkpoint(as_run_dir(source), None)  # where --warm_start_from turns out to name a run
    raise UserError(f"`warm_start_from` {source!r} is neither a checkpoint (no {source}.index) nor a run directory")


def check_compatible(source_hparams: HParams, hparams: HParams, checkpoint: str) -> None:
    """Refuses, in one line naming what differs, a source whose vocabulary or model shape is not this run's."""
    source, model = dataclasses.asdict(source_hparams.model), dataclasses.asdict(hparams.model)
    differences = [f"{name} {source[name]} vs {model[name]}" for name in model
                   if name not in FREE_MODEL_FIELDS and source.get(name) != model[name]]
    if source_hparams.model_name != hparams.model_name:
        differences.insert(0, f"model {source_hparams.model_name} vs {hparams.model_name}")
    if differences:
        raise UserError(f"cannot warm start from {checkpoint!r}: its model differs from this run's in "
                        f"{', '.join(differences)} (source vs this run); use the source's hparams set and "
                        f"vocabulary")


def check_same_vocabulary(source_spec, problem: Problem, checkpoint: str) -> None:
    """Refuses a source whose vocabulary is another than this run's, even of the same size: its ids would mean
    other pieces. The source's recorded fingerprint decides (wherever its data_dir went); a run from before it
    was recorded is told by its data_dir, and passes where that cannot be read (moved) or for a fixed vocabulary."""
    ours = problem.vocabulary_fingerprint()
    if ours is None:
        return
    theirs = source_spec.vocabulary_sha256
    if theirs is None and source_spec.problem in problems:
        theirs = problems.get(source_spec.problem)(source_spec.data_dir).vocabulary_fingerprint()
    if theirs is not None and theirs != ours:
        raise UserError(f"cannot warm start from {checkpoint!r}: its vocabulary is not this run's (in "
                        f"{problem.data_dir}), so its ids mean other pieces; prepare this run's data with the "
                        f"source's vocabulary (t2t-lite-datagen `vocab_from`=<the source run>), or train from scratch")


def warm_start(model: keras.Model, optimizer: keras.optimizers.Optimizer, hparams: HParams, source: str,
               keep_optimizer: bool, problem: Problem) -> str:
    """Loads the weights (and with keep_optimizer, Adam's moments) of `source` into a fresh run's model.

    The step restarts at 0 either way, so the learning-rate schedule (warmup
    included) starts afresh.

    Args:
      model, optimizer: the new run's, built (the optimizer's variables created).
      hparams: the new run's.
      source: a checkpoint path or a run directory.
      problem: the new run's; its prepared vocabulary must be the source's (not only of its size).
    Returns:
      The checkpoint loaded.
    """
    checkpoint = source_checkpoint(source)
    source_spec = spec_beside(checkpoint, None)
    check_compatible(source_spec.hparams, hparams, checkpoint)
    check_same_vocabulary(source_spec, problem, checkpoint)
    state = {"model": model, "optimizer": optimizer} if keep_optimizer else {"model": model}
    try:
        restore_checkpoint(checkpoint, **state)
    except CheckpointMismatch as reason:
        hint = "; an averaged checkpoint holds no optimizer state, drop `warm_start_optimizer`" if keep_optimizer else ""
        raise UserError(f"cannot warm start from {checkpoint!r}: {reason}{hint}") from None
    optimizer.iterations.assign(0)
    return checkpoint
