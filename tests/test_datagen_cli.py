"""t2t-lite-datagen as a user runs it: one-line errors, an untouched data_dir, nothing to do for algorithmic problems.

Each command costs a process of its own (cli_helpers.py), so only what is about the process runs as one:
one bad input end to end (exit code, the single stderr line, no traceback) and the algorithmic problem's
message. The other bad inputs go through what datagen's main calls (the registry, then the problem's
generate_data) in this process: raising one UserError with a one-line message is what makes run_main print
one line and exit 2. Killing datagen and rerunning it is tests/test_datagen_restart.py.
"""
import os

import pytest

import t2t_lite.problems  # noqa: F401  (registers the problems)
from t2t_lite.errors import UserError
from t2t_lite.registry import problems
from cli_helpers import run_tools

# The bad input checked through a real t2t-lite-datagen process; the others are checked in-process.
THROUGH_THE_COMMAND = "missing file"


def _bad_inputs(tmp) -> dict[str, tuple[list[str], list[str]]]:
    """Each case: (datagen flags, fragments its one error line must contain)."""
    (tmp / "five.en").write_text("a\nb\nc\nd\ne\n")
    (tmp / "four.de").write_text("a\nb\nc\nd\n")
    (tmp / "five.de").write_text("v\nw\nx\ny\nz\n")  # not copies of five.en, which cleaning would drop
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
                          [f"{tmp / 'latin1.de'}: line 5 is not valid UTF-8"]),
        "line counts": ([*files, f"--train_files={tmp / 'five.en'},{tmp / 'four.de'}"],
                        [f"{tmp / 'five.en'} has 5 lines", f"{tmp / 'four.de'} has 4"]),
        "unknown problem": (["--problem=translate_file"], ["unknown problem 'translate_file'", "translate_files"]),
        "vocab too large": ([*files, f"--train_files={tmp / 'five.en'},{tmp / 'five.de'}", "--vocab_size=5000"],
                            ["cannot train a bpe vocabulary of 5000"]),
    }


def _datagen_in_process(data_dir, flags: list[str]) -> str | None:
    """What datagen's main does with `flags` (registry lookup, then generate_data); the UserError's message."""
    options = dict(flag.removeprefix("--").split("=", 1) for flag in flags)
    problem = options.pop("problem")
    if "vocab_size" in options:
        options["vocab_size"] = int(options["vocab_size"])
    try:
        problems.get(problem)(str(data_dir)).generate_data(None, log=lambda line: None, **options)
    except UserError as error:
        return str(error)
    return None


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Runs the two commands at once, then the other bad inputs in-process; collects every outcome."""
    tmp = tmp_path_factory.mktemp("bad")
    cases = _bad_inputs(tmp)
    data_dirs = {}
    for name in cases:
        data_dirs[name] = tmp / name.replace(" ", "_")
        data_dirs[name].mkdir()
        (data_dirs[name] / "notes.txt").write_text("the user's own file\n")
    commands = {
        THROUGH_THE_COMMAND: ("datagen", [f"--data_dir={data_dirs[THROUGH_THE_COMMAND]}",
                                          *cases[THROUGH_THE_COMMAND][0]]),
        "algorithmic": ("datagen", ["--problem=algorithmic_reverse", f"--data_dir={tmp / 'algorithmic'}"]),
    }
    results = run_tools(commands)
    bad = {}
    for name, (flags, fragments) in cases.items():
        if name == THROUGH_THE_COMMAND:
            result = results[name]
            messages = [line.split(": error: ", 1)[1] for line in result.error_lines]
            process = (result.returncode, result.stderr)
        else:
            message = _datagen_in_process(data_dirs[name], flags)
            messages, process = [message] if message is not None else [], None
        bad[name] = (messages, process, sorted(os.listdir(data_dirs[name])), fragments)
    return {"bad": bad, "algorithmic": (results["algorithmic"], tmp / "algorithmic")}


@pytest.mark.parametrize("case", ["missing file", "unreadable file", "invalid utf-8", "line counts",
                                  "unknown problem", "vocab too large"])
def test_bad_input_is_one_line_and_leaves_data_dir_alone(runs, case):
    messages, process, listing, fragments = runs["bad"][case]
    if process is not None:
        returncode, stderr = process
        assert returncode == 2, stderr[-3000:]
        assert "Traceback" not in stderr
    assert len(messages) == 1, f"expected one error, got {messages} {process}"
    message = messages[0]
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message
    assert listing == ["notes.txt"]


def test_algorithmic_problem_needs_no_datagen(runs):
    result, data_dir = runs["algorithmic"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert "generates its examples in memory" in result.stdout
    assert not os.path.exists(data_dir)
