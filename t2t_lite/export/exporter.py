"""A training run -> a versioned export: a SavedModel for TF Serving (here) or a CTranslate2 model
(ctranslate2_export.py), each with the run's hparams and its vocabulary; `export_run` makes either.

Everything that can be refused (no checkpoint, wrong hparams set, a problem
without a SentencePiece vocabulary, bad decode settings, an unwritable
export_dir) is checked before anything is created under export_dir; the
export itself is published atomically (layout.publish), so a disk that fills
up (or turns read-only) while it is written leaves no version behind, and the
versions already there as they were (`publish`).
"""
import dataclasses
import os
import tempfile
from collections.abc import Callable

import tensorflow as tf

from t2t_lite import precision
from t2t_lite.config import DecodeHParams, ModelHParams
from t2t_lite.data.problem import Problem
from t2t_lite.data.vocabulary import Vocabulary
from t2t_lite.decoding.constraints import problem_constraint
from t2t_lite.errors import UserError
from t2t_lite.export import layout
from t2t_lite.export.export_dir import CTRANSLATE2, FORMATS, SAVED_MODEL, TREE_FORM_KEY, VOCAB_ASSET, tree_form
from t2t_lite.export.serving import ServingModule
from t2t_lite.files import storage_fault, storage_fault_text
from t2t_lite.run import RunRequest, open_run
from t2t_lite.run_dir import HPARAMS_FILE, RunSpec, spec_json

HPARAMS_ASSET = HPARAMS_FILE
# t2t's default max_length: the longest source a SavedModel decodes, EOS included.
DEFAULT_MAX_INPUT_LENGTH = 256


@dataclasses.dataclass(frozen=True)
class ExportRequest:
    """What to export and how."""

    # TF Serving's model base directory; the export goes to <export_dir>/<model_name>/<version>/.
    export_dir: str
    # The run, and the decode settings and compute dtype fixed in the export (its batch_size is not used).
    run: RunRequest
    # The name clients use in TF Serving's URLs; default the problem's name.
    model_name: str | None = None
    # saved_model only: longer sources are truncated to this many ids, EOS included; None is
    # DEFAULT_MAX_INPUT_LENGTH. A CTranslate2 export takes sources as long as its position table.
    max_input_length: int | None = None
    # export_dir.SAVED_MODEL (for TF Serving) or export_dir.CTRANSLATE2.
    export_format: str = SAVED_MODEL
    # ctranslate2 only: the weights' type (ctranslate2_export.QUANTIZATIONS); None keeps float32.
    quantization: str | None = None


def export_run(request: ExportRequest, log: Callable[[str], None] = lambda line: None) -> str:
    """Exports a trained run in request.export_format; returns the published version directory.

    Raises:
      UserError: for anything the user can fix, found before anything is written; or a disk that
        cannot take the export. A failure while saving removes the partial export (layout.publish).
    """
    if request.export_format not in FORMATS:
        raise UserError(f"--export_format must be one of {', '.join(FORMATS)}; got {request.export_format!r}")
    if request.export_format == CTRANSLATE2:
        # Imported when chosen: ctranslate2_export builds on this module (publish, text_vocabulary).
        from t2t_lite.export import ctranslate2_export

        return ctranslate2_export.export_requested(request, log)
    if request.quantization is not None:
        raise UserError("--quantization is for --export_format=ctranslate2; a SavedModel keeps float32 weights")
    if not request.export_dir:
        raise UserError("--export_dir is required (TF Serving's model base directory)")
    max_input_length = DEFAULT_MAX_INPUT_LENGTH if request.max_input_length is None else request.max_input_length
    run = open_run(request.run)
    model_name = request.model_name or run.problem_name
    layout.check_model_name(model_name)
    decode = run.decode_hparams
    check_lengths(run.spec.hparams.model, decode, max_input_length)
    vocabulary = text_vocabulary(run.problem, run.problem_name)
    module = ServingModule(run.model, vocabulary, decode, max_input_length,
                           constraint=problem_constraint(run.problem, decode))
    model_dir = layout.make_model_dir(request.export_dir, model_name)
    exported = dataclasses.replace(run.spec, problem=run.problem_name,
                                   hparams=dataclasses.replace(run.spec.hparams, decode=decode))
    mixed_precision = run.mixed_precision
    export_info = {"checkpoint": os.path.abspath(run.checkpoint), "model_name": model_name,
                   "max_input_length": max_input_length, "mixed_precision": mixed_precision,
                   TREE_FORM_KEY: tree_form(run.problem)}
    log(f"tracing beam search of {run.checkpoint} (beam {decode.beam_size}, alpha {decode.alpha}, extra length "
        f"{decode.extra_length}) in {precision.compute_dtype(mixed_precision)} and saving into {model_dir}")
    return publish(model_dir, request.export_dir,
                   lambda path: save_module(module, path, exported, vocabulary, export_info))


