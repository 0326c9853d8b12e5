"""Checkpoint averaging: the mean model weights of a run's last N checkpoints, saved as a new checkpoint.

The paper (section 6.1) decodes from the average of the last 5 checkpoints of
the base model and the last 20 of the big one; tensor2tensor hides this in a
separate `t2t-avg-all`. Only the model is averaged: optimizer slots and the
data iterator's position describe the training run, not the function the
network computes, and decoding never reads them.

The result is a run directory of its own (default `<output_dir>/averaged/`):
`ckpt-<newest averaged step>` beside a `checkpoint` state file, a copy of
hparams.json so a decoder can rebuild the model from it, and `averaged.json`
recording the sources. It is built in a temporary directory and renamed into
place, so no half-written checkpoint ever carries the final name.

The trainer averages once training ends. A SIGINT or SIGTERM while it averages
stops it between two checkpoints read, leaving averaged/ as it was; so does a
full disk. A later run of the same command, with nothing left to train, finds
averaged/ missing or older than the checkpoints and averages then
(`finish_averaging`).
"""
import glob
import json
import os
import shutil
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from t2t_lite.config import TrainHParams
from t2t_lite.errors import UserError
from t2t_lite.files import read_json, storage_fault, storage_fault_text
from t2t_lite.models import build_model
from t2t_lite.run_dir import (AVERAGED_FILE, HPARAMS_FILE, CheckpointMismatch, RunDir, as_run_dir, checkpoint_step,
                               load_spec, restore_checkpoint, spec_json)
from t2t_lite.training.checkpoint_dir import write_model_dir
from t2t_lite.training.signals import StopRequest, stop_on_signals


class _Interrupted(Exception):
    """A signal asked the trainer's averaging to stop (average_after_training catches it)."""


def checkpoints_to_average(run_dir: RunDir, last_n: int) -> list[str]:
    """The newest last_n checkpoints that the CheckpointManager state of run_dir lists.

    Args:
      run_dir: a trainer's run directory (or its average_sources/).
      last_n: how many to take, at least 1.
    Returns:
      Checkpoint prefixes (".../ckpt-<step>"), oldest first; fewer than last_n
      if the directory holds fewer.
    Raises:
      UserError: last_n < 1, run_dir missing, or no checkpoint in it.
    """
    if last_n < 1:
        raise UserError(f"the number of checkpoints to average must be at least 1, got {last_n}")
    if not os.path.isdir(run_dir.path):
        raise UserError(f"`output_dir` {run_dir.path!r} does not exist")
    paths = run_dir.checkpoints()
    if not paths:
        raise UserError(f"no checkpoints in {run_dir.path!r}: expected a 'checkpoint' file listing ckpt-<step> files")
    return paths[-last_n:]


def average_checkpoints(output_dir: str | RunDir, last_n: int, destination_dir: str | RunDir | None = None,
                        log: Callable[[str], None] = print) -> str:
    """Averages the model weights of the newest last_n checkpoints of output_dir into a new checkpoint.

    Args:
      output_dir: a trainer's run directory (hparams.json and ckpt-<step> files).
      last_n: checkpoints to average (paper: 5 base, 20 big); if fewer exist,
        those are averaged and log says so.
      destination_dir: where the result goes; default <output_dir>/averaged.
        A previous result there is replaced; any other non-empty directory is refused.
      log: receives one line naming the averaged checkpoints and one naming the result.
    Returns:
      The new checkpoint's prefix, <destination_dir>/ckpt-<step of the newest averaged>,
      loadable with tf.train.Checkpoint(model=model).restore(prefix).
    Raises:
      UserError: no hparams.json, no checkpoints, a checkpoint that does not fit
        the model of hparams.json, an unusable destination_dir, or a disk that cannot
        take the result (full, over quota, read-only); destination_dir is left as it was.
      RuntimeError: the model holds weights that tf.train.Checkpoint cannot
        reach, so no checkpoint has them (a bug in the model, not the run).
    """
    # The command's (and a Python user's) entry: the paths become RunDirs here, once.
    run_dir = as_run_dir(output_dir)
    if run_dir is None:
        raise UserError("`output_dir` is required (the run directory)")
    return average_into(run_dir, last_n, as_run_dir(destination_dir) or run_dir.averaged, log)


