"""Library errors name parameters ("`output_dir` is required"); the commands say them as flags ("--output_dir").

A Python caller of `t2t_lite.train(output_dir=None)` passes parameters, not flags, so the library's messages name
them in backquotes; bin/cli.py's run_main, where a command prints a UserError, turns each backquoted name that is a
flag of the command into --name (cli.flag_names), so the command line reads as before.
"""
import ast
import pathlib
import re

import pytest

import t2t_lite
import t2t_lite.problems  # noqa: F401  (registers the problems)
from t2t_lite import run_dir, usr_dir
from t2t_lite.errors import UserError
from t2t_lite.registry import problems
from cli_helpers import run_forked, run_tools

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The library: t2t_lite/, and problems/ and hparams/, installed as t2t_lite.problems and t2t_lite.hparams. bin/ is
# the command line, where flags are what the user types.
LIBRARY = ("t2t_lite", "problems", "hparams")
# A flag as a command line spells it: --name, or --{name} / --%s in an f-string, a format string or a string
# joined with "+" to a value; not "a -- b", "---".
FLAG = re.compile(r"(?<![\w-])--(?:[a-z][a-z0-9_]*|\{|%)")


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of a module and of its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                found.add(id(first.value))
    return found


def is_string(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def joined(node: ast.AST) -> list[ast.AST]:
    """The operands of a chain of "+" (a + b + c), left to right; [node] for anything else."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return joined(node.left) + joined(node.right)
    return [node]


def rendered(node: ast.AST) -> str:
    """A string constant's text; an f-string's, each replacement field shown as {}; a "+" chain's, its strings
    joined and every other operand shown as {}."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else "{}"
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)
    if isinstance(node, ast.BinOp):
        return "".join(rendered(part) if is_string(part) else "{}" for part in joined(node))
    return "{}"


def flag_names_in(source: str, path: str) -> list[str]:
    """"path:line: the flag" for each flag-like --name in a string constant, f-string or "+" chain of strings of
    `source` (a flag split across two strings, "-" + "-name", is one), docstrings and comments aside."""
    tree = ast.parse(source)
    skipped = docstrings(tree)
    chains = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):  # its parts are looked at as one string
            skipped.update(id(part) for part in node.values)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and id(node) not in skipped:
            parts = joined(node)
            if any(is_string(part) for part in parts):  # looked at as one string, from the outermost "+"
                chains.append(node)
                skipped.update(id(inner) for inner in ast.walk(node) if inner is not node)
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped or not (is_string(node) or node in chains):
            continue
        for match in FLAG.finditer(rendered(node)):
            # The line of the match within a string spread over lines, where the source spells it as it reads.
            segment = ast.get_source_segment(source, node) or ""
            at = segment.find(match[0])
            line = node.lineno + (segment[:at].count("\n") if at >= 0 else 0)
            found.append((line, f"{path}:{line}: {match[0]}"))
    return [text for _, text in sorted(found)]


def test_the_check_finds_flags_in_strings_and_f_strings_but_not_in_docstrings_or_comments():
    source = ('"""Module doc: --doc_flag."""\n'
              'def f(name):\n'
              '    """Function doc: --doc_flag."""\n'
              '    # a comment: --comment_flag\n'
              '    a = "fine: `output_dir`, a -- b, t2t-lite-datagen, ---"\n'
              '    b = ("first line "\n'
              '         "--data_dir is required")\n'
              '    c = f"--{name} must be at least 1"\n'
              '    d = "-" + "-output_dir"\n'
              '    e = "--" + name + " is bad"\n'
              '    g = "--%s is bad" % name\n'
              '    return f"{name}: pass --usr_dir={a}"\n')
    assert flag_names_in(source, "x.py") == ["x.py:7: --data_dir", "x.py:8: --{", "x.py:9: --output_dir",
                                             "x.py:10: --{", "x.py:11: --%", "x.py:12: --usr_dir"]


