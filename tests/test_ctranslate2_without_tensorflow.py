"""A CTranslate2 export decodes without TensorFlow: the smallest deployment docs/serving.md shows.

t2t-lite is pip-installed with --no-deps (as a deployment would install it beside
`pip install ctranslate2 sentencepiece`) into a directory of its own, and a fresh
interpreter imports it from there with an import finder that refuses every
module that deployment would not have: anything outside the standard library,
t2t_lite, and the distributions ctranslate2 and sentencepiece install (so
tensorflow, tensorflow_text and keras raise ImportError). There
`Translator.from_export` must give the lines the run's decoder gives.
"""
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from t2t_lite.decoding.batching import decode_lines
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.export.exporter import ExportRequest, export_run
from t2t_lite.decoding.request import DecodeRequest
from t2t_lite.run import RunRequest, open_run
from trained_runs import multi30k_lines

pytest.importorskip("ctranslate2")

REPO = Path(__file__).resolve().parent.parent
DEPLOYED = ("ctranslate2", "sentencepiece")  # what docs/serving.md says to pip install
BLOCKED = ("tensorflow", "tensorflow_text", "keras")
EXTRA_LENGTH = 10
DEV_SENTENCES = 30

# Run in the fresh interpreter: argv = [allowed modules (JSON), export path, sentences (JSON)].
DEPLOYMENT = r'''
import importlib.abc, json, sys

ALLOWED = set(json.loads(sys.argv[1]))


class Deployment(importlib.abc.MetaPathFinder):
    """Refuses what `pip install ctranslate2 sentencepiece` and t2t-lite --no-deps do not install."""

    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] not in ALLOWED:
            raise ImportError(f"{name} is not in the deployment (ctranslate2, sentencepiece, t2t-lite --no-deps)")
        return None


sys.meta_path.insert(0, Deployment())
for module in ("tensorflow", "tensorflow_text", "keras"):
    try:
        __import__(module)
    except ImportError:
        continue
    raise SystemExit(f"{module} imported: the deployment's finder does not work")

from t2t_lite import Translator

translator = Translator.from_export(sys.argv[2])
print(json.dumps({"t2t_lite": sys.modules["t2t_lite"].__file__,
                  "lines": translator.translate(json.loads(sys.argv[3]))}))
'''


def distribution_modules(names) -> set[str]:
    """The top-level modules of the distributions `names` and of everything they require, recursively."""
    by_distribution: dict[str, set[str]] = {}
    for module, distributions in importlib.metadata.packages_distributions().items():
        for distribution in distributions:
            by_distribution.setdefault(canonical(distribution), set()).add(module)
    modules, todo, seen = set(), [canonical(name) for name in names], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        modules |= by_distribution.get(name, set())
        for requirement in importlib.metadata.requires(name) or []:
            if "extra ==" not in requirement:  # an extra is not installed by a plain pip install
                todo.append(canonical(re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0]))
    return modules


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def deployment(multi30k_run, tmp_path_factory):
    """t2t-lite installed with --no-deps, the run's CTranslate2 export, its dev sentences and the decoder's lines."""
    tmp = tmp_path_factory.mktemp("deployment")
    # pip builds in the source tree it is given: a copy keeps the checkout clean.
    source = tmp / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", "tests", "benchmarks", "docs", "build", "*.egg-info", "__pycache__", ".*cache"))
    installed = tmp / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                          "--quiet", "--target", str(installed), str(source)], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr[-3000:]
    request = RunRequest(output_dir=multi30k_run["output_dir"], data_dir=multi30k_run["data_dir"],
                         decode=DecodeRequest(extra_length=EXTRA_LENGTH, mixed_precision="none"))  # float32, as the export
    path = export_run(ExportRequest(str(tmp / "exports"), request, "m", export_format="ctranslate2"))
    with open(multi30k_run["raw"] / "val.en", encoding="utf-8") as f:
        sentences = f.read().splitlines()[:DEV_SENTENCES] + [""]
    run = open_run(request)
    decoded = decode_lines(run.problem, Decoder(run.models, run.decode_hparams).decode, sentences,
                           run.decode_hparams.batch_size)
    return {"site": installed, "export": path, "sentences": sentences, "expected": [h[0].text for h in decoded]}


def test_a_ctranslate2_export_decodes_without_tensorflow_as_the_decoder(deployment):
    allowed = set(sys.stdlib_module_names) | {"t2t_lite"} | distribution_modules(DEPLOYED)
    assert not allowed & set(BLOCKED), "ctranslate2 or sentencepiece now requires TensorFlow"
    # -s: no user site; PYTHONPATH puts the installed t2t-lite first; cwd is not the checkout.
    result = subprocess.run(
        [sys.executable, "-s", "-c", DEPLOYMENT, json.dumps(sorted(allowed)), deployment["export"],
         json.dumps(deployment["sentences"])], capture_output=True, text=True, cwd=deployment["site"],
        env={"PYTHONPATH": str(deployment["site"]), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert result.returncode == 0, f"decoding the export needed what the deployment lacks:\n{result.stderr[-3000:]}"
    found = json.loads(result.stdout.splitlines()[-1])
    assert found["t2t_lite"].startswith(str(deployment["site"])), found["t2t_lite"]  # the --no-deps install
    assert found["lines"] == deployment["expected"]
    assert len(set(found["lines"])) > 1 and found["lines"][-1] == ""


# Run in a fresh interpreter: t2t-lite-decoder's entry point, with TensorFlow, tensorflow-text and Keras refused.
COMMAND = r'''
import importlib.abc, sys

BLOCKED = {"tensorflow", "tensorflow_text", "keras"}


class NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ImportError(f"{name} is refused: a CTranslate2 export decodes without it")
        return None


sys.meta_path.insert(0, NoTensorFlow())
sys.argv = ["t2t-lite-decoder", *sys.argv[1:]]
from t2t_lite.bin.decoder import run

run()
'''


def test_the_decoder_command_decodes_and_scores_a_ctranslate2_export_without_tensorflow(deployment, tmp_path):
    from t2t_lite.metrics.bleu import text_report

    sentences = deployment["sentences"]
    (tmp_path / "in.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    references = [line.strip() for line in multi30k_lines("val", "de", DEV_SENTENCES).splitlines()] + [""]
    (tmp_path / "ref.txt").write_text("\n".join(references) + "\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-c", COMMAND, f"--export_dir={deployment['export']}", f"--decode_from_file={tmp_path / 'in.txt'}",
         f"--decode_reference={tmp_path / 'ref.txt'}"], capture_output=True, text=True, timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[:len(sentences)] == deployment["expected"]
    assert lines[len(sentences):] == text_report(deployment["expected"], references)
