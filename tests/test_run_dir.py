"""RunDir: the run directory's paths as docs/training.md promises them, spelled in run_dir.py alone."""
import ast
import pathlib

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
