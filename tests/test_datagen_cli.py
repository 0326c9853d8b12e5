"""t2t-lite-datagen as a user runs it: one-line errors, untouched data_dir, kill and rerun."""
import os
import signal
import subprocess
import sys

import pytest

from t2t_lite.problems.translate import TranslateFiles
from shared_data import require_shared

COMMAND = [sys.executable, "-m", "t2t_lite.bin.datagen"]
ERROR_PREFIX = "t2t-lite-datagen: error: "


def _multi30k(split: str) -> str:
    return f"{require_shared(f'multi30k/raw/{split}.en')},{require_shared(f'multi30k/raw/{split}.de')}"


def _bad_inputs(tmp) -> dict[str, tuple[list[str], list[str]]]:
    """Each case: (datagen flags, fragments its one error line must contain)."""
    (tmp / "five.en").write_text("a\nb\nc\nd\ne\n")
    (tmp / "four.de").write_text("a\nb\nc\nd\n")
    (tmp / "latin1.de").write_bytes("a\nb\nc\nd\nStra\u00dfe\n".encode("latin-1"))
    (tmp / "a_directory").mkdir()
    dev = f"--dev_files={tmp / 'five.en'},{tmp / 'five.en'}"
    files = "--problem=translate_files", dev
    return {
        "missing file": ([*files, f"--train_files={tmp / 'five.en'},{tmp / 'nope.de'}"],
                         ["cannot read", "nope.de", "No such file"]),
        "unreadable file": ([*files, f"--train_files={tmp / 'five.en'},{tmp / 'a_directory'}"],
                            ["cannot read", "a_directory", "Is a directory"]),
        "invalid utf-8": ([*files, f"--train_files={tmp / 'five.en'},{tmp / 'latin1.de'}"],
                          [f"{tmp / 'latin1.de'}:5: invalid UTF-8"]),
        "line counts": ([*files, f"--train_files={tmp / 'five.en'},{tmp / 'four.de'}"],
                        [f"{tmp / 'five.en'} has 5 lines", f"{tmp / 'four.de'} has 4"]),
        "unknown problem": (["--problem=translate_file"], ["unknown problem 'translate_file'", "translate_files"]),
        "vocab too large": ([*files, f"--train_files={tmp / 'five.en'},{tmp / 'five.en'}", "--vocab_size=5000"],
                            ["cannot train a bpe vocabulary of 5000"]),
    }


@pytest.fixture(scope="module")
def bad_runs(tmp_path_factory):
    """Runs every bad-input case at once (each pays TensorFlow's start-up) and collects the results."""
    tmp = tmp_path_factory.mktemp("bad")
    cases = _bad_inputs(tmp)
    running = {}
    for name, (flags, _) in cases.items():
        data_dir = tmp / name.replace(" ", "_")
        data_dir.mkdir()
        (data_dir / "notes.txt").write_text("the user's own file\n")
        running[name] = (subprocess.Popen([*COMMAND, f"--data_dir={data_dir}", *flags], stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True), data_dir)
    results = {}
    for name, (process, data_dir) in running.items():
        _, stderr = process.communicate(timeout=300)
        results[name] = (process.returncode, stderr, sorted(os.listdir(data_dir)), cases[name][1])
    return results


@pytest.mark.parametrize("case", ["missing file", "unreadable file", "invalid utf-8", "line counts",
                                  "unknown problem", "vocab too large"])
def test_bad_input_is_one_line_and_leaves_data_dir_alone(bad_runs, case):
    returncode, stderr, listing, fragments = bad_runs[case]
    assert returncode != 0
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith(ERROR_PREFIX)]
    assert len(errors) == 1, stderr
    for fragment in fragments:
        assert fragment in errors[0]
    assert listing == ["notes.txt"]


def test_algorithmic_problem_needs_no_datagen(tmp_path):
    result = subprocess.run([*COMMAND, "--problem=algorithmic_reverse", f"--data_dir={tmp_path / 'd'}"],
                            check=False, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0
    assert "generates its examples in memory" in result.stdout
    assert not os.path.exists(tmp_path / "d")


def test_killed_datagen_reruns_to_the_uninterrupted_output(tmp_path):
    options = {"train_files": _multi30k("train"), "dev_files": _multi30k("val"), "vocab_size": 1000,
               "num_shards": 40}
    flags = ["--problem=translate_files", *(f"--{name}={value}" for name, value in options.items())]
    killed = str(tmp_path / "killed")
    process = subprocess.Popen([*COMMAND, f"--data_dir={killed}", *flags], stderr=subprocess.PIPE, text=True)
    for line in process.stderr:
        if "train-" in line and "done)" in line:  # the first shard is finished: kill mid-split
            process.send_signal(signal.SIGKILL)
            break
    process.wait(timeout=300)
    assert process.returncode == -signal.SIGKILL
    finished = [f for f in os.listdir(killed) if f.startswith("train-") and f.endswith(".tfrecord")]
    assert 1 <= len(finished) < 40, "datagen finished before it could be killed"

    rerun = subprocess.run([*COMMAND, f"--data_dir={killed}", *flags], check=False, capture_output=True,
                           text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "train: 29,000 examples in 40 shards" in rerun.stdout
    assert "dev: 1,014 examples in 1 shards" in rerun.stdout

    reference = str(tmp_path / "reference")
    TranslateFiles(reference).generate_data(None, log=lambda line: None, **options)
    assert sorted(os.listdir(killed)) == sorted(os.listdir(reference))
    for name in os.listdir(reference):
        with open(os.path.join(killed, name), "rb") as a, open(os.path.join(reference, name), "rb") as b:
            assert a.read() == b.read(), name
