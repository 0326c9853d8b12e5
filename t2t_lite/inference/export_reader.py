"""What an export is: the one reader of a version directory t2t-lite-exporter wrote, without TensorFlow
(export_format.py says what one holds).
"""
import dataclasses
import os

from t2t_lite.config import DecodeHParams
from t2t_lite.decoding.request import Engine
from t2t_lite.errors import UserError
from t2t_lite.export_format import (CTRANSLATE2, INPUT_TOKENIZER_KEY, REFERENCE_REPORT_KEY, REPORT_TEXT,
                                    REPORT_TREES, SAVED_MODEL, SAVED_MODEL_ASSETS, SOURCE_VOCAB_ASSET, TREE_FORM_KEY,
                                    VOCAB_ASSET)
from t2t_lite.files import read_json
from t2t_lite.run_dir import HPARAMS_FILE, RunSpec, read_spec


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
    def engine(self) -> Engine:
        """What the export decodes with and can change, to resolve a DecodeRequest against."""
        if self.format == CTRANSLATE2:
            return Engine("a CTranslate2 export", self.decode_hparams, samples=False, constrains=False,
                          takes_precision=False, precision_hint="it computes in its `compute_type`")
        return Engine("a SavedModel", self.decode_hparams, samples=False,
                      fixed=("beam_size", "alpha", "extra_length", "constrained_decoding"),
                      fixed_hint=", or decode a CTranslate2 export or the run",
                      precision=self.info.get("mixed_precision", "none"),
                      precision_hint="it computes as it was exported: export again with another `mixed_precision`")

    def report(self, outputs: list[str], references: list[str], sources: list[str]) -> list[str] | None:
        """The report lines of outputs against references as the export's problem scores them, without its
        code; None for an export whose problem scores its own way (or older than the key)."""
        kind = self.info.get(REFERENCE_REPORT_KEY)
        if kind == REPORT_TREES:
            from t2t_lite.data.target_forms import TARGET_FORMS
            from t2t_lite.metrics.tree_report import tree_report

            return tree_report(outputs, references, sources, TARGET_FORMS[self.tree_form])
        if kind == REPORT_TEXT:
            from t2t_lite.metrics.bleu import text_report

            return text_report(outputs, references)
        return None

    @property
    def tree_form(self) -> str | None:
        """The parser's target form (TARGET_FORMS); None for other problems and exports older than the key."""
        return self.info.get(TREE_FORM_KEY)

    @property
    def input_tokenizer(self) -> str | None:
        """How raw input is tokenized (Problem.input_tokenizer); None for problems that read raw text, and
        for exports older than the key (whose parsers took tokenized input)."""
        return self.info.get(INPUT_TOKENIZER_KEY)

    @property
    def vocab_path(self) -> str:
        """The SentencePiece model outputs are decoded with (the shared one, or the target's), beside
        hparams.json: in assets/ of a SavedModel."""
        return os.path.join(self._files, VOCAB_ASSET)

    @property
    def source_vocab_path(self) -> str:
        """The SentencePiece model sources are encoded with: the source's own where the model has two, else
        vocab_path."""
        path = os.path.join(self._files, SOURCE_VOCAB_ASSET)
        return path if os.path.exists(path) else self.vocab_path

    @property
    def _files(self) -> str:
        return os.path.join(self.path, SAVED_MODEL_ASSETS) if self.format == SAVED_MODEL else self.path


def find_export(path: str) -> ExportDir | None:
    """The export at path, or None when path is not one (see the module docstring).

    Raises:
      UserError: path looks like an export but its hparams.json is unreadable.
    """
    if os.path.exists(os.path.join(path, "model.bin")):
        info = _export_entry(path)
        if info is not None and info.get("format") == CTRANSLATE2:
            return ExportDir(path, CTRANSLATE2, read_spec(os.path.join(path, HPARAMS_FILE)), info)
    assets = os.path.join(path, SAVED_MODEL_ASSETS)
    saved_model = any(os.path.exists(os.path.join(path, name)) for name in ("saved_model.pb", "saved_model.pbtxt"))
    info = _export_entry(assets) if saved_model else None
    return None if info is None else ExportDir(path, SAVED_MODEL, read_spec(os.path.join(assets, HPARAMS_FILE)), info)


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
        entry = read_json(path).get("export", {})
    except (OSError, ValueError, AttributeError) as error:
        raise UserError(f"{path} is unreadable or not a t2t-lite hparams file: {error}") from None
    return entry if isinstance(entry, dict) else {}
