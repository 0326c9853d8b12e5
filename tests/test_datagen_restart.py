"""t2t-lite-datagen killed (SIGKILL) twice and rerun: the last run writes the bytes of an uninterrupted one.

One data_dir goes through three runs of the same command: the first is killed in the
scatter pass of the shuffled layout (shuffle.write_shuffled_shards), after a commit and
with buckets written past it; the second must go on from that commit, and is killed once
its first train shard is finished; the third finishes the shards. A reference data_dir is
generated in-process meanwhile (on the other core while the commands start TensorFlow).
"""
import concurrent.futures
import json
import os
import re
import shutil
import signal

import pytest

from t2t_lite.data.shard_writer import count_longer
from t2t_lite.data.shuffle import SCATTER, load_state
from t2t_lite.data.text_problem import CONFIG_FILE, LENGTHS
from t2t_lite.errors import UserError
from t2t_lite.problems.translate import TranslateFiles
from cli_helpers import run_tool, start_tool
from shared_data import require_shared

pytestmark = pytest.mark.slow  # SIGKILL rounds of three commands, 8,000 pairs each

PAIRS = 8_000  # datagen commits every 1,000 examples; the first kill comes at the first commit
SHARDS = 100  # 80 examples each: more "done" lines than the stderr pipe holds (see _run_until)
# The kernel's smallest pipe (one page): a killed command can have written at most this much beyond what
# the test read, so it cannot finish all SHARDS shards between its first "done" line and the kill.
PIPE_BYTES = 4096
MAX_LENGTH = 24  # some of the examples are longer, so the reported count means something


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


def _run_until(flags: list[str], moment) -> tuple[int, list[str]]:
    """Runs datagen, SIGKILLs it at the first stderr line for which moment(line) holds; (returncode, lines read).

    The command is forked with TensorFlow imported (start_tool); a SIGKILL ends it as it ends a fresh one.
    """
    # A command blocks once the pipe is full, so however late the kill, it is at most a pipe ahead of the line.
    process = start_tool("datagen", *flags, stdout_too=False, pipe_bytes=PIPE_BYTES)
    lines = []
    for line in process.stream:
        lines.append(line)
        if moment(line):
            process.send_signal(signal.SIGKILL)
            break
    process.wait(timeout=300)
    return process.returncode, lines


def _train_shards(data_dir) -> list[str]:
    return sorted(p.name for p in data_dir.glob("train-*.tfrecord"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("restart")
    options = {**_files(tmp), "vocab_size": 600, "num_shards": SHARDS}
    flags = ["--problem=translate_files", f"--data_dir={tmp / 'killed'}", f"--max_length={MAX_LENGTH}",
             *(f"--{k}={v}" for k, v in options.items())]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        reference = pool.submit(TranslateFiles(str(tmp / "reference")).generate_data, None,
                                log=lambda line: None, **options)
        killed = tmp / "killed"
        # The first commit of the scatter pass. Past it the encoding prints fewer lines than the pipe holds, so
        # on a loaded machine the command can finish encoding before the kill lands: then start again.
        for _ in range(3):
            shutil.rmtree(killed, ignore_errors=True)
            first = _run_until(flags, _encoded)
            first_shards = _train_shards(killed)
            if not first_shards:
                break
        committed = sum(load_state(str(killed / f"train{SCATTER}")).bucket_counts)
        second = _run_until(flags, lambda line: "train-" in line and "done)" in line)
        second_shards = _train_shards(killed)
        second_config = json.loads((killed / CONFIG_FILE).read_text())
        third = run_tool("datagen", *flags)
        reference.result()
    return {"options": options, "killed": killed, "reference": tmp / "reference", "first": first,
            "first_shards": first_shards, "committed": committed, "second": second, "second_shards": second_shards,
            "second_config": second_config, "third": third}


def test_killed_while_encoding_resumes_from_its_last_commit(runs):
    returncode, _ = runs["first"]
    assert returncode == -signal.SIGKILL
    assert not runs["first_shards"], "datagen wrote shards before it could be killed"
    assert 0 < runs["committed"] < PAIRS
    # The rerun went on from the commit rather than starting over.
    _, lines = runs["second"]
    first = next(n for n in map(_encoded, lines) if n)
    assert first >= runs["committed"] + 1_000, "".join(lines)


def test_killed_after_a_shard_keeps_the_finished_shards(runs):
    returncode, lines = runs["second"]
    assert returncode == -signal.SIGKILL, "".join(lines)
    assert 1 <= len(runs["second_shards"]) < SHARDS, "datagen finished before it could be killed"
    # The train split's length histogram was saved when its encoding ended, before its first shard.
    lengths = runs["second_config"]["splits"]["train"][LENGTHS]
    assert sum(lengths.values()) == PAIRS


def test_killed_datagen_reruns_to_the_uninterrupted_output(runs):
    third = runs["third"]
    assert third.returncode == 0, third.stderr
    assert f"train: {PAIRS:,} examples in {SHARDS} shards" in third.stdout
    assert "dev: 200 examples in 1 shards" in third.stdout
    # Only the shards the second run had not finished were written.
    written = [line for line in third.stderr.splitlines() if "train-" in line and "done)" in line]
    assert len(written) == SHARDS - len(runs["second_shards"]), third.stderr
    killed, reference = runs["killed"], runs["reference"]
    # The count of long examples comes from the histograms, which the runs' config holds like the reference's.
    config = json.loads((killed / CONFIG_FILE).read_text())
    for split, examples in (("train", PAIRS), ("dev", 200)):
        lengths = config["splits"][split][LENGTHS]
        assert sum(lengths.values()) == examples
        assert f"{split}: {examples:,} examples in " in third.stdout
        longer = count_longer(lengths, MAX_LENGTH)
        assert 0 < longer < examples
        assert f"; {longer:,} longer than {MAX_LENGTH} tokens" in third.stdout
    assert sorted(os.listdir(killed)) == sorted(os.listdir(reference))
    for name in os.listdir(reference):
        assert (killed / name).read_bytes() == (reference / name).read_bytes(), name


def test_train_shards_in_file_order_are_kept_but_not_finished_in_shuffled_order(runs, tmp_path):
    options, data_dir = runs["options"], tmp_path / "data"
    shutil.copytree(runs["reference"], data_dir)
    # What an earlier t2t-lite left: the same config without "train_order" (its shards were in file order).
    config = json.loads((data_dir / "problem_config.json").read_text())
    assert config.pop("train_order") == "shuffled"
    (data_dir / "problem_config.json").write_text(json.dumps(config))
    stamps = {p.name: p.stat().st_mtime_ns for p in data_dir.iterdir()}
    TranslateFiles(str(data_dir)).generate_data(None, log=lambda line: None, **options)  # complete: kept
    assert {p.name: p.stat().st_mtime_ns for p in data_dir.iterdir()} == stamps

    shard = data_dir / f"train-00001-of-{SHARDS:05d}.tfrecord"
    shard.unlink()
    with pytest.raises(UserError, match="train shards in file order.*new `data_dir`"):
        TranslateFiles(str(data_dir)).generate_data(None, log=lambda line: None, **options)
    assert not shard.exists()
