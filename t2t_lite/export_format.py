"""What an export directory holds: its formats, file names and the entries of its hparams.json, which
export/ writes and inference/ reads (inference/export_reader.py), without TensorFlow.

Two formats, each the run's hparams.json (with the decode settings it was
exported with and an "export" entry) beside the model and its SentencePiece
vocab.model (and source_vocab.model, for a model with a vocabulary per side):
  saved_model   saved_model.pb, with hparams.json and vocab.model in assets/
  ctranslate2   model.bin, with hparams.json (export format "ctranslate2") and vocab.model beside it
"""
from t2t_lite.errors import UserError

SAVED_MODEL, CTRANSLATE2 = "saved_model", "ctranslate2"
FORMATS = (SAVED_MODEL, CTRANSLATE2)
# The SentencePiece model's file name in either format: the shared one, or the target's where each side has
# its own; the source's then beside it (data/vocabulary_sides.py names the files of prepared data the same).
VOCAB_ASSET, SOURCE_VOCAB_ASSET = "vocab.model", "source_vocab.model"
SAVED_MODEL_ASSETS = "assets"
# The "export" entry's key for a parser's target form (data/target_forms.py TARGET_FORMS), so that a Translator
# over the export writes bracketed trees without importing the problem (and TensorFlow).
TREE_FORM_KEY = "tree_form"
# The "export" entry's key for how outputs are scored against references without the problem's code
# (and TensorFlow): REPORT_TEXT, REPORT_TREES, or None where the problem scores its own way.
REFERENCE_REPORT_KEY = "reference_report"
# The "export" entry's key for how a parser's raw input is tokenized (Problem.input_tokenizer), so that a
# Translator over the export tokenizes as one over the run does.
INPUT_TOKENIZER_KEY = "input_tokenizer"
REPORT_TEXT, REPORT_TREES = "text", "trees"


INSTALL_HINT = 'CTranslate2 is not installed; pip install ".[ctranslate2]" (or pip install "ctranslate2>=4.5")'


def require_ctranslate2():
    """The ctranslate2 module, or a UserError saying how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    return ctranslate2


def tree_form(problem) -> str | None:
    """A problem's target form when its outputs are linearised trees ("tags" or "words"); None otherwise."""
    return getattr(problem, "target_form", None)


def input_tokenizer(problem) -> str | None:
    """How the problem's raw input is tokenized (Problem.input_tokenizer); None: it is read as it is."""
    return getattr(problem, "input_tokenizer", None)


def problem_info(problem) -> dict:
    """What an export records of its problem, so it is decoded and scored without the problem's code:
    its tree form, its reference report and its input tokenizer."""
    return {TREE_FORM_KEY: tree_form(problem), REFERENCE_REPORT_KEY: reference_report(problem),
            INPUT_TOKENIZER_KEY: input_tokenizer(problem)}


def reference_report(problem) -> str | None:
    """How an export of `problem` scores outputs against references without importing it: REPORT_TREES for a
    parser (metrics/tree_report.py), REPORT_TEXT for a problem scored and tracked as Problem is (BLEU, chrF2
    and TER), None for one with its own scores."""
    from t2t_lite.data.problem import Problem

    if tree_form(problem) is not None:
        return REPORT_TREES
    own = type(problem).score is not Problem.score or type(problem).dev_metric is not Problem.dev_metric
    return None if own else REPORT_TEXT
