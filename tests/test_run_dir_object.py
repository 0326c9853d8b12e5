"""A run directory travels as a RunDir: made once at the public entries, and only run_dir.py lists, probes and
restores its checkpoints or reads and rewrites its `checkpoint` list.

Both checks read the source with `ast`, so annotations are read as written (a module with
`from __future__ import annotations` holds them as strings) and a planted module can be checked like the library.
"""
import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "t2t_lite"
# Where a path string a user gave becomes a RunDir: t2t_lite.train and the command's RunConfig take output_dir as
# a setting, the Trainer makes the RunDir from it, and the averaging command's library entry makes its two.
ENTRY_PARAMETERS = {
    ("training/api.py", "train"): {"output_dir"},
    ("training/run_config.py", "from_settings"): {"output_dir"},
    ("training/averaging.py", "average_checkpoints"): {"output_dir", "destination_dir"},
}
RUN_DIR_MADE_IN = {("training/trainer.py", "Trainer.__init__"), ("training/averaging.py", "average_checkpoints")}
# Directories that are not run directories: the prepared data (data/) and the user's registrations (usr_dir.py).
OTHER_DIRECTORIES = {"data_dir", "usr_dir"}
# TensorFlow's calls on a directory's checkpoints, by the end of their dotted name.
CHECKPOINT_CALLS = ("train.latest_checkpoint", "train.get_checkpoint_state", "train.update_checkpoint_state",
                    "train.list_variables", "train.load_checkpoint", "train.checkpoint_exists")


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