def average_into(run_dir: RunDir, last_n: int, destination: RunDir, log: Callable[[str], None] = print,
                 sources: RunDir | None = None, stop: StopRequest | None = None) -> str:
    """average_checkpoints of run_dir into destination.

    Args:
      sources: where the checkpoints to average are listed, if not run_dir itself
        (the trainer's <output_dir>/average_sources, averaging_schedule.py).
      stop: looked at after each checkpoint read and before writing; once requested, nothing is written
        (average_after_training).
      The rest: as for average_checkpoints.
    """
    paths = checkpoints_to_average(sources or run_dir, last_n)
    spec = load_spec(run_dir)
    if spec is None:
        raise UserError(f"no {HPARAMS_FILE} in {run_dir.path!r}: it is not a t2t-lite run directory")
    _check_replaceable(destination, run_dir)
    shortfall = f" (asked for {last_n}, only {len(paths)} present)" if len(paths) < last_n else ""
    where = f" of {sources.path}" if sources else ""
    log(f"averaging {len(paths)} checkpoints{where}{shortfall}: {', '.join(os.path.basename(p) for p in paths)}")
    model = build_model(spec.hparams)
    _check_all_weights_checkpointed(model)
    for weight, mean in zip(_float_weights(model), _mean_weights(model, paths, stop)):
        weight.assign(mean)
    if stop is not None and stop.requested:
        raise _Interrupted
    _remove_leftovers(destination)
    # The model, hparams.json and where it came from, written into a temporary directory renamed to destination.
    provenance = {"output_dir": os.path.abspath(run_dir.path), "checkpoints": _relative(paths, run_dir)}
    try:
        result = write_model_dir(model, destination, checkpoint_step(paths[-1]), {
            HPARAMS_FILE: spec_json(spec), AVERAGED_FILE: json.dumps(provenance, indent=2) + "\n"})
    except Exception as error:  # noqa: BLE001 (anything but a storage fault is re-raised as it is)
        if (code := storage_fault(error)) is None:
            raise
        raise UserError(f"cannot write the averaged checkpoint into {destination.path!r}: "
                        f"{storage_fault_text(code)}, then run the same command again (nothing in "
                        f"{destination.path!r} was changed)") from None
    log(f"wrote {result}")
    return result


def average_after_training(run_dir: RunDir, last_n: int, log: Callable[[str], None] = print,
                           sources: RunDir | None = None) -> str | None:
    """What the trainer runs once training ends: average into <output_dir>/averaged, unless last_n is 0.

    Args:
      run_dir: the run directory.
      last_n: hparams.train.average_last_checkpoints; 0 turns averaging off.
      log: as for average_checkpoints.
      sources: as for average_into.
    Returns:
      The averaged checkpoint's prefix; None when last_n is 0, or when a SIGINT or SIGTERM came while
      averaging: then <output_dir>/averaged is left as it was (finish_averaging, in a later run of the same
      command, writes it), or, if the signal came while it was being written, is written.
    """
    if last_n <= 0:
        return None
    destination = run_dir.averaged
    with stop_on_signals() as stop:
        try:
            result = average_into(run_dir, last_n, destination, log, sources, stop)
        except _Interrupted:
            log(f"{stop.signal_name} received while averaging: {destination.path} was left as it was; run the "
                f"same command again to average")
            return None
    if stop.requested:
        log(f"{stop.signal_name} received while writing {destination.path}: it was written whole, stopping")
        return None
    return result


def finish_averaging(run_dir: RunDir, train: TrainHParams, log: Callable[[str], None] = print) -> str | None:
    """The end-of-run average an earlier run of run_dir did not write (a signal, a full disk or a kill
    stopped it while it averaged): what the trainer runs when training had already ended.

    Args:
      run_dir: the run directory.
      train: the run's hparams.train (average_last_checkpoints, average_span).
      log: as for average_checkpoints; says why it averages.
    Returns:
      The averaged checkpoint's prefix; None when averaging is off, there is nothing to average, or
      <output_dir>/averaged already holds the average of the checkpoints it would take.
    """
    sources = run_dir.average_sources if train.average_span > 0 else None
    try:
        paths = checkpoints_to_average(sources or run_dir, train.average_last_checkpoints)
    except UserError:
        return None  # averaging is off (average_last_checkpoints 0), or no checkpoint: nothing was trained
    if _averaged_sources(run_dir.averaged) == _relative(paths, run_dir):
        return None
    log(f"training ended in an earlier run, which did not write {run_dir.averaged.path}: averaging now")
    return average_after_training(run_dir, train.average_last_checkpoints, log, sources)


