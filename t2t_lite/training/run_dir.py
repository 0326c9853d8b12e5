"""The output directory of a run: checked writable, and holding the resolved hparams.json.

hparams.json records which problem and hparams set built the checkpoints
beside it. A later command reloads it instead of trusting its own flags, and a
trainer restarted with a different set is refused rather than allowed to
overwrite or misread the checkpoints.
"""
import json
import os
from dataclasses import dataclass

from t2t_lite import config
from t2t_lite.config import HParams
from t2t_lite.errors import UserError
from t2t_lite.files import atomic_write_text

HPARAMS_FILE = "hparams.json"


@dataclass(frozen=True)
class RunSpec:
    """What hparams.json holds: the problem, the set and overrides asked for, and the result."""

    problem: str
    hparams_set: str
    hparams_overrides: str
    hparams: HParams


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


def load(output_dir: str) -> RunSpec | None:
    """The RunSpec saved in output_dir, or None if there is none yet."""
    path = os.path.join(output_dir, HPARAMS_FILE)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return RunSpec(data["problem"], data["hparams_set"], data["hparams_overrides"],
                       config.from_dict(data["hparams"]))
    except (OSError, ValueError, KeyError) as error:
        raise UserError(f"{path} is unreadable or not a t2t-lite hparams file: {error}") from None


def save(output_dir: str, spec: RunSpec) -> None:
    """Writes spec as output_dir/hparams.json, atomically."""
    data = {"problem": spec.problem, "hparams_set": spec.hparams_set,
            "hparams_overrides": spec.hparams_overrides, "hparams": config.to_dict(spec.hparams)}
    atomic_write_text(os.path.join(output_dir, HPARAMS_FILE), json.dumps(data, indent=2, sort_keys=True) + "\n")


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
