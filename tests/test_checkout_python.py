"""Python in the checkout after a plain (non-editable) `pip install .`: the checkout's t2t_lite/ is the one
imported, and problems/, hparams/ and bin/ beside it still resolve as t2t_lite.problems, .hparams and .bin."""
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from t2t_lite import Translator

CHECKOUT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # pip builds the package, and a fresh interpreter imports TensorFlow
def test_python_started_in_the_checkout_opens_a_run_and_decodes_after_a_plain_install(reverse_run, tmp_path):
    installed, source = tmp_path / "site", tmp_path / "source"
    # A copy to build from (pip builds in the source tree); the package alone, its dependencies being this
    # interpreter's, laid out as `pip install .` lays it out.
    source.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(CHECKOUT / name, source)
    for name in ("t2t_lite", "problems", "hparams", "bin"):
        shutil.copytree(CHECKOUT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                            f"--target={installed}", str(source)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    assert (installed / "t2t_lite" / "problems" / "__init__.py").is_file()  # mapped under the package
    sentences = ["1234", "567"]  # algorithmic_reverse reads digit strings
    code = ("import sys; from t2t_lite import Translator; import t2t_lite\n"
            f"assert t2t_lite.__file__.startswith({str(CHECKOUT)!r}), t2t_lite.__file__\n"
            f"print(Translator.from_run({reverse_run!r}, mixed_precision='none').translate({sentences!r}))\n")
    # -S: no .pth files, so the editable install the test session may run from (its import finder) is not
    # there; only the plain install and this interpreter's dependencies are on the path.
    path = ":".join([str(installed), *site.getsitepackages()])
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=CHECKOUT, capture_output=True, text=True,
                          env={"PYTHONPATH": path, "TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"},
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == repr(Translator.from_run(reverse_run, mixed_precision="none").translate(sentences))
