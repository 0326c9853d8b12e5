"""The commands in a home they cannot write (issue 87 item 6): they run, write nothing there, and say once, in one
line naming the variable to set, what went elsewhere or was not kept (t2t_lite/environment.py).

Each command runs in a fresh interpreter, not forked from tests/cli_helpers.py's server: that one has imported
Keras and matplotlib already, with the test's own home, and their writes happen at import.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import snapshot

ROOT = Path(__file__).resolve().parent.parent
# Variables that would move a write out of $HOME and so hide what a read-only home does.
MOVERS = ("KERAS_HOME", "MPLCONFIGDIR", "TFDS_DATA_DIR", "T2T_LITE_CACHE_DIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME",
          "T2T_LITE_KERNEL_LAYOUT")
WARNING = "t2t-lite: warning: "


@pytest.fixture(params=["under_a_file", "chmod_0500"])
def home(request, tmp_path):
    """An unwritable $HOME: a path under a regular file (every mkdir fails, for root too), or a directory with mode
    0o500 (not for root, whom the mode does not stop). Checks afterwards that nothing under tmp_path changed."""
    if request.param == "under_a_file":
        (tmp_path / "file").write_text("not a directory\n")
        path = tmp_path / "file" / "home"
    else:
        if os.geteuid() == 0:
            pytest.skip("running as root, which writes into a 0o500 directory anyway (under_a_file covers root)")
        path = tmp_path / "home"
        path.mkdir()
        path.chmod(0o500)
    before = snapshot(tmp_path)
    yield path
    assert snapshot(tmp_path) == before, "something was written under the read-only home"
    if request.param == "chmod_0500":
        path.chmod(0o700)


def run_python(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {name: value for name, value in os.environ.items() if name not in MOVERS}
    env.update(HOME=str(home), TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def warnings_naming(result: subprocess.CompletedProcess, *variables: str) -> dict[str, str]:
    """variable -> the one warning line naming it; fails unless each of `variables` has exactly one line."""
    lines = [line for line in result.stderr.splitlines() if line.startswith(WARNING)]
    named = {variable: [line for line in lines if variable in line] for variable in variables}
    for variable, its_lines in named.items():
        assert len(its_lines) == 1, f"{variable}: expected one warning line, got {its_lines}\n{result.stderr[-3000:]}"
    return {variable: its_lines[0] for variable, its_lines in named.items()}



def test_a_command_runs_and_names_keras_home_and_mplconfigdir(home):
    result = run_python(home, "-m", "t2t_lite.bin.trainer", "--registry_help")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "algorithmic_reverse" in result.stdout
    lines = warnings_naming(result, "KERAS_HOME", "MPLCONFIGDIR")
    assert "Matplotlib created a temporary" not in result.stderr  # matplotlib's own complaint
    assert [line for line in result.stderr.splitlines() if line.startswith(WARNING)] == list(lines.values())
    assert str(home / ".keras") in lines["KERAS_HOME"]
    assert str(home / ".config" / "matplotlib") in lines["MPLCONFIGDIR"]


def test_a_decoder_runs_and_says_once_that_the_kernel_layout_is_not_kept(home, reverse_run, tmp_path_factory):
    work = tmp_path_factory.mktemp("decode")
    (work / "in.txt").write_text("123\n45\n", encoding="utf-8")
    result = run_python(home, "-m", "t2t_lite.bin.decoder", f"--output_dir={reverse_run}", "--beam_size=2",
                        f"--decode_from_file={work / 'in.txt'}", f"--decode_to_file={work / 'out.txt'}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert len((work / "out.txt").read_text(encoding="utf-8").splitlines()) == 2
    line = warnings_naming(result, "T2T_LITE_CACHE_DIR")["T2T_LITE_CACHE_DIR"]
    assert "T2T_LITE_KERNEL_LAYOUT" in line and "bfloat16" in line and str(home / ".cache" / "t2t_lite") in line


def test_tensorflow_datasets_downloads_go_elsewhere_and_tfds_data_dir_is_named(home):
    script = ("from t2t_lite import environment; environment.redirect_home_writes(); "
              "from tensorflow_datasets.core import constants; print(constants.DATA_DIR)")
    result = run_python(home, "-c", script)
    assert result.returncode == 0, result.stderr[-3000:]
    data_dir = result.stdout.strip().splitlines()[-1]
    assert not data_dir.startswith(str(home)) and os.path.isdir(os.path.dirname(data_dir))
    lines = [line for line in result.stderr.splitlines() if line.startswith(WARNING)]
    tfds = [line for line in lines if "TFDS_DATA_DIR" in line]
    assert len(tfds) == 1 and "`tmp_dir`" in tfds[0] and data_dir in tfds[0], result.stderr[-3000:]
