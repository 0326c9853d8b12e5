"""Imports flow one way: the library below problems/, hparams/ and bin/ (where the commands' line I/O is);
inside it, decoding/ below inference/ (the Translator and its backends) and export/ (which writes what inference/
reads, neither importing the other: what an export holds is export_format.py), training below all three and
below run.py (opening a run to decode it), whose run-directory reading it shares through run_dir.py; layers/ and
models/ below decoding/, which calls them with a cache, and below ops/step_matmul.py, whose kernels reach them
only as callables.

Every import of every module is read with `ast`, those inside functions included (lazy imports hid a circle once).
The registry finds the bundled problems and sets by name at its first lookup (importlib), not by an import.
"""
import ast
import pathlib
import re

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "t2t_lite"
INFERENCE, LINE_IO, OPEN_RUN, EXPORT = "t2t_lite.inference", "t2t_lite.bin.lines", "t2t_lite.run", "t2t_lite.export"
DECODING, STEP_MATMUL, PARSING = "t2t_lite.decoding", "t2t_lite.ops.step_matmul", "t2t_lite.parsing"
# What sits above the library (installed as t2t_lite.problems, .hparams and .bin) and absl's flags, which only
# the commands parse.
ABOVE_THE_LIBRARY = ("t2t_lite.problems", "t2t_lite.hparams", "t2t_lite.bin", "absl.flags")
# Each directory or module under t2t_lite/ ("." is all of it) and the modules its code must not import (a module
# or anything under it).
FORBIDDEN = {
    ".": ABOVE_THE_LIBRARY,
    # export/ writes what inference/ reads, each through export_format.py: neither imports the other.
    "inference": (LINE_IO, EXPORT),
    "export": (INFERENCE,),
    "training": (INFERENCE, LINE_IO, OPEN_RUN, "t2t_lite.bin"),
    # Layers and models know nothing of beams, kernels or decoding. decoding/ calls the model's own layers with a
    # cache (MultiHeadAttention.call(..., cache=, positions=), DecoderLayer.call, Transformer.run_decoder, logits
    # and token_losses) and hands them prepared products as opaque callables (layers/prepared.py); the beams'
    # caches and ancestry are decoding/cached_step.py's, the kernels behind the callables ops/step_matmul.py's.
    # What parsing adds (its decoder features, its tree constraint) sits above all three in parsing/.
    "layers": (DECODING, STEP_MATMUL, PARSING),
    "models": (DECODING, STEP_MATMUL, PARSING),
    "decoding": (INFERENCE, LINE_IO, PARSING),
    # metrics/ builds on data/ (its trees): a problem's default scores (BLEU) are the callers', through metrics/.
    "data": ("t2t_lite.metrics",),
}
# Parsing's words, which the generic Transformer, its layers and its search never say (parsing/ does).
PARSING_CONCEPTS = re.compile(r"word.?pointer|open.?phrase|bracket|phrase|word.?start", re.IGNORECASE)


def imported_modules(source: str, module: str) -> set[str]:
    """Every module `source` (the code of `module`, dotted) imports, anywhere in it, as absolute names.

    `from a import b` counts as both a and a.b (b may be a module); relative imports are resolved.
    """
    names = set()
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def violations(root: pathlib.Path, forbidden: dict[str, tuple[str, ...]]) -> list[str]:
    """"path: imports name" for every forbidden import under root (a t2t_lite package directory)."""
    found = []
    for place, banned in forbidden.items():
        paths = [root / place] if place.endswith(".py") else sorted((root / place).rglob("*.py"))
        for path in paths:
            module = ".".join(("t2t_lite",) + path.relative_to(root).with_suffix("").parts)
            for name in sorted(imported_modules(path.read_text(encoding="utf-8"), module)):
                if any(name == ban or name.startswith(ban + ".") for ban in banned):
                    found.append(f"{path.relative_to(root)}: imports {name}")
    return found


def test_the_library_decoding_the_translator_and_training_import_nothing_above_them():
    assert all((PACKAGE / place).exists() for place in FORBIDDEN)
    assert violations(PACKAGE, FORBIDDEN) == []


