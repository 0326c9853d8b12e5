"""t2t-lite runs on Keras's TensorFlow backend: another one is refused in one line at import, and the package's
version is the one installed (docs/keras_backend.md, setup.py)."""
import importlib.metadata
import os
import subprocess
import sys

import t2t_lite


MESSAGE = ("ImportError: t2t-lite runs on Keras's TensorFlow backend, not 'jax' (KERAS_BACKEND={}): unset "
           "KERAS_BACKEND or set it to tensorflow, and import t2t_lite before keras")


def refusal(code: str, keras_backend: str) -> str:
    """The last line a fresh interpreter running `code` with KERAS_BACKEND set prints, after a non-zero exit."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=300,
                            env={**os.environ, "KERAS_BACKEND": keras_backend})
    assert result.returncode != 0
    return result.stderr.strip().splitlines()[-1]


def test_keras_backend_set_to_another_is_refused_in_one_line_naming_it():
    assert refusal("import t2t_lite", "jax") == MESSAGE.format("'jax'")


def test_a_keras_started_on_another_backend_is_refused_in_one_line_naming_it():
    # As an earlier `import keras` under KERAS_BACKEND=jax would leave it (JAX itself is not installed here, so
    # the backend is what Keras reports).
    code = "import keras\nkeras.backend.backend = lambda: 'jax'\nimport t2t_lite\n"
    assert refusal(code, "tensorflow") == MESSAGE.format("'tensorflow'")


def test_the_packages_version_is_the_installed_distributions():
    assert t2t_lite.__version__ == importlib.metadata.version("t2t-lite")
