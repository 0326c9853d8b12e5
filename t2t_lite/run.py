"""Opening a trained run to decode, score, export or visualise it.

Opening a run (`open_run`) is the one sequence every command that reads a
run follows: choose the checkpoint, read the hparams.json beside it
(t2t_lite.run_dir), import the run's usr dir and find its data where it
recorded them unless told otherwise, check the problem's vocabulary against
the model, apply and check the decode settings asked for, and restore the
model in the precision asked for.

Importing it imports no TensorFlow (opening a run does): the decoder command reads its flags into a
RunRequest also when it decodes a CTranslate2 export, where there is none.
"""
from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

from t2t_lite import precision, registry, usr_dir
from t2t_lite.config import DecodeHParams
from t2t_lite.decoding.request import RUN, DecodeRequest, Engine, ResolvedDecode
from t2t_lite.errors import UserError

# Finding the checkpoint and its spec is the run directory's (training's warm start does it too); these names
# stay importable from here, where the decoding side has always found them.
from t2t_lite.run_dir import CHECKPOINT_CHOICES  # noqa: F401
from t2t_lite.run_dir import (CheckpointMismatch, RunDir, RunSpec, as_run_dir, find_checkpoint, load_partners,
                               load_spec, recorded_data_dir, restore_checkpoint, save_partners, spec_beside)

if TYPE_CHECKING:
    import keras

    from t2t_lite.data.problem import Problem


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """Which run to open and how; None means "the run's own" (its problem, its decode hparams)."""

    # A training run (its averaged checkpoint if any, else its newest; with the partners name_partners gave it,
    # the ensemble of them all), or one checkpoint; several comma-separated checkpoints (or runs, each standing
    # for its own checkpoint alone) open an ensemble (the models must share a vocabulary). A path given for
    # output_dir is made a RunDir when the request is made.
    output_dir: RunDir | None = None
    checkpoint_path: str | None = None
    # Which checkpoint of output_dir: "averaged", "best" or "latest"; None: averaged if any, else latest.
    checkpoint: str | None = None
    # The problem's prepared data (its vocabulary); None: the data_dir the run recorded.
    data_dir: str | None = None
    # Your own problems, sets and models (t2t_lite.usr_dir), e.g. where a run's moved to; None: the usr dir the
    # run recorded, imported even if the process imported others before.
    usr_dir: str | None = None
    problem: str | None = None
    # If given, must match the run's set: a guard against opening the wrong run.
    hparams_set: str | None = None
    # How to decode: its beam, length penalty, precision (the compute dtype of the restored models, whatever
    # the run trained in) and the rest; what it leaves None is the run's hparams.decode.
    decode: DecodeRequest = DecodeRequest()

    def __post_init__(self):
        object.__setattr__(self, "output_dir", as_run_dir(self.output_dir))


@dataclasses.dataclass(frozen=True)
class OpenedRun:
    # One checkpoint, or an ensemble's, each with its restored model (in the same order).
    checkpoints: tuple[str, ...]
    # The first checkpoint's hparams.json.
    spec: RunSpec
    # The problem decoded with: the request's, else the run's.
    problem_name: str
    problem: Problem
    # The request's decode settings resolved against the run's (its mixed_precision one of precision.PRECISIONS).
    decode: ResolvedDecode
    models: tuple[keras.Model, ...]

    @property
    def decode_hparams(self) -> DecodeHParams:
        """The run's decode hparams with the request's overrides."""
        return self.decode.hparams

    @property
    def mixed_precision(self) -> str:
        """What the models compute in: the request's mixed_precision, AUTO resolved."""
        return self.decode.mixed_precision

    @property
    def checkpoint(self) -> str:
        """The (first) checkpoint."""
        return self.checkpoints[0]

    @property
    def model(self) -> keras.Model:
        """The (first) model."""
        return self.models[0]


def open_run(request: RunRequest, ensemble: bool = False, engine: Engine = RUN) -> OpenedRun:
    """Opens the run of `request`, refusing with a UserError anything that does not fit before restoring.

    Args:
      ensemble: whether the caller can use several models (request.checkpoint_path "A,B,...").
      engine: what will decode the run (RUN, SCORING, an exporter's): request.decode is resolved against it, with
        the run's hparams.decode as its settings.
    """
    paths = [path for path in (request.checkpoint_path or "").split(",") if path] or default_members(
        request.output_dir, ensemble)
    if len(paths) > 1 and not ensemble:
        raise UserError(f"`checkpoint_path` names {len(paths)} checkpoints but this command opens one; "
                        f"ensembles are for t2t-lite-decoder and t2t-lite-scorer")
    checkpoints = [find_checkpoint(request.output_dir, path, request.checkpoint) for path in paths]
    specs = [spec_beside(checkpoint, request.hparams_set) for checkpoint in checkpoints]
    spec = specs[0]
    # Refused before anything is loaded: what the engine cannot do with these settings.
    decode = request.decode.resolve(dataclasses.replace(engine, settings=spec.hparams.decode))
    for other, checkpoint in zip(specs[1:], checkpoints[1:]):
        check_shared_vocabulary(f"checkpoint {checkpoints[0]!r}", spec, f"checkpoint {checkpoint!r}", other)
    for each in specs:  # an ensemble's runs may come from different usr dirs
        usr_dir.import_for_run(request.usr_dir, each.usr_dir)
    problem_name = request.problem or spec.problem
    data_dir = request.data_dir or recorded_data_dir(spec, checkpoints[0])
    problem = registry.problems.get(problem_name)(data_dir)
    check_problem_vocabularies(problem, spec, data_dir)
    decode = dataclasses.replace(decode, mixed_precision=precision.resolve(decode.mixed_precision))
    models = [restore_model(s, c, decode.mixed_precision) for s, c in zip(specs, checkpoints)]
    return OpenedRun(tuple(checkpoints), spec, problem_name, problem, decode, tuple(models))


