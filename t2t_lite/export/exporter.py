"""A training run -> a versioned SavedModel for TF Serving, with its hparams and vocabulary as assets.

Everything that can be refused (no checkpoint, wrong hparams set, a problem
without a SentencePiece vocabulary, bad decode settings, an unwritable
export_dir) is checked before anything is created under export_dir; the
export itself is published atomically (layout.publish).
"""
import dataclasses
import json
import os
import tempfile
from collections.abc import Callable

import tensorflow as tf

from t2t_lite import config, registry
from t2t_lite.config import DecodeHParams, ModelHParams
from t2t_lite.data.vocabulary import Vocabulary
from t2t_lite.decoding.restore import find_checkpoint, load_run_spec, restore_model
from t2t_lite.errors import UserError
from t2t_lite.export import layout
from t2t_lite.export.serving import ServingModule
from t2t_lite.training import precision, run_dir

HPARAMS_ASSET = run_dir.HPARAMS_FILE
VOCAB_ASSET = "vocab.model"


@dataclasses.dataclass(frozen=True)
class ExportRequest:
    """What to export and how; None means "the run's own" (its problem, its decode hparams)."""

    # TF Serving's model base directory; the export goes to <export_dir>/<model_name>/<version>/.
    export_dir: str
    # A training run (its averaged checkpoint if any, else its newest), or one checkpoint.
    output_dir: str | None = None
    checkpoint_path: str | None = None
    problem: str | None = None
    # If given, must match the run's set: a guard against exporting the wrong run.
    hparams_set: str | None = None
    # The problem's prepared data, for its vocabulary.
    data_dir: str | None = None
    # The name clients use in TF Serving's URLs; default the problem's name.
    model_name: str | None = None
    beam_size: int | None = None
    alpha: float | None = None
    extra_length: int | None = None
    # Longer sources are truncated to this many ids, EOS included (t2t's default max_length).
    max_input_length: int = 256
    # The export's compute dtype, whatever the run trained in (training/precision.py): "mixed_bfloat16"
    # runs its matmuls in bfloat16, faster where the CPU has AMX or AVX512_BF16.
    mixed_precision: str = "none"


def export_run(request: ExportRequest, log: Callable[[str], None] = lambda line: None) -> str:
    """Exports a trained run; returns the published version directory.

    Raises:
      UserError: for anything the user can fix, found before anything is written.
        A failure while saving removes the partial export (layout.publish).
    """
    if not request.export_dir:
        raise UserError("--export_dir is required (TF Serving's model base directory)")
    if request.mixed_precision not in precision.PRECISIONS:
        raise UserError(f"--mixed_precision must be one of {', '.join(precision.PRECISIONS)}; "
                        f"got {request.mixed_precision!r}")
    checkpoint = find_checkpoint(request.output_dir, request.checkpoint_path)
    spec = load_run_spec(checkpoint, request.hparams_set)
    problem_name = request.problem or spec.problem
    model_name = request.model_name or problem_name
    layout.check_model_name(model_name)
    decode = resolve_decode_hparams(spec.hparams.decode, request)
    check_lengths(spec.hparams.model, decode, request.max_input_length)
    vocabulary = problem_vocabulary(problem_name, request.data_dir, spec.hparams.model.vocab_size)
    log(f"restoring {checkpoint}")
    module = ServingModule(restore_model(spec, checkpoint, request.mixed_precision), vocabulary, decode,
                           request.max_input_length)
    model_dir = layout.make_model_dir(request.export_dir, model_name)
    exported = dataclasses.replace(spec, problem=problem_name,
                                   hparams=dataclasses.replace(spec.hparams, decode=decode))
    export_info = {"checkpoint": os.path.abspath(checkpoint), "model_name": model_name,
                   "max_input_length": request.max_input_length, "mixed_precision": request.mixed_precision}
    log(f"tracing beam search (beam {decode.beam_size}, alpha {decode.alpha}, extra length "
        f"{decode.extra_length}) in {precision.compute_dtype(request.mixed_precision)} and saving into {model_dir}")
    return layout.publish(model_dir, lambda path: save_module(module, path, exported, vocabulary, export_info))


def resolve_decode_hparams(defaults: DecodeHParams, request: ExportRequest) -> DecodeHParams:
    """The run's decode hparams with the request's beam_size / alpha / extra_length, checked."""
    given = {name: getattr(request, name) for name in ("beam_size", "alpha", "extra_length")
             if getattr(request, name) is not None}
    decode = dataclasses.replace(defaults, **given)
    if decode.beam_size < 1 or decode.extra_length < 0 or decode.alpha < 0:
        raise UserError(f"need --beam_size >= 1, --extra_length >= 0 and --alpha >= 0; got beam_size="
                        f"{decode.beam_size}, extra_length={decode.extra_length}, alpha={decode.alpha}")
    return decode


def check_lengths(model: ModelHParams, decode: DecodeHParams, max_input_length: int) -> None:
    """Refuses a max_input_length below 2, or lengths a learned position embedding cannot represent."""
    if max_input_length < 2:
        raise UserError(f"--max_input_length must be at least 2 (one token and EOS), got {max_input_length}")
    longest = max_input_length + decode.extra_length  # the longest output the export can decode
    if model.position_encoding == "learned" and longest > model.max_position:
        raise UserError(f"--max_input_length + --extra_length = {longest} exceeds the model's learned "
                        f"max_position {model.max_position}; lower them")


def problem_vocabulary(problem_name: str, data_dir: str | None, vocab_size: int) -> Vocabulary:
    """The problem's SentencePiece vocabulary, checked to have the model's vocab_size V."""
    problem = registry.problems.get(problem_name)(data_dir)
    vocabulary = getattr(problem, "vocabulary", None)
    if not isinstance(vocabulary, Vocabulary):
        raise UserError(f"problem {problem_name!r} has no SentencePiece vocabulary, so it cannot be exported "
                        "text-in, text-out; text problems (translate_files, wmt_ende, wmt_enfr) can")
    if vocabulary.vocab_size != vocab_size:
        raise UserError(f"the vocabulary in --data_dir {data_dir!r} has {vocabulary.vocab_size} ids but the "
                        f"model was trained with {vocab_size}; pass the run's --data_dir")
    return vocabulary


def save_module(module: ServingModule, path: str, spec: run_dir.RunSpec, vocabulary: Vocabulary,
                export_info: dict) -> None:
    """Saves module with both signatures into path, hparams.json and vocab.model in its assets/.

    hparams.json is run_dir's format (run_dir.load reads it) with the exported
    decode hparams, plus an "export" entry (checkpoint, model_name, max_input_length, mixed_precision).
    """
    hparams = {"problem": spec.problem, "hparams_set": spec.hparams_set,
               "hparams_overrides": spec.hparams_overrides, "hparams": config.to_dict(spec.hparams),
               "export": export_info}
    with tempfile.TemporaryDirectory() as sources:
        with open(os.path.join(sources, HPARAMS_ASSET), "w", encoding="utf-8") as f:
            f.write(json.dumps(hparams, indent=2, sort_keys=True) + "\n")
        with open(os.path.join(sources, VOCAB_ASSET), "wb") as f:
            f.write(vocabulary.model)
        # Tracked Assets are copied into <path>/assets/ by the save.
        module.hparams_asset = tf.saved_model.Asset(os.path.join(sources, HPARAMS_ASSET))
        module.vocab_asset = tf.saved_model.Asset(os.path.join(sources, VOCAB_ASSET))
        tf.saved_model.save(module, path, signatures=module.signatures())
