"""A run directory: what a training run leaves where, and the create-or-resume check.

    <output_dir>/
      hparams.json        the RunSpec: problem, hparams set, overrides, resolved hparams, data_dir, usr_dir
      checkpoint          the CheckpointManager's list of ckpt-<step> files
      ckpt-<step>.*       model, optimizer, data position, seconds trained
      train/, eval/       TensorBoard logs (tensorboard --logdir <output_dir>)
      dev_scores.json     every evaluation's dev scores, the best so far, the early-stopping count
      best/               the best checkpoint so far on the dev metric, with best.json and hparams.json
      averaged/           the mean of the last checkpoints, with averaged.json and hparams.json
      average_sources/    the end-of-run checkpoints averaged under train.average_span

This module is the only one that knows those names. hparams.json records
which problem and hparams set built the checkpoints, so a later command
rebuilds the model from it instead of trusting its own flags, and where the
data and the user's registrations (--usr_dir) were, so it needs neither flag
again while they stay put. A restart with a different problem, set or
hparams is refused rather than allowed to overwrite or misread the checkpoints.
"""
import dataclasses
import json
import os

from t2t_lite import config
from t2t_lite.config import HParams
from t2t_lite.errors import UserError
from t2t_lite.files import atomic_write_text, ensure_writable_dir

HPARAMS_FILE = "hparams.json"
CHECKPOINT_NAME = "ckpt"  # checkpoints are <dir>/ckpt-<step>
AVERAGED_SUBDIR = "averaged"
BEST_SUBDIR = "best"
BEST_FILE = "best.json"  # in best/: the best checkpoint's step and scores
SOURCES_SUBDIR = "average_sources"
DEV_SCORES_FILE = "dev_scores.json"
TRAIN_LOGS, EVAL_LOGS = "train", "eval"


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """What hparams.json holds: the problem, the set and overrides asked for, the result, and where the
    run's data and user registrations were (absolute paths; None when the run had none)."""

    problem: str
    hparams_set: str
    hparams_overrides: str
    hparams: HParams
    data_dir: str | None = None
    usr_dir: str | None = None


def spec_json(spec: RunSpec, **extra) -> str:
    """The text of hparams.json for spec; `extra` entries (e.g. an export's settings) are added beside it."""
    data = {"problem": spec.problem, "hparams_set": spec.hparams_set, "hparams_overrides": spec.hparams_overrides,
            "hparams": config.to_dict(spec.hparams), "data_dir": spec.data_dir, "usr_dir": spec.usr_dir, **extra}
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def save_spec(directory: str, spec: RunSpec) -> None:
    """Writes spec as directory/hparams.json, atomically."""
    atomic_write_text(os.path.join(directory, HPARAMS_FILE), spec_json(spec))


def load_spec(directory: str) -> RunSpec | None:
    """The RunSpec saved in directory, or None if there is none yet."""
    path = os.path.join(directory, HPARAMS_FILE)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return RunSpec(data["problem"], data["hparams_set"], data["hparams_overrides"],
                       config.from_dict(data["hparams"]), data.get("data_dir"), data.get("usr_dir"))
    except (OSError, ValueError, KeyError) as error:
        raise UserError(f"{path} is unreadable or not a t2t-lite hparams file: {error}") from None


def absolute(path: str | None) -> str | None:
    """path made absolute, as a spec records it; None stays None."""
    return os.path.abspath(path) if path else None


def create_or_resume(output_dir: str, requested: RunSpec, chief: bool = True) -> RunSpec:
    """The spec of output_dir: a new run's is written, a resumed run's is checked against `requested`.

    A resumed run given another data_dir or usr_dir (moved) records the new one. Only the chief writes.
    Raises:
      UserError: output_dir is not writable, or holds a run of another problem, set or hparams.
    """
    saved = load_spec(output_dir)
    if saved is not None:
        check_matches(saved, requested, output_dir)
    if chief:
        # A resumed run's too: a read-only output_dir would otherwise fail only at the first save.
        ensure_writable(output_dir)
    if saved is not None:
        moved = {name: getattr(requested, name) for name in ("data_dir", "usr_dir")
                 if getattr(requested, name) and getattr(requested, name) != getattr(saved, name)}
        if moved:
            saved = dataclasses.replace(saved, **moved)
            if chief:
                _write_spec(output_dir, saved)
        return saved
    if chief:
        _write_spec(output_dir, requested)
    return requested


def ensure_writable(output_dir: str) -> None:
    """Creates output_dir if needed and checks a file can be written there, or raises UserError."""
    ensure_writable_dir(output_dir, "--output_dir")


def _write_spec(output_dir: str, spec: RunSpec) -> None:
    """save_spec, with a failure (a full disk: an empty file still fits) as one UserError; nothing half-written."""
    try:
        save_spec(output_dir, spec)
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


def checkpoint_step(checkpoint_path: str) -> int:
    """The step of a checkpoint this project wrote: <dir>/ckpt-<step>."""
    return int(checkpoint_path.rsplit("-", 1)[1])


def _flat(hparams: HParams) -> dict:
    data = config.to_dict(hparams)
    flat = {"model_name": data.pop("model_name")}
    for group, fields in data.items():
        flat.update({f"{group}.{k}": v for k, v in fields.items()})
    return flat