def _averaged_sources(destination: RunDir) -> list[str] | None:
    """The checkpoints (relative to the run directory) an averaged directory was made from; None without one."""
    try:
        return read_json(destination.averaged_file)["checkpoints"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _relative(paths: list[str], run_dir: RunDir) -> list[str]:
    """Checkpoint prefixes relative to run_dir, as averaged.json names them: "ckpt-900",
    "average_sources/ckpt-980"."""
    return [os.path.relpath(p, run_dir.path) for p in paths]


def _remove_leftovers(destination: RunDir) -> None:
    """Removes the staging directories of an averaging into destination that was killed before its rename
    (write_model_dir names them .tmp-<name>-*)."""
    parent, name = os.path.split(os.path.abspath(destination.path))
    for leftover in glob.glob(os.path.join(glob.escape(parent), f".tmp-{glob.escape(name)}-*")):
        shutil.rmtree(leftover, ignore_errors=True)


def _float_weights(model: keras.Model) -> list:
    # Integer weights are dropout seed-generator states: RNG positions, not
    # parameters, and tf.train.Checkpoint does not save them.
    return [w for w in model.weights if keras.backend.is_float_dtype(w.dtype)]


def _check_all_weights_checkpointed(model: keras.Model) -> None:
    """Raises RuntimeError if tf.train.Checkpoint cannot reach some weight, which would then never be averaged."""
    root = tf.train.Checkpoint(model=model)  # TrackableView keeps only a weak reference
    reachable = {id(t) for t in tf.train.TrackableView(root).descendants()}
    missing = [w.path for w in _float_weights(model) if id(w) not in reachable]
    if missing:
        # Keras 3 on TensorFlow does not give tf.train.Checkpoint the layers kept
        # only in a Python list: checkpoints silently lack their weights.
        raise RuntimeError(f"{len(missing)} model weights are not saved by tf.train.Checkpoint (first: {missing[0]}); "
                           "the model must also assign list-held layers to attributes")


def _mean_weights(model: keras.Model, paths: list[str], stop: StopRequest | None = None) -> list[np.ndarray]:
    """Restores each checkpoint into model in turn; the mean of each float weight, in its own dtype.

    Raises _Interrupted after the checkpoint being read when `stop` is requested."""
    weights = _float_weights(model)
    # float64 sums: twenty float32 checkpoints add up without losing the low bits.
    sums = [np.zeros(w.shape, np.float64) for w in weights]
    for path in paths:
        try:
            restore_checkpoint(path, model=model)
        except CheckpointMismatch as reason:
            raise UserError(f"{path} does not fit the model of hparams.json: {reason}") from None
        for total, weight in zip(sums, weights):
            total += np.asarray(weight.numpy(), np.float64)
        if stop is not None and stop.requested:
            raise _Interrupted
    return [(total / len(paths)).astype(weight.dtype) for total, weight in zip(sums, weights)]


def _check_replaceable(destination: RunDir, run_dir: RunDir) -> None:
    """Raises UserError unless destination is absent, empty, or a previous averaging result outside run_dir."""
    dest, source = os.path.realpath(destination.path), os.path.realpath(run_dir.path)
    if dest == source or source.startswith(dest + os.sep):
        raise UserError(f"`destination_dir` {destination.path!r} would replace the run directory {run_dir.path!r}")
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise UserError(f"`destination_dir` {destination.path!r} exists and is not a directory")
    # Only a directory holding averaged.json is ever replaced.
    if os.path.isdir(dest) and os.listdir(dest) and not os.path.exists(destination.averaged_file):
        raise UserError(f"`destination_dir` {destination.path!r} holds files that are not an averaged checkpoint; "
                        "choose an empty or new directory")
