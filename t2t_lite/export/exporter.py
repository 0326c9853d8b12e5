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

from t2t_lite.config import DecodeHParams, ModelHParams
from t2t_lite.decoding.cached_step import step_products
from t2t_lite.decoding.request import Engine
from t2t_lite.errors import UserError
from t2t_lite.export import ctranslate2_export, layout
from t2t_lite.export_format import CTRANSLATE2, FORMATS, SOURCE_VOCAB_ASSET, VOCAB_ASSET, problem_info
from t2t_lite.export.request import (DEFAULT_MAX_INPUT_LENGTH, ExportRequest, TextVocabularies,  # noqa: F401
                                     publish, text_vocabularies, write_export_files)
from t2t_lite.export.serving import ServingModule
from t2t_lite.export.warmup import write_warmup_requests
from t2t_lite.run import OpenedRun, open_run
from t2t_lite.run_dir import HPARAMS_FILE

# What a SavedModel decodes with: the beam search asked for, fixed in its graph.
EXPORTING = Engine("a SavedModel", samples=False)


def export_run(request: ExportRequest, log: Callable[[str], None] = lambda line: None) -> str:
    """Exports a trained run in request.export_format; returns the published version directory.

    Raises:
      UserError: for anything the user can fix, found before anything is written; or a disk that
        cannot take the export. A failure while saving removes the partial export (layout.publish).
    """
    if request.export_format not in FORMATS:
        raise UserError(f"`export_format` must be one of {', '.join(FORMATS)}; got {request.export_format!r}")
    if request.export_format == CTRANSLATE2:
        return ctranslate2_export.export_requested(request, log)
    if request.quantization is not None:
        raise UserError("`quantization` is for `export_format`=ctranslate2; a SavedModel keeps float32 weights")
    if not request.export_dir:
        raise UserError("`export_dir` is required (TF Serving's model base directory)")
    max_input_length = DEFAULT_MAX_INPUT_LENGTH if request.max_input_length is None else request.max_input_length
    run = open_run(request.run, engine=EXPORTING)
    model_name = request.model_name or run.problem_name
    layout.check_model_name(model_name)
    decode = run.decode_hparams
    check_lengths(run.spec.hparams.model, decode, max_input_length)
    vocabularies = text_vocabularies(run.problem, run.problem_name)
    mixed_precision, dtype = run.mixed_precision, run.model.compute_dtype
    # The layout and ops the decoder resolves here, resolved once so that what is recorded is what is traced.
    products = step_products(run.model, dtype, request.step_matmul)[0]
    step_matmul = dataclasses.replace(request.step_matmul, layout=products.layout)
    module = ServingModule(run.model, run.problem, vocabularies, run.decode, max_input_length, step_matmul)
    model_dir = layout.make_model_dir(request.export_dir, model_name)
    export_info = {"checkpoint": os.path.abspath(run.checkpoint), "model_name": model_name,
                   "max_input_length": max_input_length, "mixed_precision": mixed_precision,
                   **problem_info(run.problem),
                   "step_matmul": {"layout": products.layout, "op": products.ops}}
    log(f"tracing beam search of {run.checkpoint} (beam {decode.beam_size}, alpha {decode.alpha}, extra length "
        f"{decode.extra_length}) in {dtype}, step products {products.layout} with ops {products.ops}, and "
        f"saving into {model_dir}")
    def save(path):
        save_module(module, path, run, vocabularies, export_info)
        write_warmup_requests(path, model_name, log)

    return publish(model_dir, request.export_dir, save)


def check_lengths(model: ModelHParams, decode: DecodeHParams, max_input_length: int) -> None:
    """Refuses a max_input_length below 2, or lengths a learned position embedding cannot represent."""
    if max_input_length < 2:
        raise UserError(f"`max_input_length` must be at least 2 (one token and EOS), got {max_input_length}")
    longest = max_input_length + decode.extra_length  # the longest output the export can decode
    if model.position_encoding == "learned" and longest > model.max_position:
        raise UserError(f"`max_input_length` + `extra_length` = {longest} exceeds the model's learned "
                        f"max_position {model.max_position}; lower them")


def save_module(module: ServingModule, path: str, run: OpenedRun, vocabularies: TextVocabularies,
                export_info: dict) -> None:
    """Saves module with both signatures into path, hparams.json and vocab.model (and source_vocab.model) in its
    assets/.

    hparams.json is a run's (t2t_lite.run.load_spec reads it) with the exported
    decode hparams, plus an "export" entry (checkpoint, model_name, max_input_length, mixed_precision).
    """
    with tempfile.TemporaryDirectory() as sources:
        write_export_files(sources, run, vocabularies, export_info)
        # Tracked Assets are copied into <path>/assets/ by the save.
        module.hparams_asset = tf.saved_model.Asset(os.path.join(sources, HPARAMS_FILE))
        module.vocab_asset = tf.saved_model.Asset(os.path.join(sources, VOCAB_ASSET))
        if vocabularies.separate:
            module.source_vocab_asset = tf.saved_model.Asset(os.path.join(sources, SOURCE_VOCAB_ASSET))
        tf.saved_model.save(module, path, signatures=module.signatures())