def test_the_generic_model_its_layers_and_its_search_name_no_parsing_concept():
    """Code, strings and comments of models/, layers/ and decoding/: a parser's features and constraint live in
    parsing/, reached through registry.decoder_features and Problem.output_constraint."""
    found = [f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
             for place in ("models", "layers", "decoding") for path in sorted((PACKAGE / place).rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
             if PARSING_CONCEPTS.search(line)]
    assert found == []


def make_library(root: pathlib.Path) -> None:
    """The places FORBIDDEN names, empty, under root."""
    for directory in ("decoding", "training", "inference", "export", "layers", "models"):
        (root / directory).mkdir()
    (root / "inference" / "translator.py").write_text("import numpy\n", encoding="utf-8")


@pytest.mark.parametrize("code", [
    "from t2t_lite.inference.translator import Translator\n",
    "def lazy():\n    import t2t_lite.bin.lines as lines\n",  # inside a function
    "from t2t_lite import inference\n",
    "from ..bin import lines\n",  # relative
    "from t2t_lite.bin.run_flags import run_request\n",
    "from t2t_lite.run import find_checkpoint\n",
    "def lazy():\n    from t2t_lite import run\n",
    "from ..run import recorded_data_dir\n",  # relative
])
def test_the_check_finds_a_planted_import(tmp_path, code):
    make_library(tmp_path)
    planted = tmp_path / "training" / "planted.py"
    planted.write_text(code, encoding="utf-8")
    assert {line.split(":")[0] for line in violations(tmp_path, FORBIDDEN)} == {"training/planted.py"}


@pytest.mark.parametrize("path, code, name", [
    ("inference/translator.py", "def lazy():\n    from t2t_lite.bin import lines\n", "t2t_lite.bin.lines"),
    ("inference/translator.py", "from ..bin.lines import decode_file\n", "t2t_lite.bin.lines"),
    ("export/exporter.py", "from t2t_lite.inference.translator import Translator\n", "t2t_lite.inference.translator"),
    ("run.py", "import t2t_lite.problems\n", "t2t_lite.problems"),
    ("export/exporter.py", "from t2t_lite.hparams import transformer\n", "t2t_lite.hparams.transformer"),
    ("data/problem.py", "def lazy():\n    from .. import hparams\n", "t2t_lite.hparams"),
    ("metrics/bleu.py", "from absl import flags\n", "absl.flags"),
    ("config.py", "from absl.flags import FLAGS\n", "absl.flags.FLAGS"),
    ("models/transformer.py", "from t2t_lite.bin import run_flags\n", "t2t_lite.bin.run_flags"),
    ("layers/attention.py", "from t2t_lite.ops.step_matmul import StepKernel\n", "t2t_lite.ops.step_matmul"),
    ("data/problem.py", "def lazy():\n    from t2t_lite.metrics.bleu import corpus_bleu\n", "t2t_lite.metrics.bleu"),
    ("layers/feed_forward.py", "from ..ops import step_matmul\n", "t2t_lite.ops.step_matmul"),
    ("models/transformer.py", "from ..decoding.cached_step import CachedStep\n", "t2t_lite.decoding.cached_step"),
])
def test_the_check_finds_the_translator_reading_lines_and_the_library_reading_what_sits_above_it(
        tmp_path, path, code, name):
    make_library(tmp_path)
    planted = tmp_path / path
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.write_text(code, encoding="utf-8")
    found = violations(tmp_path, FORBIDDEN)
    assert f"{path}: imports {name}" in found and {line.split(":")[0] for line in found} == {path}


def test_the_check_lets_training_read_the_run_directory(tmp_path):
    make_library(tmp_path)
    (tmp_path / "training" / "fine.py").write_text(
        "from t2t_lite.run_dir import find_checkpoint\nfrom t2t_lite import run_dir\n", encoding="utf-8")
    assert violations(tmp_path, FORBIDDEN) == []


def test_the_check_lets_allowed_imports_through(tmp_path):
    (tmp_path / "decoding").mkdir()
    (tmp_path / "decoding" / "fine.py").write_text(
        "import numpy\nfrom t2t_lite.decoding.batching import Hypothesis\nfrom t2t_lite import errors\n"
        "from . import beam_search\n", encoding="utf-8")
    assert violations(tmp_path, {"decoding": (INFERENCE, LINE_IO)}) == []
