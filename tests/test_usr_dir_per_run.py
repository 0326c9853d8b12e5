"""Each run opens with its own usr dir, whatever other usr dirs its process imported before (t2t_lite.usr_dir).

Imports and registrations are process-wide, so each sequence runs in a process of its own (run_forked), as a
notebook or script would, and leaves the test worker's registries alone.
"""
import json
import shutil
from pathlib import Path

import pytest

from cli_helpers import run_forked
from small_training import TINY

# A usr dir `NAME`: a small reverse problem and a tiny set, both named after the package, so a run of one usr
# dir cannot open with the other's registrations.
USR_DIR = '''
from t2t_lite.config import apply_overrides
from t2t_lite.problems.algorithmic import AlgorithmicReverse
from t2t_lite.registry import hparams_sets, problems


@problems.register("{name}")
class Reverse(AlgorithmicReverse):
    name = "{name}"
    split_sizes = {{"train": 300, "dev": 20}}


@hparams_sets.register("{name}_tiny")
def tiny():
    return apply_overrides(hparams_sets.get("transformer_tiny")(), "{overrides}")
'''
SETTINGS = dict(train_steps=2, save_checkpoints_steps=2, eval_steps=1, log_every_steps=2, eval_bleu_sentences=0,
                memory_probe=False, mixed_precision="none", log=lambda _: None)


def write_usr_dir(parent: Path, name: str) -> Path:
    (parent / name).mkdir(parents=True)
    (parent / name / "__init__.py").write_text(USR_DIR.format(name=name, overrides=TINY), encoding="utf-8")
    return parent / name


def recorded_usr_dir(run: Path) -> str:
    return json.loads((run / "hparams.json").read_text(encoding="utf-8"))["usr_dir"]


def _notebook(a: str, b: str, runs: str) -> None:
    """The notebook: train with usr dir A, then with B, then B's problem again given no usr dir, then A's
    problem with B's set given none (refused), then open A's and B's runs."""
    import t2t_lite
    from t2t_lite.errors import UserError

    t2t_lite.train(problem="reverse_a", hparams_set="reverse_a_tiny", output_dir=f"{runs}/a", usr_dir=a, **SETTINGS)
    t2t_lite.train(problem="reverse_b", hparams_set="reverse_b_tiny", output_dir=f"{runs}/b", usr_dir=b, **SETTINGS)
    t2t_lite.train(problem="reverse_b", hparams_set="reverse_b_tiny", output_dir=f"{runs}/c", **SETTINGS)
    try:
        t2t_lite.train(problem="reverse_a", hparams_set="reverse_b_tiny", output_dir=f"{runs}/mixed", **SETTINGS)
    except UserError as error:
        print(f"error: {error}")
    _open(f"{runs}/a", f"{runs}/b")


def _open(*runs: str) -> None:
    """Opens each run in turn in this process, given no usr dir, and says which problem each opened with."""
    import t2t_lite

    for run in runs:
        print(f"opened {t2t_lite.Translator.from_run(run, beam_size=1).run.problem_name}")


@pytest.fixture(scope="module")
def notebook(tmp_path_factory):
    """The runs of _notebook, of two usr dirs, reverse_a and reverse_b, trained in one process, and what it
    printed."""
    root = tmp_path_factory.mktemp("per_run")
    a, b = write_usr_dir(root / "a", "reverse_a"), write_usr_dir(root / "b", "reverse_b")
    code, out, err = run_forked(_notebook, str(a), str(b), str(root / "runs"))
    assert code == 0, err[-3000:]
    return {"a": a, "b": b, "runs": root / "runs", "printed": out.splitlines()}


def test_a_run_records_the_usr_dir_it_was_given_not_the_first_one_imported(notebook):
    assert recorded_usr_dir(notebook["runs"] / "a") == str(notebook["a"])
    assert recorded_usr_dir(notebook["runs"] / "b") == str(notebook["b"])
    assert notebook["printed"][-2:] == ["opened reverse_a", "opened reverse_b"]


def test_a_run_given_no_usr_dir_records_the_one_its_problem_and_set_came_from(notebook):
    a, b = notebook["a"], notebook["b"]
    # A was imported first: the run records the usr dir of its problem and set, not the process's first one.
    assert recorded_usr_dir(notebook["runs"] / "c") == str(b)
    assert notebook["printed"][:-2] == [
        f"error: this run's problem, hparams set and model come from two usr dirs (Reverse from {str(a)!r} and tiny "
        f"from {str(b)!r}) but a run records one; pass usr_dir= the one that imports the other"]
    assert not (notebook["runs"] / "mixed").exists()


