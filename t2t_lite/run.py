"""Opening a trained run to decode, score, export or visualise it.

Opening a run (`open_run`) is the one sequence every command that reads a
run follows: choose the checkpoint, read the hparams.json beside it
(t2t_lite.run_dir), import the run's usr dir and find its data where it
recorded them unless told otherwise, check the problem's vocabulary against
the model, apply and check the decode settings asked for, and restore the
model in the precision asked for.
"""
import dataclasses

import keras
import tensorflow as tf

from t2t_lite import precision, registry, usr_dir
from t2t_lite.config import DecodeHParams
from t2t_lite.data.problem import Problem
from t2t_lite.errors import UserError
from t2t_lite.models import build_model

# Finding the checkpoint and its spec is the run directory's (training's warm start does it too); these names
# stay importable from here, where the decoding side has always found them.
from t2t_lite.run_dir import CHECKPOINT_CHOICES  # noqa: F401
from t2t_lite.run_dir import RunSpec, find_checkpoint, recorded_data_dir, spec_beside


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """Which run to open and how; None means "the run's own" (its problem, its decode hparams)."""

    # A training run (its averaged checkpoint if any, else its newest), or one checkpoint;
    # several comma-separated checkpoints open an ensemble (the models must share a vocabulary).
    output_dir: str | None = None
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
    # The compute dtype of the restored model, whatever the run trained in: one of precision.PRECISIONS, or
    # precision.AUTO (bfloat16 where the CPU multiplies it natively, else float32; the outputs it changes are
    # within BLEU's noise: docs/performance.md).
    mixed_precision: str = precision.AUTO
    beam_size: int | None = None
    alpha: float | None = None
    extra_length: int | None = None
    batch_size: int | None = None
    # Emit only what the problem allows (Problem.output_constraint); None: the run's decode setting.
    constrained_decoding: bool | None = None


@dataclasses.dataclass(frozen=True)
class OpenedRun:
    # One checkpoint, or an ensemble's, each with its restored model (in the same order).
    checkpoints: tuple[str, ...]
    # The first checkpoint's hparams.json.
    spec: RunSpec
    # The problem decoded with: the request's, else the run's.
    problem_name: str
    problem: Problem
    # The run's decode hparams with the request's overrides.
    decode_hparams: DecodeHParams
    models: tuple[keras.Model, ...]
    # What the models compute in: the request's mixed_precision, AUTO resolved (one of precision.PRECISIONS).
    mixed_precision: str = "none"

    @property
    def checkpoint(self) -> str:
        """The (first) checkpoint."""
        return self.checkpoints[0]

    @property
    def model(self) -> keras.Model:
        """The (first) model."""
        return self.models[0]


def open_run(request: RunRequest, ensemble: bool = False) -> OpenedRun:
    """Opens the run of `request`, refusing with a UserError anything that does not fit before restoring.

    Args:
      ensemble: whether the caller can use several models (request.checkpoint_path "A,B,...").
    """
    if request.mixed_precision not in (precision.AUTO, *precision.PRECISIONS):
        raise UserError(f"--mixed_precision must be one of {precision.AUTO}, {', '.join(precision.PRECISIONS)}; "
                        f"got {request.mixed_precision!r}")
    paths = [path for path in (request.checkpoint_path or "").split(",") if path] or [None]
    if len(paths) > 1 and not ensemble:
        raise UserError(f"--checkpoint_path names {len(paths)} checkpoints but this command opens one; "
                        f"ensembles are for t2t-lite-decoder and t2t-lite-scorer")
    checkpoints = [find_checkpoint(request.output_dir, path, request.checkpoint) for path in paths]
    specs = [spec_beside(checkpoint, request.hparams_set) for checkpoint in checkpoints]
    spec = specs[0]
    for other, checkpoint in zip(specs[1:], checkpoints[1:]):
        if other.hparams.model.vocab_size != spec.hparams.model.vocab_size:
            raise UserError(f"checkpoint {checkpoint!r} has a vocabulary of {other.hparams.model.vocab_size} ids "
                            f"but {checkpoints[0]!r} has {spec.hparams.model.vocab_size}; an ensemble's models "
                            f"must share one vocabulary")
    for each in specs:  # an ensemble's runs may come from different usr dirs
        usr_dir.import_for_run(request.usr_dir, each.usr_dir)
    problem_name = request.problem or spec.problem
    data_dir = request.data_dir or recorded_data_dir(spec, checkpoints[0])
    problem = registry.problems.get(problem_name)(data_dir)
    check_vocab_size(problem.vocab_size, spec.hparams.model.vocab_size, data_dir)
    decode = decode_hparams(spec.hparams.decode, request)
    mixed_precision = precision.resolve(request.mixed_precision)
    models = [restore_model(s, c, mixed_precision) for s, c in zip(specs, checkpoints)]
    return OpenedRun(tuple(checkpoints), spec, problem_name, problem, decode, tuple(models), mixed_precision)


def check_vocab_size(data_vocab_size: int, model_vocab_size: int, data_dir: str | None) -> None:
    """Refuses a --data_dir whose vocabulary is not the one the model was trained with (its size differs)."""
    if data_vocab_size != model_vocab_size:
        raise UserError(f"the vocabulary of --data_dir {data_dir!r} has {data_vocab_size} ids but the "
                        f"model was trained with {model_vocab_size}; pass the run's --data_dir")


def decode_hparams(defaults: DecodeHParams, request: RunRequest) -> DecodeHParams:
    """The run's decode hparams with the request's beam_size / alpha / extra_length / batch_size /
    constrained_decoding, checked."""
    given = {name: getattr(request, name)
             for name in ("beam_size", "alpha", "extra_length", "batch_size", "constrained_decoding")
             if getattr(request, name) is not None}
    decode = dataclasses.replace(defaults, **given)
    if decode.beam_size < 1 or decode.batch_size < 1 or decode.extra_length < 0 or decode.alpha < 0:
        raise UserError(f"need --beam_size >= 1, --batch_size >= 1, --extra_length >= 0 and --alpha >= 0; got "
                        f"beam_size={decode.beam_size}, batch_size={decode.batch_size}, "
                        f"extra_length={decode.extra_length}, alpha={decode.alpha}")
    return decode


def restore_model(spec: RunSpec, checkpoint: str, mixed_precision: str = "none") -> keras.Model:
    """Builds the model of `spec` and loads its weights from `checkpoint` (optimizer state ignored).

    Args:
      mixed_precision: the compute dtype policy, as training's --mixed_precision.
        The variables stay float32 whatever it is, so any run's checkpoint
        loads; under "mixed_bfloat16" the matmuls run in bfloat16.
    """
    with precision.layers_compute_in(mixed_precision):
        model = build_model(spec.hparams)
    try:
        status = tf.train.Checkpoint(model=model).restore(checkpoint)
        status.expect_partial().assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as error:
        first_line = str(error).strip().splitlines()[0][:200]
        raise UserError(f"checkpoint {checkpoint!r} does not fit hparams set {spec.hparams_set!r}: "
                        f"{first_line}") from None
    return model
