"""Importing t2t_lite picks TensorFlow's faster CPU settings, unless the user chose otherwise."""
import os
import platform
import subprocess
import sys

import pytest

SHOW = "import os, t2t_lite; print(os.environ.get('TF_CPU_ALLOCATOR_USE_BFC'), os.environ.get('TF_ENABLE_ONEDNN_OPTS'))"


def imported_settings(**env) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("TF_CPU_ALLOCATOR_USE_BFC", "TF_ENABLE_ONEDNN_OPTS")}
    output = subprocess.run([sys.executable, "-c", SHOW], env={**clean, **env}, capture_output=True, text=True,
                            check=True)
    return output.stdout.split()


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="oneDNN is turned on on x86 only")
def test_bfc_allocator_and_onednn_are_on_by_default():
    assert imported_settings() == ["true", "1"]


def test_the_users_own_settings_are_kept():
    assert imported_settings(TF_CPU_ALLOCATOR_USE_BFC="false", TF_ENABLE_ONEDNN_OPTS="0") == ["false", "0"]
