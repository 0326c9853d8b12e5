"""A training run's output directory: checked writable, and a restart checked against its hparams.json.

A trainer restarted with a different problem, set or hparams is refused
rather than allowed to overwrite or misread the checkpoints (t2t_lite.run
reads and writes hparams.json itself).
"""
import os

from t2t_lite import config
from t2t_lite.config import HParams
from t2t_lite.errors import UserError
from t2t_lite.run import RunSpec


def ensure_writable(output_dir: str) -> None:
    """Creates output_dir if needed and checks a file can be written there, or raises UserError."""
    try:
        os.makedirs(output_dir, exist_ok=True)
        probe = os.path.join(output_dir, ".write-test")
        with open(probe, "w") as f:
            f.write("")
        os.remove(probe)
    except OSError as error:
        raise UserError(f"cannot write to --output_dir {output_dir!r}: {error.strerror or error}") from None


def check_matches(saved: RunSpec, requested: RunSpec, output_dir: str) -> None:
    """Raises UserError if a restart asks for a different problem or hparams than output_dir holds."""
    if saved.problem != requested.problem:
        raise UserError(f"--output_dir {output_dir!r} holds a run of problem {saved.problem!r}, not "
                        f"{requested.problem!r}; use a new --output_dir")
    if saved.hparams_set != requested.hparams_set:
        raise UserError(f"--output_dir {output_dir!r} holds a run of hparams set {saved.hparams_set!r}, not "
                        f"{requested.hparams_set!r}; use a new --output_dir or --hparams_set={saved.hparams_set}")
    if saved.hparams != requested.hparams:
        old, new = _flat(saved.hparams), _flat(requested.hparams)
        changed = ", ".join(f"{k}: {old[k]} -> {new[k]}" for k in sorted(old) if old[k] != new[k])
        raise UserError(f"--output_dir {output_dir!r} was trained with other hparams ({changed}); "
                        f"use a new --output_dir or the original --hparams")


def _flat(hparams: HParams) -> dict:
    data = config.to_dict(hparams)
    flat = {"model_name": data.pop("model_name")}
    for group, fields in data.items():
        flat.update({f"{group}.{k}": v for k, v in fields.items()})
    return flat
