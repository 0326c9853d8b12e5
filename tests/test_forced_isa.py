"""The tests whose results depend on the CPU's instructions, run again as on a CPU with AVX2 only.

Most CPUs people train and decode on have no AVX-512 (laptops, AMD before
Zen 4, many cloud VMs): there int8 products saturate, bfloat16 runs in
TensorFlow's Eigen kernels, and oneDNN picks other float32 kernels. The
README's `pytest` checks both on any CPU: the tests marked `isa` (or
`isa_bfloat16`) run natively with the rest, then here once more in a fresh
interpreter (oneDNN reads its cap when it loads) with FORCED_AVX2 set.

ONEDNN_MAX_CPU_ISA caps TensorFlow's oneDNN kernels, and CTranslate2's on AMD,
and turns `mixed_precision=auto` to float32 (t2t_lite/precision.py); on Intel
CPUs CTranslate2 multiplies int8 in MKL, which CT2_USE_MKL=0 turns off;
CT2_FORCE_CPU_ISA caps CTranslate2's own kernels. TensorFlow still sends
bfloat16 matmuls to the capped oneDNN on a CPU with AVX-512 (and crashes), so
the bfloat16 tests run with TF_ENABLE_ONEDNN_OPTS=0 as well: their matmuls
then run in Eigen, as TensorFlow runs bfloat16 on a CPU without AVX-512.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from t2t_lite import precision
from trained_runs import SHARED_RUNS_VARIABLE, shared_runs_root

FORCED_AVX2 = {"ONEDNN_MAX_CPU_ISA": "AVX2", "CT2_USE_MKL": "0", "CT2_FORCE_CPU_ISA": "AVX2",
               "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
TESTS = Path(__file__).resolve().parent


@pytest.mark.slow  # fresh interpreters, each importing TensorFlow
@pytest.mark.parametrize("marker, extra", [("isa", {"TF_ENABLE_ONEDNN_OPTS": "1"}),
                                           ("isa_bfloat16", {"TF_ENABLE_ONEDNN_OPTS": "0"})])
def test_the_isa_tests_pass_with_avx2_forced(reverse_run, multi30k_run, words_parser, tmp_path_factory, tmp_path,
                                             marker, extra):
    if "avx512f" not in precision.cpu_flags():
        pytest.skip("this CPU has no AVX-512: the isa tests already ran here as on an AVX2 CPU")
    forced = {**FORCED_AVX2, **extra}
    # The session's shared runs (trained natively) are read, not trained again: every one a marked test reads
    # is requested above (made_once makes no run in a session another started, so one left out fails there).
    env = {**os.environ, **forced, SHARED_RUNS_VARIABLE: str(shared_runs_root(tmp_path_factory))}
    env = {k: v for k, v in env.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT_TEST"))}
    # Only the modules that hold such tests (marked themselves, or run in both PRECISIONS, which carry the
    # marks): collecting every module would import them all again.
    modules = sorted(str(p) for p in TESTS.glob("test_*.py")
                     if re.search(rf"mark\.{marker}\b|\bPRECISIONS\b", p.read_text(encoding="utf-8")))
    done = subprocess.run([sys.executable, "-m", "pytest", "-m", marker, "-n", "0", "-q", "-p", "no:cacheprovider",
                           f"--basetemp={tmp_path / 'forced'}", "-W", "ignore", *modules],
                          cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=900)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, f"with {forced}:\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}"
    assert " passed" in summary and "skipped" not in summary, summary
