"""t2t-lite-trainer from the command line: dry run, registry help, and bad input."""
import json
import os

import pytest

from cli_helpers import run_tool, run_tools


def trainer(*flags):
    result = run_tool("trainer", *flags)
    return result.returncode, result.stdout, result.stderr


def error_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("t2t-lite-trainer: error:")]


def test_dry_run_prints_parameter_count():
    code, out, _ = trainer("--hparams_set=transformer_base", "--dry_run", "--vocab_size=37000")
    assert code == 0
    assert out.strip().splitlines()[-1] == "parameters: 63082496"


def test_registry_help_lists_models_sets_and_problems():
    code, out, _ = trainer("--registry_help")
    assert code == 0
    for name in ("transformer", "transformer_big_v3", "transformer_table3_c_n8", "algorithmic_addition"):
        assert f"  {name}\n" in out


BAD_COMMANDS = [
    (["--problem=algorithmic_revers", "--hparams_set=transformer_tiny"], "unknown problem 'algorithmic_revers'; did you mean algorithmic_reverse"),
    (["--problem=algorithmic_reverse", "--hparams_set=transformer_tinny"], "unknown hparams set 'transformer_tinny'; did you mean transformer_tiny"),
    (["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny", "--hparams=d_modell=3"], "unknown hparams key 'd_modell'"),
    (["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny", "--hparams=num_heads=four"], "num_heads='four': expected a int"),
    (["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny", "--hparams=vocab_size=99"], "vocab_size=99 in the hparams, but the problem's vocabulary has 12 entries"),
    (["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny", "--save_checkpoints_steps=0"], "--save_checkpoints_steps must be at least 1, got 0"),
    (["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny", "--max_nonfinite_steps=0"], "--max_nonfinite_steps must be at least 1, got 0"),
    (["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny", "--distribution=mirored"], "flag --distribution=mirored: value should be one of"),
    (["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny", "--mixed_precision=none", "--float32_output_projection"], "--float32_output_projection changes nothing with --mixed_precision=none"),
]


@pytest.fixture(scope="module")
def refused(tmp_path_factory):
    """BAD_COMMANDS run side by side once: index -> (Result, its output_dir)."""
    root = tmp_path_factory.mktemp("refused")
    results = run_tools({index: ("trainer", (*flags, f"--output_dir={root / str(index) / 'run'}"))
                         for index, (flags, _) in enumerate(BAD_COMMANDS)})
    return {index: (result, root / str(index) / "run") for index, result in results.items()}


@pytest.mark.parametrize("index", range(len(BAD_COMMANDS)))
def test_bad_names_and_overrides_fail_with_one_line(refused, index):
    result, run = refused[index]
    assert result.returncode == 2
    assert len(result.error_lines) == 1 and BAD_COMMANDS[index][1] in result.error_lines[0]
    assert "Traceback" not in result.stderr
    assert not run.exists()