def publish(model_dir: str, export_dir: str, write: Callable[[str], None]) -> str:
    """layout.publish, with a write the disk cannot take (full, over quota, read-only) as one UserError.

    Raises:
      UserError: the disk failed the write; the partial version was removed and nothing was published.
    """
    try:
        return layout.publish(model_dir, write)
    except Exception as error:  # noqa: BLE001 (anything but a storage fault is re-raised as it is)
        code = storage_fault(error)
        if code is None:
            raise
        raise UserError(f"cannot write the export into --export_dir {export_dir!r}: {storage_fault_text(code)}, "
                        f"then export again (nothing was published; the versions in {model_dir!r} are as they "
                        f"were)") from None


def check_lengths(model: ModelHParams, decode: DecodeHParams, max_input_length: int) -> None:
    """Refuses a max_input_length below 2, or lengths a learned position embedding cannot represent."""
    if max_input_length < 2:
        raise UserError(f"--max_input_length must be at least 2 (one token and EOS), got {max_input_length}")
    longest = max_input_length + decode.extra_length  # the longest output the export can decode
    if model.position_encoding == "learned" and longest > model.max_position:
        raise UserError(f"--max_input_length + --extra_length = {longest} exceeds the model's learned "
                        f"max_position {model.max_position}; lower them")


def text_vocabulary(problem: Problem, problem_name: str) -> Vocabulary:
    """The problem's SentencePiece vocabulary (open_run has checked its size against the model's)."""
    vocabulary = getattr(problem, "vocabulary", None)
    if not isinstance(vocabulary, Vocabulary):
        raise UserError(f"problem {problem_name!r} has no SentencePiece vocabulary, so it cannot be exported "
                        "text-in, text-out; text problems (translate_files, wmt_ende, wmt_enfr) can")
    return vocabulary


def save_module(module: ServingModule, path: str, spec: RunSpec, vocabulary: Vocabulary,
                export_info: dict) -> None:
    """Saves module with both signatures into path, hparams.json and vocab.model in its assets/.

    hparams.json is a run's (t2t_lite.run.load_spec reads it) with the exported
    decode hparams, plus an "export" entry (checkpoint, model_name, max_input_length, mixed_precision).
    """
    with tempfile.TemporaryDirectory() as sources:
        with open(os.path.join(sources, HPARAMS_ASSET), "w", encoding="utf-8") as f:
            f.write(spec_json(spec, export=export_info))
        with open(os.path.join(sources, VOCAB_ASSET), "wb") as f:
            f.write(vocabulary.model)
        # Tracked Assets are copied into <path>/assets/ by the save.
        module.hparams_asset = tf.saved_model.Asset(os.path.join(sources, HPARAMS_ASSET))
        module.vocab_asset = tf.saved_model.Asset(os.path.join(sources, VOCAB_ASSET))
        tf.saved_model.save(module, path, signatures=module.signatures())
