"""A run directory travels as a RunDir: made once at the public entries, and only run_dir.py lists, probes and
restores its checkpoints or reads and rewrites its `checkpoint` list.

The entries: t2t_lite.train, Translator.from_run, average_checkpoints and run.name_partners take a path or a RunDir; RunConfig (what
train and t2t-lite-trainer make) and RunRequest (what from_run and the decoder, scorer, exporter and visualiser
make) turn a path given as their output_dir into a RunDir when made, each with run_dir.as_run_dir.

Two kinds of check. The signature check walks, with `inspect`, every function, method and class of the installed
modules (t2t_lite and its problems and hparams; bin/ reads flags and hands them to these entries) and refuses a
parameter that names a run directory (`run`, `run_dir`, `output_dir`, `destination_dir`, `best_dir`, or a name
ending in `_run_dir`) whose annotation names `str` or whose default is a string, outside the entries.
Annotations are read as text (a module with `from __future__ import annotations` holds strings; the others are
formatted), so `str | None` and `Optional[str]` count as str. An unannotated parameter without a string default is
not judged here: the static check below holds training/, where most run directories travel, to annotating each
RunDir. The static checks read the source with `ast`, so a planted module can be checked like the library.
"""
import ast
import importlib
import inspect
import pathlib
import pkgutil
import re
import types

import t2t_lite
from t2t_lite.run import RunRequest
from t2t_lite.run_dir import RunDir, as_run_dir
from t2t_lite.training.run_config import RunConfig

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "t2t_lite"
# Where a path string a user gave becomes a RunDir: t2t_lite.train and the command's RunConfig take output_dir as
# a setting, the Trainer makes the RunDir from it, and the averaging command's library entry makes its two.
ENTRY_PARAMETERS = {
    ("training/api.py", "train"): {"output_dir"},
    ("training/run_config.py", "from_settings"): {"output_dir"},
    ("training/averaging.py", "average_checkpoints"): {"output_dir", "destination_dir"},
}
# Where a RunDir may be made outside run_dir.py: nowhere (the entries make theirs with run_dir.as_run_dir).
RUN_DIR_MADE_IN = set()
# Directories that are not run directories: the prepared data (data/) and the user's registrations (usr_dir.py).
OTHER_DIRECTORIES = {"data_dir", "usr_dir"}
# TensorFlow's calls on a directory's checkpoints, by the end of their dotted name.
# A CheckpointManager writes the directory's `checkpoint` list.
CHECKPOINT_CALLS = ("train.latest_checkpoint", "train.get_checkpoint_state", "train.update_checkpoint_state",
                    "train.list_variables", "train.load_checkpoint", "train.checkpoint_exists",
                    "train.CheckpointManager")


def names_a_run_directory(parameter: str) -> bool:
    return parameter not in OTHER_DIRECTORIES and (
        parameter.endswith("_dir") or parameter in ("directory", "destination", "sources"))


def functions(tree: ast.Module):
    """(qualified name, def node) for every function and method in tree, nested ones included."""
    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield f"{prefix}{child.name}", child
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)
    yield from walk(tree, "")


def string_run_directories(root: pathlib.Path, modules: str = "training/*.py") -> list[str]:
    """"path: function(parameter: annotation)" for each run-directory parameter under root not annotated RunDir."""
    found = []
    for path in sorted(root.glob(modules)):
        where = str(path.relative_to(root))
        for name, node in functions(ast.parse(path.read_text(encoding="utf-8"))):
            arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            for argument in arguments:
                if not names_a_run_directory(argument.arg) or argument.arg in ENTRY_PARAMETERS.get((where, name), ()):
                    continue
                annotation = ast.unparse(argument.annotation) if argument.annotation else "no annotation"
                if not re.fullmatch(r"['\"]?RunDir( \| None)?['\"]?", annotation):
                    found.append(f"{where}: {name}({argument.arg}: {annotation})")
    return found


def dotted(node: ast.AST) -> str:
    """`tf.train.latest_checkpoint` for that attribute chain; a call in the chain reads `Checkpoint()`."""
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return f"{dotted(node.func)}()"
    return "?"


