"""What an export of either format starts from and ends with: its request, the run's text vocabularies, the
hparams.json and vocab.model (and source_vocab.model) it holds, and publishing the written version (exporter.py and ctranslate2_export.py
both build on this)."""
import dataclasses
import os
from collections.abc import Callable

from t2t_lite.data.problem import Problem
from t2t_lite.data.vocabulary import Vocabulary
from t2t_lite.errors import UserError
from t2t_lite.export import layout
from t2t_lite.export_format import SAVED_MODEL, SOURCE_VOCAB_ASSET, VOCAB_ASSET
from t2t_lite.files import atomic_write_bytes, atomic_write_text, storage_fault, storage_fault_text
from t2t_lite.ops.step_matmul import StepMatmulSettings
from t2t_lite.run import OpenedRun, RunRequest
from t2t_lite.run_dir import HPARAMS_FILE, spec_json

# t2t's default max_length: the longest source a SavedModel decodes, EOS included.
DEFAULT_MAX_INPUT_LENGTH = 256


@dataclasses.dataclass(frozen=True)
class ExportRequest:
    """What to export and how."""

    # TF Serving's model base directory; the export goes to <export_dir>/<model_name>/<version>/.
    export_dir: str
    # The run, and its decode settings and compute dtype fixed in the export (run.decode; its batch_size is
    # the export's default batch for Translator.from_export).
    run: RunRequest
    # The name clients use in TF Serving's URLs; default the problem's name.
    model_name: str | None = None
    # saved_model only: longer sources are truncated to this many ids, EOS included; None is
    # DEFAULT_MAX_INPUT_LENGTH. A CTranslate2 export takes sources as long as its position table.
    max_input_length: int | None = None
    # export_format.SAVED_MODEL (for TF Serving) or export_format.CTRANSLATE2.
    export_format: str = SAVED_MODEL
    # ctranslate2 only: the weights' type (ctranslate2_export.QUANTIZATIONS); None keeps float32.
    quantization: str | None = None
    # saved_model only: the decoding step's products traced into the export, resolved on this machine and
    # recorded; the default is t2t-lite-decoder's, so the export decodes its lines here in every precision.
    step_matmul: StepMatmulSettings = dataclasses.field(default_factory=StepMatmulSettings)


def publish(model_dir: str, export_dir: str, write: Callable[[str], None]) -> str:
    """layout.publish, with a write the disk cannot take (full, over quota, read-only) as one UserError.

    Raises:
      UserError: the disk failed the write; the partial version was removed and nothing was published.
    """
    try:
        return layout.publish(model_dir, write)
    except Exception as error:  # noqa: BLE001 (anything but a storage fault is re-raised as it is)
        if (code := storage_fault(error)) is None:
            raise
        raise UserError(f"cannot write the export into `export_dir` {export_dir!r}: {storage_fault_text(code)}, "
                        f"then export again (nothing was published; the versions in {model_dir!r} are as they "
                        f"were)") from None


@dataclasses.dataclass(frozen=True)
class TextVocabularies:
    """What an export encodes sources and decodes outputs with: one Vocabulary twice, or one per side."""

    source: Vocabulary
    target: Vocabulary

    @property
    def separate(self) -> bool:
        return self.source is not self.target


def text_vocabularies(problem: Problem, problem_name: str) -> TextVocabularies:
    """The problem's SentencePiece vocabularies (open_run has checked their sizes against the model's)."""
    vocabularies = [getattr(problem, name, None) for name in ("source_vocabulary", "vocabulary")]
    if not all(isinstance(vocabulary, Vocabulary) for vocabulary in vocabularies):
        raise UserError(f"problem {problem_name!r} has no SentencePiece vocabulary, so it cannot be exported "
                        "text-in, text-out; text problems (translate_files, wmt_ende, wmt_enfr) can")
    return TextVocabularies(*vocabularies)


def write_export_files(directory: str, run: OpenedRun, vocabularies: TextVocabularies, export_info: dict) -> None:
    """Writes an export's hparams.json (the run's spec as it was opened: its problem and decode settings, with
    `export_info` as its "export" entry), vocab.model and, with a vocabulary per side, source_vocab.model into
    directory."""
    spec = dataclasses.replace(run.spec, problem=run.problem_name,
                               hparams=dataclasses.replace(run.spec.hparams, decode=run.decode_hparams))
    atomic_write_text(os.path.join(directory, HPARAMS_FILE), spec_json(spec, export=export_info))
    atomic_write_bytes(os.path.join(directory, VOCAB_ASSET), vocabularies.target.model)
    if vocabularies.separate:
        atomic_write_bytes(os.path.join(directory, SOURCE_VOCAB_ASSET), vocabularies.source.model)