def test_opening_a_run_imports_its_usr_dir_after_another_was_imported(notebook):
    # B's run first, so A's is opened in a process that has imported another usr dir already.
    code, out, err = run_forked(_open, str(notebook["runs"] / "b"), str(notebook["runs"] / "a"))
    assert code == 0, err[-3000:]
    assert out.splitlines() == ["opened reverse_b", "opened reverse_a"]


def _import_both(first: str, second: str) -> None:
    from t2t_lite import usr_dir
    from t2t_lite.errors import UserError

    usr_dir.import_usr_dir(first)
    try:
        usr_dir.import_usr_dir(second)
    except UserError as error:
        print(error)


def test_two_usr_dirs_of_one_module_name_in_one_process_are_one_clear_line(tmp_path):
    first, second = write_usr_dir(tmp_path / "one", "my_problems"), write_usr_dir(tmp_path / "two", "my_problems")
    code, out, err = run_forked(_import_both, str(first), str(second))
    assert code == 0, err[-3000:]
    assert out.splitlines() == [f"`usr_dir` {str(second)!r}: another usr dir of the module name 'my_problems', "
                                f"{str(first)!r}, is already imported in this process, and a process imports one "
                                f"module per name; rename one of the two packages"]


def test_two_usr_dirs_registering_one_name_are_one_clear_line(tmp_path):
    # A copy of a usr dir under another package name, imported beside the original: same registrations.
    for name in ("copy_one", "copy_two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(
            "from t2t_lite.problems.algorithmic import AlgorithmicReverse\nfrom t2t_lite.registry import problems\n"
            "problems.register('my_reverse')(type('Reverse', (AlgorithmicReverse,), {}))\n", encoding="utf-8")
    code, out, err = run_forked(_import_both, str(tmp_path / "copy_one"), str(tmp_path / "copy_two"))
    assert code == 0, err[-3000:]
    assert out.splitlines() == [f"`usr_dir` {str(tmp_path / 'copy_two')!r}: problem 'my_reverse' is already "
                                f"registered, by copy_one; register yours under another name"]


def _import_shadowed(shadow_dir: str, usr_dir_path: str) -> None:
    import sys

    from t2t_lite import usr_dir
    from t2t_lite.errors import UserError

    # The usr dir's parent is on sys.path already, behind a directory holding another module of its name.
    sys.path[:0] = [shadow_dir, str(Path(usr_dir_path).parent)]
    try:
        usr_dir.import_usr_dir(usr_dir_path)
    except UserError as error:
        print(error)


def test_a_usr_dir_shadowed_by_another_module_on_sys_path_is_one_clear_line(tmp_path):
    usr = write_usr_dir(tmp_path / "mine", "my_shadowed")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "my_shadowed.py").write_text("", encoding="utf-8")
    code, out, err = run_forked(_import_shadowed, str(tmp_path / "other"), str(usr))
    assert code == 0, err[-3000:]
    assert out.splitlines() == [f"`usr_dir` {str(usr)!r}: importing 'my_shadowed' finds "
                                f"{tmp_path / 'other' / 'my_shadowed.py'} first on sys.path; rename your package"]


def _resume(run: str, given: str | None) -> None:
    """Resumes run (its steps are done already, so nothing trains), given usr dir `given`."""
    import t2t_lite
    from t2t_lite.errors import UserError

    try:
        t2t_lite.train(output_dir=run, usr_dir=given, **SETTINGS)
    except UserError as error:
        print(f"error: {error}")


def test_a_resumed_run_given_a_moved_usr_dir_records_the_new_place(notebook, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(notebook["runs"] / "a", run)
    moved = tmp_path / "moved" / "reverse_a"
    shutil.copytree(notebook["a"], moved)
    spec = json.loads((run / "hparams.json").read_text(encoding="utf-8"))
    spec["usr_dir"] = str(tmp_path / "gone")
    (run / "hparams.json").write_text(json.dumps(spec), encoding="utf-8")
    code, out, err = run_forked(_resume, str(run), None)
    assert code == 0, err[-3000:]
    assert out.splitlines() == [f"error: this run was trained with `usr_dir` {str(tmp_path / 'gone')!r}, which no "
                                f"longer exists; pass `usr_dir`=<where it is now>"]
    code, out, err = run_forked(_resume, str(run), str(moved))
    assert code == 0 and out == "", err[-3000:] + out
    assert recorded_usr_dir(run) == str(moved)
    code, out, err = run_forked(_open, str(run))  # without a usr dir now: the run remembers the new place
    assert code == 0, err[-3000:]
    assert out.splitlines() == ["opened reverse_a"]
