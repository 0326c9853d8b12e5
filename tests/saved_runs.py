"""Run directories made without training: a spec and checkpoints of a model's initial weights."""
import os

import keras
import numpy as np
import tensorflow as tf

from t2t_lite.models import build_model
from t2t_lite.run_dir import RunDir, RunSpec, save_spec


def save_run(directory: str, spec: RunSpec, steps: tuple[int, ...], seed: int = 0) -> keras.Model:
    """A run directory as the trainer leaves it: hparams.json and ckpt-<step> for each step (untrained weights)."""
    os.makedirs(directory, exist_ok=True)
    save_spec(RunDir(directory), spec)
    keras.utils.set_random_seed(seed)
    model = build_model(spec.hparams)
    model({"inputs": np.ones([1, 3], np.int32), "targets": np.ones([1, 2], np.int32)})  # creates the weights
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), directory, max_to_keep=5,
                                         checkpoint_name="ckpt")
    for step in steps:
        manager.save(checkpoint_number=step)
    return model
