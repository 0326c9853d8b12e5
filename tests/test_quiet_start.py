"""A command prints its own lines, not TensorFlow's C++ start-up chatter; T2T_LITE_DEBUG=1 brings it back."""
import os
import re
import subprocess
import sys

import pytest

# TensorFlow's C++ logging, as it reaches a user's terminal.
CHATTER = re.compile(r"^[IWEF]\d{4} |tensorflow/core|cuInit|oneDNN|absl::InitializeLog", re.MULTILINE)
# Lines TensorFlow 2.21 wrote at start-up on a CPU-only x86 machine.
REAL_CHATTER = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795632841.177591   16193 port.cc:153] oneDNN custom operations are on. You may see slightly "
    "different numerical results due to floating-point round-off errors from different computation orders. To turn "
    "them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.",
    "I0000 00:00:1795632841.178077   16193 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will "
    "not be used.",
    "E0000 00:00:1795632844.185302   16193 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed "
    "call to cuInit: UNKNOWN ERROR (303)",
    "W0000 00:00:1795632844.185302   16193 some_file.cc:7] a warning",
]
KEPT = [
    "t2t-lite-trainer: error: --output_dir is required",
    # Python's absl logging has a real date: a warning of the program's own, not C++ start-up.
    "W1125 18:51:07.503930 140412757604032 connectionpool.py:869] Retrying (Retry(total=0)) after connection broken",
    "/x/site-packages/keras/src/foo.py:12: UserWarning: something the user should see",
    "F0000 00:00:1795632844.185302   16193 check.cc:1] Check failed: a fatal error is never hidden",
]


def _environment(**extra):
    """The user's environment as a terminal has it: without the test session's TF_CPP_MIN_LOG_LEVEL=3."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "T2T_LITE_DEBUG")}
    return {**env, **extra}


def _python(code: str, **env) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=_environment(**env), check=True)
    return done.stdout + done.stderr


@pytest.mark.slow  # a fresh interpreter's whole start-up
def test_dry_run_prints_no_tensorflow_logging():
    done = subprocess.run([sys.executable, "-m", "t2t_lite.bin.trainer", "--dry_run", "--hparams_set=transformer_base",
                           "--vocab_size=37000"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300, env=_environment(), check=False)
    assert done.returncode == 0, done.stdout[-2000:]
    assert CHATTER.findall(done.stdout) == []
    assert done.stdout.splitlines() == ["parameters: 63082496"]


@pytest.mark.parametrize("env, level, quiet", [
    ({}, "3", True),                                     # default: quiet
    ({"T2T_LITE_DEBUG": "1"}, None, False),               # debugging: TensorFlow as it is
    ({"TF_CPP_MIN_LOG_LEVEL": "0"}, "0", False),           # the user's own level is kept, nothing filtered
])
def test_quiet_unless_debugging_or_the_user_chose_a_level(env, level, quiet):
    out = _python("import os, sys\n"
                  "import t2t_lite.bin\n"
                  "from t2t_lite.bin.quiet_start import _QuietTensorFlowImport\n"
                  "print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'), "
                  "any(isinstance(f, _QuietTensorFlowImport) for f in sys.meta_path))", **env)
    assert out.split() == [str(level), str(quiet)]


def test_is_chatter_takes_tensorflow_start_up_lines_only():
    from t2t_lite.bin.quiet_start import is_chatter

    assert all(is_chatter(line.encode() + b"\n") for line in REAL_CHATTER)
    assert not any(is_chatter(line.encode() + b"\n") for line in KEPT)


def test_the_filter_drops_chatter_and_keeps_everything_else_in_order():
    lines = [line for pair in zip(REAL_CHATTER, KEPT) for line in pair]
    written = "".join(line + "\n" for line in lines).encode()
    out = _python("import os, sys\n"
                  "from t2t_lite.bin import quiet_start\n"
                  "print('before', file=sys.stderr, flush=True)\n"
                  "with quiet_start._stderr_without_chatter():\n"
                  f"    os.write(2, {written!r})\n"
                  "    print('python stderr inside', file=sys.stderr)\n"
                  "print('after', file=sys.stderr)\n")
    assert out.splitlines() == ["before", *KEPT, "python stderr inside", "after"]


@pytest.mark.slow  # a fresh interpreter imports TensorFlow
def test_tensorflow_imported_through_the_filter_is_tensorflow():
    out = _python("import t2t_lite.bin, sys\n"
                  "import tensorflow as tf\n"
                  "print(type(tf.__loader__).__name__, type(tf.__spec__.loader).__name__, "
                  "int(tf.reduce_sum(tf.constant([1, 2]))))\n"
                  "import keras, tensorflow_text\n"
                  "print('imported')")
    assert CHATTER.findall(out) == []
    assert out.splitlines() == ["SourceFileLoader SourceFileLoader 3", "imported"]
