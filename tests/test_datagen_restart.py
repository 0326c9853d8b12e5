"""t2t-lite-datagen killed (SIGKILL) while it encodes the train split: the rerun resumes and writes the same bytes.

tests/test_datagen_cli.py kills datagen after its first train shard is written;
this kills it earlier, in the scatter pass of the shuffled layout
(records.write_shuffled_shards), after a commit and with buckets written past it.
"""
import json
import os
import re
import signal
import subprocess
import sys

import pytest

from t2t_lite.data.records import SCATTER
from t2t_lite.errors import UserError
from t2t_lite.problems.translate import TranslateFiles
from shared_data import require_shared

COMMAND = [sys.executable, "-m", "t2t_lite.bin.datagen"]
PAIRS = 8_000  # datagen commits every 1,000 examples; the kill comes at the first commit


def _files(tmp_path) -> dict[str, str]:
    files = {}
    for split, raw, count in (("train", "train", PAIRS), ("dev", "val", 200)):
        for lang in ("en", "de"):
            lines = require_shared(f"multi30k/raw/{raw}.{lang}").read_text(encoding="utf-8").splitlines()
            (tmp_path / f"{split}.{lang}").write_text("\n".join(lines[:count]) + "\n", encoding="utf-8")
        files[f"{split}_files"] = f"{tmp_path / f'{split}.en'},{tmp_path / f'{split}.de'}"
    return files


def _encoded(line: str) -> int | None:
    """How many examples an 'examples encoded' progress line reports as done."""
    match = re.match(r"train: ([\d,]+)/[\d,]+ examples encoded", line)
    return int(match.group(1).replace(",", "")) if match else None


def test_killed_while_encoding_resumes_to_the_uninterrupted_bytes(tmp_path):
    files = _files(tmp_path)
    options = {**files, "vocab_size": 600, "num_shards": 4}
    flags = ["--problem=translate_files", "--max_length=0", *(f"--{k}={v}" for k, v in options.items())]
    killed = tmp_path / "killed"
    process = subprocess.Popen([*COMMAND, f"--data_dir={killed}", *flags], stderr=subprocess.PIPE, text=True)
    for line in process.stderr:
        if _encoded(line):  # the first commit of the scatter pass
            process.send_signal(signal.SIGKILL)
            break
    process.wait(timeout=300)
    assert process.returncode == -signal.SIGKILL
    assert not list(killed.glob("train-*.tfrecord")), "datagen wrote shards before it could be killed"
    with open(killed / f"train{SCATTER}" / "state.json") as f:
        committed = sum(json.load(f)["counts"])
    assert 0 < committed < PAIRS

    rerun = subprocess.run([*COMMAND, f"--data_dir={killed}", *flags], check=False, capture_output=True,
                           text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert f"train: {PAIRS:,} examples in 4 shards" in rerun.stdout
    # The rerun went on from the commit rather than starting over.
    first = next(n for n in map(_encoded, rerun.stderr.splitlines()) if n)
    assert first >= committed + 1_000, rerun.stderr

    reference = tmp_path / "reference"
    TranslateFiles(str(reference)).generate_data(None, log=lambda line: None, **options)
    assert sorted(os.listdir(killed)) == sorted(os.listdir(reference))
    for name in os.listdir(reference):
        assert (killed / name).read_bytes() == (reference / name).read_bytes(), name


def test_train_shards_in_file_order_are_kept_but_not_finished_in_shuffled_order(tmp_path):
    files = _files(tmp_path)
    options = {**files, "vocab_size": 600, "num_shards": 2}
    data_dir = tmp_path / "data"
    TranslateFiles(str(data_dir)).generate_data(None, log=lambda line: None, **options)
    # What an earlier t2t-lite left: the same config without "train_order" (its shards were in file order).
    config = json.loads((data_dir / "problem_config.json").read_text())
    assert config.pop("train_order") == "shuffled"
    (data_dir / "problem_config.json").write_text(json.dumps(config))
    stamps = {p.name: p.stat().st_mtime_ns for p in data_dir.iterdir()}
    TranslateFiles(str(data_dir)).generate_data(None, log=lambda line: None, **options)  # complete: kept
    assert {p.name: p.stat().st_mtime_ns for p in data_dir.iterdir()} == stamps

    (data_dir / "train-00001-of-00002.tfrecord").unlink()
    with pytest.raises(UserError, match="train shards in file order.*new --data_dir"):
        TranslateFiles(str(data_dir)).generate_data(None, log=lambda line: None, **options)
    assert not (data_dir / "train-00001-of-00002.tfrecord").exists()
