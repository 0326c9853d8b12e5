"""A directory holding one model checkpoint and a few small files, written whole or not at all.

The averaged checkpoint (`averaged/`) and the best checkpoint so far (`best/`)
are such directories: `ckpt-<step>` beside a `checkpoint` state file and the
run's hparams.json, so a decoder opens either like a run directory. Each is
built in a temporary directory and renamed into place, so no half-written
checkpoint ever carries the final name.
"""
import os
import shutil

import keras
import tensorflow as tf

from t2t_lite.files import atomic_write_text
from t2t_lite.run_dir import RunDir


def write_model_dir(model: keras.Model, destination: RunDir, step: int, files: dict[str, str]) -> str:
    """Saves model's weights as destination/ckpt-<step>, with `files` beside it, replacing any old destination.

    Args:
      model: whose weights are saved (only the model: no optimizer state).
      destination: the directory to create or replace.
      step: the checkpoint's number.
      files: file name -> text, e.g. {"hparams.json": ...}.
    Returns:
      The checkpoint's prefix, <destination>/ckpt-<step>.
    """
    parent, name = os.path.split(os.path.abspath(destination.path))
    os.makedirs(parent, exist_ok=True)
    staging = RunDir.scratch(parent, prefix=f".tmp-{name}-")
    try:
        # The state file records relative paths, so the rename keeps it valid.
        staging.manager(tf.train.Checkpoint(model=model), max_to_keep=1).save(checkpoint_number=step)
        for name, text in files.items():
            atomic_write_text(os.path.join(staging.path, name), text)
        # Renamed into place; an old destination is first moved aside, then deleted.
        if os.path.isdir(destination.path):
            retired = staging.path + "-retired"
            os.rename(destination.path, retired)
            os.rename(staging.path, destination.path)
            shutil.rmtree(retired)
        else:
            os.rename(staging.path, destination.path)
    except BaseException:
        shutil.rmtree(staging.path, ignore_errors=True)
        raise
    return destination.checkpoint_prefix(step)
