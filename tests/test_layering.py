"""Inference is layered one way: decoding/ below the Translator, the Translator below the line-I/O commands.

Every import of every module is read with `ast`, those inside functions included (lazy imports hid a circle once).
"""
import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "t2t_lite"
TRANSLATOR, LINE_IO = "t2t_lite.translator", "t2t_lite.lines"
# Each directory under t2t_lite/ and the modules its code must not import (a module or anything under it).
FORBIDDEN = {
    "decoding": (TRANSLATOR, LINE_IO),
    "training": (TRANSLATOR, LINE_IO, "t2t_lite.bin"),
}


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
    for directory, banned in forbidden.items():
        for path in sorted((root / directory).rglob("*.py")):
            module = ".".join(("t2t_lite",) + path.relative_to(root).with_suffix("").parts)
            for name in sorted(imported_modules(path.read_text(encoding="utf-8"), module)):
                if any(name == ban or name.startswith(ban + ".") for ban in banned):
                    found.append(f"{path.relative_to(root)}: imports {name}")
    return found


def test_decoding_and_training_import_nothing_above_them():
    assert violations(PACKAGE, FORBIDDEN) == []


@pytest.mark.parametrize("code", [
    "from t2t_lite.translator import Translator\n",
    "def lazy():\n    import t2t_lite.lines as lines\n",  # inside a function
    "from t2t_lite import translator\n",
    "from .. import lines\n",  # relative
    "from t2t_lite.bin.run_flags import run_request\n",
])
def test_the_check_finds_a_planted_import(tmp_path, code):
    for directory in FORBIDDEN:
        (tmp_path / directory).mkdir()
    planted = tmp_path / "training" / "planted.py"
    planted.write_text(code, encoding="utf-8")
    assert {line.split(":")[0] for line in violations(tmp_path, FORBIDDEN)} == {"training/planted.py"}


def test_the_check_lets_allowed_imports_through(tmp_path):
    (tmp_path / "decoding").mkdir()
    (tmp_path / "decoding" / "fine.py").write_text(
        "import numpy\nfrom t2t_lite.decoding.batching import Hypothesis\nfrom t2t_lite import errors\n"
        "from . import beam_search\n", encoding="utf-8")
    assert violations(tmp_path, {"decoding": (TRANSLATOR, LINE_IO)}) == []
