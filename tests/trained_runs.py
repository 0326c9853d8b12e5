"""The trained runs many test modules read, each trained once per test session.

Training even a tiny model costs tens of seconds on a 2-core CPU, so modules
share these instead of each training its own. They are read-only: a test that
changes a run copies it first (shutil.copytree into its tmp_path). Under
pytest-xdist the workers share one copy: the first to need a run trains it
under a file lock, the others wait for it and read it.
"""
import fcntl
import os
import shutil
from pathlib import Path

import pytest

import t2t_lite
from t2t_lite.registry import problems
from shared_data import require_shared

# No dropout, so a run decodes and scores deterministically; 1+1 layers of width 32 train in seconds.
REVERSE_TINY = ("num_encoder_layers=1,num_decoder_layers=1,d_model=32,d_ff=64,num_heads=4,dropout=0,"
                "attention_dropout=0,relu_dropout=0,train.batch_size=512")
REVERSE_STEPS = 300  # the 1+1 layers learn enough for distinct, input-dependent outputs
MULTI30K_TINY = ("d_model=32,d_ff=64,num_heads=4,num_encoder_layers=1,num_decoder_layers=1,dropout=0,"
                 "attention_dropout=0,relu_dropout=0,train.batch_size=2048,average_last_checkpoints=0")
MULTI30K_VOCAB_SIZE = 600
SHARED_RUNS_VARIABLE = "T2T_LITE_TEST_SHARED_RUNS"


def train(problem_name: str, overrides: str, output_dir: str, steps: int, data_dir: str | None = None) -> None:
    """Trains transformer_tiny with `overrides` for `steps` steps into output_dir, one checkpoint at the end.

    No memory probe: it trains nothing (test_trainer.py checks a run is the same with or without it), and its
    forward and backward pass on the largest batch shapes costs seconds of tracing and compute per run.
    """
    t2t_lite.train(problem=problem_name, hparams_set="transformer_tiny", output_dir=output_dir, data_dir=data_dir,
                   hparams=overrides, train_steps=steps, eval_steps=1, save_checkpoints_steps=steps,
                   log_every_steps=steps, eval_bleu_sentences=0, mixed_precision="none", memory_probe=False,
                   log=lambda _: None)


def multi30k_lines(split: str, language: str, count: int) -> str:
    """The first `count` lines of a Multi30k split (shared data; skips without it)."""
    with open(require_shared(f"multi30k/raw/{split}.{language}"), encoding="utf-8") as f:
        return "".join(f.readline() for _ in range(count))


def shared_runs_root(tmp_path_factory) -> Path:
    """Where this session keeps the runs made_once makes (what SHARED_RUNS_VARIABLE gives a session it starts)."""
    root = tmp_path_factory.getbasetemp()
    return root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root


def made_once(tmp_path_factory, name: str, make) -> Path:
    """A directory `make(directory)` filled, shared by every xdist worker of this session and made only once."""
    # A session started by another (the forced-ISA pass) reads its runs where that one made them, and makes
    # none itself: they are to be trained natively, by the session that started it.
    started_by_another = os.environ.get(SHARED_RUNS_VARIABLE)
    root = Path(started_by_another or shared_runs_root(tmp_path_factory))
    directory, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if make() fails
        if not done.exists() and started_by_another:
            raise RuntimeError(f"{name} is not in {root}: the session that started this one (test_forced_isa.py) "
                               f"must request its fixture, so it is made there, natively")
        if not done.exists():
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir()
            make(directory)
            done.touch()
    return directory


@pytest.fixture(scope="session")
def reverse_run(tmp_path_factory) -> str:
    """The output_dir of algorithmic_reverse trained REVERSE_STEPS steps (REVERSE_TINY): partly trained, distinct
    outputs."""
    def make(output_dir):
        train("algorithmic_reverse", REVERSE_TINY, str(output_dir), steps=REVERSE_STEPS)

    return str(made_once(tmp_path_factory, "reverse_run", make))


@pytest.fixture(scope="session")
def multi30k_run(tmp_path_factory) -> dict:
    """translate_files on 2,000 Multi30k pairs (V=600, 200 val pairs) and a tiny run trained 100 steps on it.

    Returns {"data_dir", "output_dir", "raw"}: raw holds the text it was made from,
    {train,val}.{en,de}.
    """
    def make(root):
        raw = root / "raw"
        raw.mkdir()
        for split, count in (("train", 2000), ("val", 200)):
            for language in ("en", "de"):
                (raw / f"{split}.{language}").write_text(multi30k_lines(split, language, count), encoding="utf-8")
        problem = problems.get("translate_files")(str(root / "data"))
        problem.generate_data(None, vocab_size=MULTI30K_VOCAB_SIZE, num_shards=1,
                              train_files=f"{raw}/train.en,{raw}/train.de", dev_files=f"{raw}/val.en,{raw}/val.de",
                              log=lambda line: None)
        train("translate_files", MULTI30K_TINY, str(root / "run"), steps=100, data_dir=str(root / "data"))

    root = made_once(tmp_path_factory, "multi30k_run", make)
    return {"data_dir": str(root / "data"), "output_dir": str(root / "run"), "raw": root / "raw"}
