"""Where an existing vocabulary comes from, for preparing new data with it (datagen's `vocab_from`).

Fine-tuning a model on new text needs that text encoded with the model's own vocabulary. `vocab_from` names
it by what a user has at hand: the prepared data the model was trained on (a `data_dir`), the run itself (an
`output_dir`, through the data_dir it recorded) or an export of it (a SavedModel or CTranslate2 version
directory). Each is read where the module that owns it says it lives. Where it holds two vocabularies
(vocabulary_sides.py), a side is asked for: the source's, or the target's (a shared one serves both).
"""
import hashlib
import os

from t2t_lite.data.vocabulary_sides import CONFIG_KEYS, SOURCE, TARGET
from t2t_lite.errors import UserError
from t2t_lite.files import read_json

CONFIG_FILE = "problem_config.json"  # text_problem.CONFIG_FILE, which imports this module


def vocabulary_from(path: str, side: str = TARGET) -> tuple[bytes, str]:
    """(the SentencePiece model's bytes, where they were read) of a data_dir, a run directory or an export: its
    vocabulary of `side` (SOURCE or TARGET; a shared one is both).

    Raises:
      UserError: path is none of them, or its vocabulary is missing or not the one its data was written with.
    """
    from t2t_lite.inference.export_reader import find_export
    from t2t_lite.run_dir import as_run_dir, load_spec

    path = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(os.path.join(path, CONFIG_FILE)):
        return _prepared_vocabulary(path, side)
    export = find_export(path) if os.path.isdir(path) else None
    if export is not None:
        where = export.source_vocab_path if side == SOURCE else export.vocab_path
        return _read(where, f"the export {path}"), where
    spec = load_spec(as_run_dir(path)) if os.path.isdir(path) else None
    if spec is not None:
        if not spec.data_dir or not os.path.exists(os.path.join(spec.data_dir, CONFIG_FILE)):
            raise UserError(f"`vocab_from` {path} is a run whose data_dir {spec.data_dir!r} holds no {CONFIG_FILE} "
                            "(moved, or a problem without a prepared vocabulary); pass that data_dir's new place, or "
                            "an export of the run")
        return _prepared_vocabulary(spec.data_dir, side)
    raise UserError(f"`vocab_from` {path} is neither prepared data ({CONFIG_FILE}), a run directory (hparams.json) "
                    "nor an export; pass one of them")


def has_two_vocabularies(path: str) -> bool:
    """Whether what `vocabulary_from` reads at path holds a vocabulary per side (False where it reads nothing)."""
    from t2t_lite.inference.export_reader import find_export
    from t2t_lite.run_dir import as_run_dir, load_spec

    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.isdir(path):
        return False
    if not os.path.exists(os.path.join(path, CONFIG_FILE)):
        export = find_export(path)
        if export is not None:
            return export.source_vocab_path != export.vocab_path
        spec = load_spec(as_run_dir(path))
        path = spec.data_dir if spec is not None and spec.data_dir else path
    try:
        return CONFIG_KEYS[SOURCE] in read_json(os.path.join(path, CONFIG_FILE))
    except (OSError, ValueError, TypeError):
        return False


def _prepared_vocabulary(data_dir: str, side: str) -> tuple[bytes, str]:
    """A data_dir's vocabulary of `side`, checked against the sha256 its config recorded."""
    try:
        config = read_json(os.path.join(data_dir, CONFIG_FILE))
        vocab = config[CONFIG_KEYS[SOURCE]] if side == SOURCE and CONFIG_KEYS[SOURCE] in config else config["vocab"]
        path, recorded = os.path.join(data_dir, vocab["file"]), vocab["sha256"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UserError(f"`vocab_from` {data_dir}: its {CONFIG_FILE} names no vocabulary ({error})") from None
    model = _read(path, data_dir)
    if hashlib.sha256(model).hexdigest() != recorded:
        raise UserError(f"`vocab_from` {path} is not the vocabulary the data in {data_dir} was written with")
    return model, path


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as error:
        raise UserError(f"`vocab_from`: cannot read the vocabulary of {what} ({path}): "
                        f"{error.strerror or error}") from None
