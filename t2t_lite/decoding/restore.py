"""Rebuilding a trained model from a run directory or a checkpoint path."""
import os

import tensorflow as tf

from t2t_lite.errors import UserError
from t2t_lite.models import build_model
from t2t_lite.training import precision as precisions
from t2t_lite.training import run_dir
from t2t_lite.training.averaging import DEFAULT_SUBDIR


def find_checkpoint(output_dir: str | None, checkpoint_path: str | None) -> str:
    """The checkpoint to decode from.

    An explicit checkpoint_path wins; otherwise the averaged checkpoint of
    output_dir (the paper decodes from it) if training wrote one, else the
    newest checkpoint in output_dir.
    """
    if checkpoint_path:
        if not tf.io.gfile.exists(checkpoint_path + ".index"):
            raise UserError(f"no checkpoint at --checkpoint_path {checkpoint_path!r} "
                            f"(expected {checkpoint_path}.index)")
        return checkpoint_path
    if not output_dir:
        raise UserError("give --output_dir (a training run) or --checkpoint_path")
    for directory in (os.path.join(output_dir, DEFAULT_SUBDIR), output_dir):
        latest = tf.train.latest_checkpoint(directory)
        if latest:
            return latest
    raise UserError(f"no checkpoint in --output_dir {output_dir!r}; train first or pass --checkpoint_path")


def load_run_spec(checkpoint: str, hparams_set: str | None) -> run_dir.RunSpec:
    """The hparams.json beside the checkpoint, checked against an explicitly requested set."""
    spec = run_dir.load(os.path.dirname(checkpoint))
    if spec is None:
        raise UserError(f"no {run_dir.HPARAMS_FILE} beside {checkpoint!r}: it is not a t2t-lite run directory")
    if hparams_set and hparams_set != spec.hparams_set:
        raise UserError(f"checkpoint {checkpoint!r} was trained with hparams set {spec.hparams_set!r}, "
                        f"not {hparams_set!r}; drop --hparams_set or pick the matching checkpoint")
    return spec


def restore_model(spec: run_dir.RunSpec, checkpoint: str, precision: str = "none"):
    """Builds the model of `spec` and loads its weights from `checkpoint` (optimizer state ignored).

    Args:
      precision: the compute dtype policy of training's --mixed_precision.
        The variables stay float32 whatever it is, so any run's checkpoint
        loads; under "mixed_bfloat16" the matmuls run in bfloat16 (decoding
        makes its bfloat16 kernel copies once per batch, not every step).
    """
    with precisions.layers_compute_in(precision):
        model = build_model(spec.hparams)
    try:
        status = tf.train.Checkpoint(model=model).restore(checkpoint)
        status.expect_partial().assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as error:
        first_line = str(error).strip().splitlines()[0][:200]
        raise UserError(f"checkpoint {checkpoint!r} does not fit hparams set {spec.hparams_set!r}: "
                        f"{first_line}") from None
    return model
