"""What an export is: the one reader of a version directory t2t-lite-exporter wrote, without TensorFlow.

Two formats, each the run's hparams.json (with the decode settings it was
exported with and an "export" entry) beside the model and its SentencePiece
vocab.model:
  saved_model   saved_model.pb, with hparams.json and vocab.model in assets/
  ctranslate2   model.bin, with hparams.json (export format "ctranslate2") and vocab.model beside it
"""
import dataclasses
import json
import os

from t2t_lite.config import DecodeHParams
from t2t_lite.errors import UserError
from t2t_lite.run_dir import HPARAMS_FILE, RunSpec, load_spec

SAVED_MODEL, CTRANSLATE2 = "saved_model", "ctranslate2"
FORMATS = (SAVED_MODEL, CTRANSLATE2)
# The SentencePiece model's file name in either format.
VOCAB_ASSET = "vocab.model"
SAVED_MODEL_ASSETS = "assets"
# The "export" entry's key for a parser's target form (data/target_forms.py TARGET_FORMS), so that a Translator
# over the export writes bracketed trees without importing the problem (and TensorFlow).
TREE_FORM_KEY = "tree_form"


def tree_form(problem) -> str | None:
    """A problem's target form when its outputs are linearised trees ("tags" or "words"); None otherwise."""
    return getattr(problem, "target_form", None)


@dataclasses.dataclass(frozen=True)
class ExportDir:
    """An export's version directory, read."""

    path: str
    # SAVED_MODEL or CTRANSLATE2.
    format: str
    # The run's spec with the decode hparams the export was made with.
    spec: RunSpec
    # hparams.json's "export" entry: the checkpoint, and the format's own settings.
    info: dict

    @property
    def decode_hparams(self) -> DecodeHParams:
        return self.spec.hparams.decode

    @property
    def tree_form(self) -> str | None:
        """The parser's target form (TARGET_FORMS); None for other problems and exports older than the key."""
        return self.info.get(TREE_FORM_KEY)

    @property
    def vocab_path(self) -> str:
        """The SentencePiece model."""
        return os.path.join(self._files, VOCAB_ASSET)

    @property
    def _files(self) -> str:
        """Where hparams.json and vocab.model are."""
        return os.path.join(self.path, SAVED_MODEL_ASSETS) if self.format == SAVED_MODEL else self.path


def find_export(path: str) -> ExportDir | None:
    """The export at path, or None when path is not one (see the module docstring).

    Raises:
      UserError: path looks like an export but its hparams.json is unreadable.
    """
    if os.path.exists(os.path.join(path, "model.bin")):
        info = _export_entry(path)
        if info is not None and info.get("format") == CTRANSLATE2:
            return ExportDir(path, CTRANSLATE2, load_spec(path), info)
    assets = os.path.join(path, SAVED_MODEL_ASSETS)
    saved_model = any(os.path.exists(os.path.join(path, name)) for name in ("saved_model.pb", "saved_model.pbtxt"))
    info = _export_entry(assets) if saved_model else None
    return ExportDir(path, SAVED_MODEL, load_spec(assets), info) if info is not None else None


def read_export(path: str) -> ExportDir:
    """The export at path.

    Raises:
      UserError: path is not a t2t-lite export (or its hparams.json is unreadable).
    """
    export = find_export(path)
    if export is None:
        raise UserError(f"{path!r} is not a t2t-lite export (a SavedModel with assets/hparams.json, or a CTranslate2 "
                        "model.bin with hparams.json); give the numbered version directory t2t-lite-exporter printed")
    return export


def _export_entry(directory: str) -> dict | None:
    """The "export" entry of directory's hparams.json ({} without one); None without the file."""
    path = os.path.join(directory, HPARAMS_FILE)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            entry = json.load(f).get("export", {})
    except (OSError, ValueError, AttributeError) as error:
        raise UserError(f"{path} is unreadable or not a t2t-lite hparams file: {error}") from None
    return entry if isinstance(entry, dict) else {}
