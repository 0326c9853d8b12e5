"""The private-API fence: installed versions inside the tested ranges, every private name it uses still there.

t2t_lite/compat.py is the one module that reaches Keras, TensorFlow and
tensorflow-text private names. On a version nobody tested, these tests fail
first and say which versions were tested, before a private name goes missing
somewhere in training or tokenization.
"""
import ast
import importlib.metadata
import pathlib
import re

import pytest
from packaging.specifiers import SpecifierSet

from t2t_lite import compat

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Every private name the fence holds, as it is spelled in code: none may appear in another module of the library.
PRIVATE_NAMES = ("_get_variable_index", "_momentums", "_velocities", "__internal__", "_model_resource",
                 "gen_sentencepiece_tokenizer", "self._layers")


def _tested(distribution: str) -> str:
    return f"t2t_lite/compat.py's private API was tested with {distribution}{compat.TESTED[distribution]} only"


@pytest.mark.parametrize("distribution", sorted(compat.TESTED))
def test_the_installed_version_is_one_the_fence_was_tested_with(distribution):
    installed = importlib.metadata.version(distribution)
    assert installed in SpecifierSet(compat.TESTED[distribution]), (
        f"{distribution} {installed} is installed, but {_tested(distribution)}: check every use in compat.py "
        "against it (this file's other tests), then widen compat.TESTED and setup.py's install_requires together")


@pytest.mark.parametrize("use", compat.PRIVATE_USES, ids=lambda use: use.name.split(" ")[0])
def test_every_private_name_the_fence_uses_is_still_there(use):
    installed = importlib.metadata.version(use.distribution)
    try:
        present, error = use.present(), ""
    except (AttributeError, ImportError, KeyError, TypeError) as raised:  # what a missing name raises
        present, error = False, f" ({type(raised).__name__}: {raised})"
    assert present, (f"{use.name} is gone in {use.distribution} {installed}{error}; {_tested(use.distribution)}: "
                     "replace that use in compat.py")


def test_setup_py_requires_the_tested_ranges():
    setup = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    call = next(node for node in ast.walk(setup)
                if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setup")
    requires = ast.literal_eval(next(k.value for k in call.keywords if k.arg == "install_requires"))
    for distribution, specifier in compat.TESTED.items():
        assert f"{distribution}{specifier}" in requires, f"setup.py should require {distribution}{specifier}"


def test_no_other_module_of_the_library_uses_a_private_name_of_the_fence():
    pattern = re.compile("|".join(re.escape(name) + r"\b" for name in PRIVATE_NAMES))
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for directory in ("t2t_lite", "bin", "problems", "hparams")
             for path in sorted((ROOT / directory).rglob("*.py")) if path.name != "compat.py"
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if pattern.search(line)]
    assert found == []