def test_unwritable_output_dir_fails_with_one_line(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    code, _, err = trainer("--problem=algorithmic_reverse", "--hparams_set=transformer_tiny",
                           f"--output_dir={blocker / 'run'}")
    assert code == 2 and "cannot write to --output_dir" in error_lines(err)[0]


def test_different_hparams_set_than_saved_is_refused_and_nothing_is_overwritten(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    saved = {"problem": "algorithmic_reverse", "hparams_set": "transformer_tiny", "hparams_overrides": ""}
    from t2t_lite import config
    import t2t_lite.hparams  # noqa: F401
    from t2t_lite.registry import hparams_sets
    hp = config.apply_overrides(hparams_sets.get("transformer_tiny")(), "vocab_size=12")
    (run / "hparams.json").write_text(json.dumps({**saved, "hparams": config.to_dict(hp)}))
    before = {p: (p.read_bytes(), os.stat(p).st_mtime_ns) for p in run.iterdir()}
    code, _, err = trainer("--problem=algorithmic_reverse", "--hparams_set=transformer_small", f"--output_dir={run}")
    assert code == 2
    assert "holds a run of hparams set 'transformer_tiny', not 'transformer_small'" in error_lines(err)[0]
    code, _, err = trainer("--problem=algorithmic_reverse", "--hparams_set=transformer_tiny",
                           "--hparams=d_model=64", f"--output_dir={run}")
    assert code == 2 and "model.d_model: 128 -> 64" in error_lines(err)[0]
    assert {p: (p.read_bytes(), os.stat(p).st_mtime_ns) for p in run.iterdir()} == before


def test_a_problem_that_needs_prepared_data_says_how_to_make_it(tmp_path):
    code, _, err = trainer("--problem=wmt_ende", "--hparams_set=transformer_base", f"--output_dir={tmp_path / 'run'}")
    assert code == 2 and "Traceback" not in err
    assert error_lines(err) == ["t2t-lite-trainer: error: --problem=wmt_ende trains on prepared data: make it with "
                                "t2t-lite-datagen --problem=wmt_ende --data_dir=DIR and pass --data_dir=DIR here, "
                                "or add --generate_data --data_dir=DIR to prepare it first"]
    assert not (tmp_path / "run").exists()


def _tiny_parallel_files(directory, split: str, count: int) -> str:
    """count lines of made-up English and their word-for-word 'German', as SRC,TGT."""
    words = [("the", "der"), ("red", "rote"), ("cat", "Kater"), ("sees", "sieht"), ("a", "einen"), ("dog", "Hund"),
             ("big", "grosse"), ("house", "Haus")]
    src, tgt = directory / f"{split}.en", directory / f"{split}.de"
    lines = [[words[(i * 7 + j * 3) % len(words)] for j in range(2 + i % 4)] for i in range(count)]
    src.write_text("".join(" ".join(e for e, _ in line) + "\n" for line in lines), encoding="utf-8")
    tgt.write_text("".join(" ".join(d for _, d in line) + "\n" for line in lines), encoding="utf-8")
    return f"{src},{tgt}"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """One --generate_data run (prepare, then train 2 steps) under umask 022, for the tests below."""
    tmp_path = tmp_path_factory.mktemp("generate_data")
    data_dir, run = tmp_path / "data", tmp_path / "run"
    command = ["--problem=translate_files", "--hparams_set=transformer_tiny", f"--output_dir={run}",
               f"--data_dir={data_dir}", "--generate_data", "--vocab_size=300", "--num_shards=2",
               f"--train_files={_tiny_parallel_files(tmp_path, 'train', 200)}",
               f"--dev_files={_tiny_parallel_files(tmp_path, 'dev', 20)}", "--eval_steps=1", "--eval_bleu_sentences=0",
               "--nomemory_probe", "--max_length_ratio=0", "--nodrop_copies", "--nodrop_duplicates",
               "--hparams=d_model=16,d_ff=32,num_heads=2,num_encoder_layers=1,num_decoder_layers=1"]
    old_umask = os.umask(0o022)
    try:
        code, out, err = trainer(*command, "--train_steps=2")
    finally:
        os.umask(old_umask)
    assert code == 0, err[-2000:]
    return {"command": command, "data_dir": data_dir, "run": run, "out": out,
            "hparams_mode": (run / "hparams.json").stat().st_mode & 0o777}


def test_files_the_trainer_writes_are_readable_by_others_like_any_new_file(generated):
    # Written through a temporary file and a rename; mkstemp alone would leave them owner-only.
    assert generated["hparams_mode"] == 0o644


def test_generate_data_prepares_then_trains_in_one_command(generated):
    command, data_dir, run, out = generated["command"], generated["data_dir"], generated["run"], generated["out"]
    assert "train: 200 examples in 2 shards" in out and f"data ready in {data_dir}" in out
    config = json.loads((data_dir / "problem_config.json").read_text())
    assert config["problem"] == "translate_files" and config["vocab"]["size"] == 300
    assert json.loads((run / "hparams.json").read_text())["hparams"]["model"]["vocab_size"] == 300
    assert any(name.startswith("ckpt-2") for name in os.listdir(run))
    # A rerun finds the data ready (nothing rewritten) and resumes training.
    prepared = {p.name: p.stat().st_mtime_ns for p in data_dir.iterdir()}
    code, _, err = trainer(*command, "--train_steps=3")
    assert code == 0, err[-2000:]
    assert {p.name: p.stat().st_mtime_ns for p in data_dir.iterdir()} == prepared
    assert any(name.startswith("ckpt-3") for name in os.listdir(run))