def calls(tree: ast.AST, function: str = ""):
    """(qualified name of the innermost function around it, or "" at module level; call node) for every call."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            inner = f"{function}.{child.name}" if function else child.name
            yield from calls(child, inner)
            continue
        if isinstance(child, ast.Call):
            yield function, child
        yield from calls(child, function)


def checkpoint_handling_outside_run_dir(root: pathlib.Path) -> list[str]:
    """"path:line: call" for each checkpoint lookup, restore or RunDir made under root but in run_dir.py and the
    entries."""
    found = []
    for path in sorted(root.rglob("*.py")):
        where = str(path.relative_to(root))
        if where == "run_dir.py":
            continue
        for function, call in calls(ast.parse(path.read_text(encoding="utf-8"))):
            name = dotted(call.func)
            if (name.endswith(CHECKPOINT_CALLS) or re.search(r"Checkpoint\(\)\.restore$", name)
                    or (name == "RunDir" and (where, function) not in RUN_DIR_MADE_IN)):
                found.append(f"{where}:{call.lineno}: {name}")
    return found


def test_below_the_entries_a_run_directory_is_a_rundir():
    assert string_run_directories(PACKAGE) == []


def test_checkpoints_are_listed_probed_and_restored_only_in_run_dir():
    assert checkpoint_handling_outside_run_dir(PACKAGE) == []
    assert checkpoint_handling_outside_run_dir(ROOT / "bin") == []


def test_the_checks_find_what_they_look_for(tmp_path):
    (tmp_path / "training").mkdir()
    (tmp_path / "training" / "planted.py").write_text(
        "from __future__ import annotations\n"
        "class Saver:\n"
        "    def __init__(self, output_dir: str, data_dir: str, kept: RunDir, best_dir: 'RunDir | None'):\n"
        "        self.newest = tf.train.latest_checkpoint(output_dir)\n"
        "def average(destination, sources: RunDir | str, run_dir: RunDir):\n"
        "    run = RunDir(destination)\n"
        "    tf.train.Checkpoint(model=run).restore(sources)\n"
        "    return tf.compat.v1.train.update_checkpoint_state(run_dir.path, 'ckpt-1')\n")
    assert string_run_directories(tmp_path) == [
        "training/planted.py: Saver.__init__(output_dir: str)",
        "training/planted.py: average(destination: no annotation)",
        "training/planted.py: average(sources: RunDir | str)"]
    assert checkpoint_handling_outside_run_dir(tmp_path) == [
        "training/planted.py:4: tf.train.latest_checkpoint",
        "training/planted.py:6: RunDir",
        "training/planted.py:7: tf.train.Checkpoint().restore",
        "training/planted.py:8: tf.compat.v1.train.update_checkpoint_state"]


# The signature check (module docstring). Entries: qualified name -> the parameters that take a path or a RunDir.
ENTRIES = {
    "t2t_lite.training.api.train": {"output_dir"},
    "t2t_lite.training.run_config.from_settings": {"output_dir"},
    "t2t_lite.training.averaging.average_checkpoints": {"output_dir", "destination_dir"},
    "t2t_lite.inference.translator.Translator.from_run": {"output_dir"},
    "t2t_lite.run.name_partners": {"output_dir"},  # t2t-lite-ensemble's
}
# Not a function below the entries but what `train` hands back: the path, as the user gave it.
RESULTS = {"t2t_lite.training.api.TrainedRun.__init__": {"output_dir"}}
# ("sources" is not among them: elsewhere it names source sentences.)
RUN_DIRECTORY_NAMES = {"run", "run_dir", "output_dir", "destination_dir", "best_dir"}


def is_run_directory_name(name: str) -> bool:
    return name in RUN_DIRECTORY_NAMES or name.endswith("_run_dir")


def installed_modules() -> list[types.ModuleType]:
    """t2t_lite's modules and those of its problems and hparams (t2t_lite.problems, t2t_lite.hparams)."""
    names = [info.name for info in pkgutil.walk_packages([str(PACKAGE)], "t2t_lite.")]
    for package in ("problems", "hparams"):
        names += [f"t2t_lite.{package}"] + [info.name for info in pkgutil.walk_packages(
            [str(ROOT / package)], f"t2t_lite.{package}.")]
    return [t2t_lite] + [importlib.import_module(name) for name in sorted(names)]


