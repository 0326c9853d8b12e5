"""Locates the shared data that tests read in place (never copied into the repo)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

# ../shared/data beside the checkout, unless T2T_LITE_SHARED_DATA points elsewhere.
SHARED_DATA = Path(
    os.environ.get("T2T_LITE_SHARED_DATA")
    or Path(__file__).resolve().parents[1].parent / "shared" / "data"
)


def require_shared(relpath: str) -> Path:
    """Returns a path under the shared data directory, or skips the test(s).

    Args:
      relpath: path relative to SHARED_DATA, e.g. "ptb_wsj_sample/mrg".
    Returns:
      The existing path. Skips (the module too, if called at import time) when
      it does not exist.
    """
    path = SHARED_DATA / relpath
    if not path.exists():
        pytest.skip(
            f"shared data {path} not found; set T2T_LITE_SHARED_DATA or place "
            "../shared beside the checkout",
            allow_module_level=True,
        )
    return path