def default_members(run: RunDir | None, ensemble: bool) -> list[str | None]:
    """What a request naming no checkpoint_path opens: [None] (run's own checkpoint), or, for a run with
    partners, run and its partners as an ensemble's members."""
    partners = load_partners(run) if run is not None else []
    if not partners:
        return [None]
    names = ", ".join(repr(partner.path) for partner in partners)
    if not ensemble:
        raise UserError(f"`output_dir` {run.path!r} decodes as an ensemble with {names} (t2t-lite-ensemble); this "
                        f"command opens one model: pass `checkpoint_path`={run.path} for the run's own")
    for partner in partners:
        if load_spec(partner) is None:
            raise UserError(f"`output_dir` {run.path!r} names {partner.path!r} as an ensemble partner, but it is not "
                            f"a run directory (moved or deleted?); name its partners again with t2t-lite-ensemble")
    return [run.path] + [partner.path for partner in partners]


def name_partners(output_dir: "str | RunDir", partners: "list[str | RunDir]") -> None:
    """Makes the runs `partners` decode with the run in `output_dir` by default, as one ensemble.

    Every reader of the run that takes an ensemble (t2t-lite-decoder, t2t-lite-scorer, Translator.from_run) then
    opens it with its partners, each at the checkpoint `checkpoint` picks; a `checkpoint_path` still opens
    exactly what it names, and naming the run there opens it alone. A partner's own partners are not followed.
    No partners make the run decode alone again.
    Raises:
      UserError: output_dir or a partner is not a run directory, a partner is the run itself or named twice, or
        a partner's vocabulary differs from the run's.
    """
    run = as_run_dir(output_dir)
    spec = load_spec(run) if run is not None else None
    if spec is None:
        raise UserError(f"`output_dir` {output_dir!r} is not a t2t-lite run directory (no hparams.json)")
    members = [as_run_dir(partner) for partner in partners]
    seen = {os.path.realpath(run.path)}
    for partner in members:
        other = load_spec(partner)
        if other is None:
            raise UserError(f"partner {partner.path!r} is not a t2t-lite run directory (no hparams.json)")
        if os.path.realpath(partner.path) in seen:
            raise UserError(f"partner {partner.path!r} is named twice or is the run itself; name each other run once")
        seen.add(os.path.realpath(partner.path))
        check_shared_vocabulary(f"run {run.path!r}", spec, f"partner {partner.path!r}", other)
    save_partners(run, members)


def check_problem_vocabularies(problem: Problem, spec: RunSpec, data_dir: str | None) -> None:
    """Raises UserError unless the problem's vocabularies (one shared, or one per side) are the model's sizes."""
    model = spec.hparams.model
    ours = (problem.source_vocab_size if problem.separate_vocabularies else 0, problem.vocab_size)
    if ours != (model.source_vocab_size, model.vocab_size):  # a data_dir of other vocabularies than the model's
        raise UserError(f"the vocabulary of `data_dir` {data_dir!r} has {_sizes(*ours)} but the model was "
                        f"trained with {_sizes(model.source_vocab_size, model.vocab_size, bare=True)}; pass the run's `data_dir`")


def _sizes(source: int, target: int, bare: bool = False) -> str:
    """A model's vocabulary sizes, as the messages say them: "8000 ids" ("8000" if bare), or "300 source and 330
    target ids"."""
    return f"{source} source and {target} target ids" if source else f"{target}" if bare else f"{target} ids"


def check_shared_vocabulary(first_name: str, first: RunSpec, other_name: str, other: RunSpec) -> None:
    """Raises UserError unless two of an ensemble's models (their specs, named for the message) share their
    vocabularies: the same sizes and, where both recorded it, the same fingerprint (data/vocabulary_sides.py)."""
    sizes = [(spec.hparams.model.source_vocab_size, spec.hparams.model.vocab_size) for spec in (first, other)]
    if sizes[0] != sizes[1]:
        raise UserError(f"{other_name} has a vocabulary of {_sizes(*sizes[1])} but {first_name} has "
                        f"{_sizes(*sizes[0], bare=True)}; an ensemble's models must share one vocabulary")
    if None not in (first.vocabulary_sha256, other.vocabulary_sha256) and (
            first.vocabulary_sha256 != other.vocabulary_sha256):
        raise UserError(f"{other_name} was trained with another vocabulary than {first_name} (of the same size), so "
                        "its ids mean other pieces; an ensemble's models must share one vocabulary")


def restore_model(spec: RunSpec, checkpoint: str, mixed_precision: str = "none") -> keras.Model:
    """Builds the model of `spec` and loads its weights from `checkpoint` (optimizer state ignored).

    Args:
      mixed_precision: the compute dtype policy, as training's --mixed_precision.
        The variables stay float32 whatever it is, so any run's checkpoint
        loads; under "mixed_bfloat16" the matmuls run in bfloat16.
    """
    from t2t_lite.models import build_model

    with precision.layers_compute_in(mixed_precision):
        model = build_model(spec.hparams)
    try:
        restore_checkpoint(checkpoint, model=model)
    except CheckpointMismatch as reason:
        raise UserError(f"checkpoint {checkpoint!r} does not fit hparams set {spec.hparams_set!r}: {reason}") from None
    return model