def callables(module: types.ModuleType):
    """(qualified name, function) for the module's own functions, and its classes' methods and constructors."""
    for name, value in vars(module).items():
        if getattr(value, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(value):
            yield f"{module.__name__}.{name}", value
        elif inspect.isclass(value):
            for attribute, member in vars(value).items():
                function = getattr(member, "__func__", None) or getattr(member, "fget", None) or member
                if inspect.isfunction(function):
                    yield f"{module.__name__}.{name}.{attribute}", function


def annotation_text(annotation) -> str:
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def string_run_directory_parameters(modules) -> list[str]:
    """"module.function(parameter: annotation = default)" for each run-directory parameter that takes a string,
    below the entries; an entry's parameter must take a RunDir too."""
    found = []
    for module in modules:
        for name, function in callables(module):
            for parameter in inspect.signature(function).parameters.values():
                if not is_run_directory_name(parameter.name) or parameter.name in RESULTS.get(name, ()):
                    continue
                text = "" if parameter.annotation is inspect.Parameter.empty else annotation_text(parameter.annotation)
                takes_str = bool(re.search(r"\bstr\b", text)) or isinstance(parameter.default, str)
                entry = parameter.name in ENTRIES.get(name, ())
                if (takes_str and not entry) or (entry and "RunDir" not in text):
                    found.append(f"{name}({parameter.name}: {text or 'no annotation'}"
                                 f"{'' if parameter.default is inspect.Parameter.empty else f' = {parameter.default!r}'})")
    return found


def test_below_the_entries_no_run_directory_parameter_takes_a_string():
    modules = installed_modules()
    assert len(modules) > 100  # the walk reached the package, not just its __init__
    assert string_run_directory_parameters(modules) == []


def test_every_entry_exists():
    named = {name for module in installed_modules() for name, _ in callables(module)}
    assert set(ENTRIES) | set(RESULTS) <= named


def test_the_entries_make_a_path_a_run_dir_once(tmp_path):
    assert RunConfig(output_dir=str(tmp_path)).output_dir == RunDir(str(tmp_path))
    assert RunConfig(output_dir=tmp_path).output_dir == RunDir(str(tmp_path))  # a pathlib path too
    assert RunRequest(output_dir=str(tmp_path)).output_dir == RunDir(str(tmp_path))
    given = RunDir(str(tmp_path))
    assert RunRequest(output_dir=given).output_dir is given and as_run_dir(given) is given
    assert RunRequest().output_dir is None and as_run_dir("") is None


def test_the_signature_check_finds_what_it_looks_for():
    planted = types.ModuleType("planted")
    exec("from __future__ import annotations\n"
         "from typing import Optional\n"
         "def load(output_dir: str, data_dir: str): ...\n"
         "def save(run: RunDir, best_dir: Optional[str] = None, run_dir='runs/base'): ...\n"
         "def fine(run, run_dir: RunDir | None = None, export_dir: str = ''): ...\n"
         "class Saver:\n"
         "    def __init__(self, checkpoint_run_dir: 'str | RunDir'): ...\n"
         "    @classmethod\n"
         "    def make(cls, destination_dir: str | None = None): ...\n", planted.__dict__)
    typed = types.ModuleType("typed")  # annotations as types, not text
    exec("def open_it(output_dir: str | None = None, run=None): ...\n", typed.__dict__)
    assert string_run_directory_parameters([planted, typed]) == [
        "planted.load(output_dir: str)",
        "planted.save(best_dir: Optional[str] = None)",
        "planted.save(run_dir: no annotation = 'runs/base')",
        "planted.Saver.__init__(checkpoint_run_dir: 'str | RunDir')",
        "planted.Saver.make(destination_dir: str | None = None)",
        "typed.open_it(output_dir: str | None = None)"]
