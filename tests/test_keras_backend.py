"""t2t-lite runs on Keras's TensorFlow backend: another one is refused in one line at import, and the package's
version is the one installed (docs/keras_backend.md, setup.py)."""
import importlib.metadata
import os
import subprocess
import sys

import t2t_lite


def test_a_keras_on_another_backend_is_refused_in_one_line_naming_it():
    # Keras started on JAX, as KERAS_BACKEND=jax or an earlier import would start it (JAX itself is not
    # installed here, so the backend is what Keras reports).
    code = "import keras\nkeras.backend.backend = lambda: 'jax'\nimport t2t_lite\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=300,
                            env={**os.environ, "KERAS_BACKEND": "tensorflow"})
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == (
        "ImportError: t2t-lite runs on Keras's TensorFlow backend, but Keras was started with 'jax' "
        "(KERAS_BACKEND='tensorflow'): unset KERAS_BACKEND or set it to tensorflow, and import t2t_lite before keras")


def test_the_packages_version_is_the_installed_distributions():
    assert t2t_lite.__version__ == importlib.metadata.version("t2t-lite")