def test_library_strings_name_parameters_not_flags():
    found = []
    for package in LIBRARY:
        for path in sorted((ROOT / package).rglob("*.py")):
            found.extend(flag_names_in(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix()))
    assert not found, ("name the parameter in backquotes (`output_dir`), not the flag (bin/cli.py's run_main "
                       "says it as --output_dir):\n" + "\n".join(found))


def _tiny(**settings) -> dict:
    return dict(problem="algorithmic_reverse", hparams_set="transformer_tiny", **settings)


@pytest.mark.parametrize("call, names", [
    (lambda tmp: t2t_lite.train(**_tiny(output_dir=None)), ["output_dir"]),
    (lambda tmp: t2t_lite.train(output_dir=str(tmp / "run"), train_steps=1), ["problem", "hparams_set"]),
    (lambda tmp: t2t_lite.train(**_tiny(output_dir=str(tmp / "run"), save_checkpoints_steps=0)),
     ["save_checkpoints_steps"]),
    (lambda tmp: t2t_lite.train(**_tiny(output_dir=str(tmp / "run"), warm_start_optimizer=True)),
     ["warm_start_optimizer", "warm_start_from"]),
    (lambda tmp: run_dir.find_checkpoint(None, None), ["output_dir", "checkpoint_path"]),
    (lambda tmp: usr_dir.import_usr_dir(str(tmp / "missing")), ["usr_dir"]),
    (lambda tmp: problems.get("translate_files")(str(tmp / "data")).generate_data(None, log=lambda line: None),
     ["train_files", "dev_files"]),
], ids=["output_dir", "problem", "at_least_1", "warm_start", "find_checkpoint", "usr_dir", "datagen"])
def test_python_calls_are_told_parameter_names(call, names, tmp_path):
    with pytest.raises(UserError) as refused:
        call(tmp_path)
    message = str(refused.value)
    assert all(f"`{name}`" in message for name in names) and "--" not in message, message
    assert not any(tmp_path.iterdir())  # refused before anything was written


# What cli.flag_names makes of library messages, in a trainer's process (whose flags are defined).
TRANSLATIONS = {
    "`output_dir` is required (the run directory)": "--output_dir is required (the run directory)",
    "`problem`=wmt_ende trains on prepared data; pass `data_dir`=DIR":
        "--problem=wmt_ende trains on prepared data; pass --data_dir=DIR",
    # Parameters named other than their flag: distribution.split_cpu(num_devices) is --cpu_devices.
    "`num_devices` must be at least 1, got 0": "--cpu_devices must be at least 1, got 0",
    # Not flags of the trainer: a word, a field, a parameter of another command; left as they are.
    "`model` differs; `train.batch_size` too; `decode_to_file` and `not_a_flag` stay":
        "`model` differs; `train.batch_size` too; `decode_to_file` and `not_a_flag` stay",
    "no backquotes, --already_a_flag": "no backquotes, --already_a_flag",
}


def _translate(messages: list[str]) -> None:
    """In a process of its own (absl's flags are global): prints cli.flag_names of each message, a line each."""
    import t2t_lite.bin.trainer  # noqa: F401  (defines the trainer's flags)
    from t2t_lite.bin.cli import flag_names

    print("\n".join(flag_names(message) for message in messages))


def test_the_commands_say_backquoted_parameters_as_their_flags():
    code, out, err = run_forked(_translate, list(TRANSLATIONS))
    assert code == 0, err
    assert dict(zip(TRANSLATIONS, out.splitlines())) == TRANSLATIONS


def test_the_command_line_still_names_flags(tmp_path):
    results = run_tools({"no_output_dir": ("trainer", ["--problem=algorithmic_reverse"]),
                         "cpu_devices": ("trainer", ["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny",
                                                     f"--output_dir={tmp_path / 'run'}", "--cpu_devices=-1"])})
    for result in results.values():
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert results["no_output_dir"].error == "--output_dir is required (the run directory)"
    assert results["cpu_devices"].error == "--cpu_devices must be at least 1, got -1"
    assert not (tmp_path / "run").exists()
