"""RunDir: the run directory's paths as docs/training.md promises them, spelled in run_dir.py alone."""
import ast
import pathlib

import numpy as np
import pytest

from t2t_lite import run, run_dir
from t2t_lite.run_dir import RunDir

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "t2t_lite"
# The run directory's names a user sees (run_dir.py's docstring), distinctive enough to find as string literals.
LAYOUT_NAMES = ("ckpt", "hparams.json", "best.json", "averaged.json", "dev_scores.json", "average_sources")


def test_run_dir_gives_the_documented_layout():
    run_path = RunDir("/runs/ende")
    assert run_path.spec_file == "/runs/ende/hparams.json"
    assert run_path.checkpoint_prefix(300) == "/runs/ende/ckpt-300"
    assert run_path.checkpoint_state_file == "/runs/ende/checkpoint"
    assert run_path.best == RunDir("/runs/ende/best") and run_path.best_file == "/runs/ende/best/best.json"
    assert run_path.best.checkpoint_prefix(200) == "/runs/ende/best/ckpt-200"
    assert run_path.averaged.spec_file == "/runs/ende/averaged/hparams.json"
    assert run_path.averaged.averaged_file == "/runs/ende/averaged/averaged.json"
    assert run_path.average_sources.checkpoint_prefix(980) == "/runs/ende/average_sources/ckpt-980"
    assert run_path.dev_scores_file == "/runs/ende/dev_scores.json"
    assert (run_path.logs(run_dir.TRAIN_LOGS), run_path.logs(run_dir.EVAL_LOGS)) == ("/runs/ende/train",
                                                                                     "/runs/ende/eval")


def layout_literals(source: str) -> list[str]:
    """The layout names `source` spells as string literals or f-string parts, docstrings left out."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [name for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            for name in LAYOUT_NAMES if node.value == name or node.value.startswith(f"{name}-")]


def test_the_layouts_names_are_spelled_only_in_run_dir():
    spelled = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        names = layout_literals(path.read_text(encoding="utf-8"))
        if names:
            spelled[str(path.relative_to(PACKAGE))] = sorted(set(names))
    assert spelled == {"run_dir.py": sorted(LAYOUT_NAMES)}


def test_the_checkpoint_lookup_moved_to_run_dir_is_still_run_pys_for_its_users():
    # translator.py, lines.py and bin/ import these from t2t_lite.run.
    assert (run.find_checkpoint, run.spec_beside, run.recorded_data_dir, run.CHECKPOINT_CHOICES) == (
        run_dir.find_checkpoint, run_dir.spec_beside, run_dir.recorded_data_dir, run_dir.CHECKPOINT_CHOICES)


def test_restore_checkpoint_checks_every_variable_and_ignores_what_it_does_not_restore(tmp_path):
    import tensorflow as tf

    from t2t_lite.run_dir import CheckpointMismatch, checkpoint_exists, restore_checkpoint

    saved = {"model": tf.Module(), "optimizer": tf.Module()}
    saved["model"].w, saved["optimizer"].m = tf.Variable([1.0, 2.0]), tf.Variable([3.0])
    path = tf.train.Checkpoint(**saved).save(str(tmp_path / "ckpt"))  # ckpt-1, as training saves
    assert checkpoint_exists(path) and not checkpoint_exists(str(tmp_path / "ckpt-2"))
    model = tf.Module()
    model.w = tf.Variable([0.0, 0.0])
    restore_checkpoint(path, model=model)  # the optimizer it holds is not asked for
    np.testing.assert_array_equal(model.w.numpy(), [1.0, 2.0])
    missing = tf.Module()
    missing.w, missing.extra = tf.Variable([0.0, 0.0]), tf.Variable([0.0])
    with pytest.raises(CheckpointMismatch):
        restore_checkpoint(path, model=missing)
    other_shape = tf.Module()
    other_shape.w = tf.Variable([0.0, 0.0, 0.0])
    with pytest.raises(CheckpointMismatch, match="shape"):
        restore_checkpoint(path, model=other_shape)


# TensorFlow's checkpoint calls that only run_dir.py makes: restoring (and its check) and reading the list.
CHECKPOINT_IO = ("get_checkpoint_state", "assert_existing_objects_matched", "assert_consumed")


def checkpoint_io_outside_run_dir(root) -> list[str]:
    """"path:line: name" for each CHECKPOINT_IO call under root (a t2t_lite directory) but in run_dir.py."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "run_dir.py" and path.parent == root:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in CHECKPOINT_IO:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {node.attr}")
    return found


def test_checkpoint_io_is_written_once_in_the_run_directory_module(tmp_path):
    library = pathlib.Path(__file__).resolve().parent.parent / "t2t_lite"
    assert checkpoint_io_outside_run_dir(library) == []
    (tmp_path / "training").mkdir()
    (tmp_path / "training" / "planted.py").write_text(
        "def load(model, path):\n    tf.train.Checkpoint(model=model).restore(path).assert_existing_objects_matched()\n")
    assert checkpoint_io_outside_run_dir(tmp_path) == ["training/planted.py:2: assert_existing_objects_matched"]
