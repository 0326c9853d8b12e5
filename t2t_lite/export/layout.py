"""TF Serving's model directory layout, <export_dir>/<model_name>/<version>/, published atomically.

TF Serving watches <export_dir>/<model_name>/ and serves the highest version,
a directory named by an integer. A new version is written under a temporary
name that is not an integer (which TF Serving ignores) and renamed into place
only once complete, so the server never loads a half-written export.
"""
import os
import re
import shutil
import tempfile
from collections.abc import Callable

from t2t_lite.errors import UserError

# A model name is one directory name, and also appears in TF Serving's URLs.
_MODEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
STAGING_PREFIX = ".tmp-export-"


def check_model_name(model_name: str) -> None:
    """Raises UserError unless model_name is usable as a directory and in TF Serving's REST paths."""
    if not _MODEL_NAME.fullmatch(model_name):
        raise UserError(f"`model_name` must be letters, digits, '_', '.' or '-' (not starting with '.' "
                        f"or '-'), got {model_name!r}")


def versions(model_dir: str) -> list[int]:
    """The version numbers taken in model_dir (every integer name), ascending; [] for none or no model_dir."""
    return (sorted(int(name) for name in os.listdir(model_dir) if name.isascii() and name.isdigit())
            if os.path.isdir(model_dir) else [])


def make_model_dir(export_dir: str, model_name: str) -> str:
    """Creates <export_dir>/<model_name> if needed and checks it is writable; returns its path."""
    model_dir = os.path.join(export_dir, model_name)
    try:
        os.makedirs(model_dir, exist_ok=True)
        tempfile.TemporaryDirectory(dir=model_dir, prefix=STAGING_PREFIX).cleanup()
    except OSError as error:
        raise UserError(f"cannot write to `export_dir` {export_dir!r}: {error.strerror or error}") from None
    return model_dir


def publish(model_dir: str, write: Callable[[str], None]) -> str:
    """Writes a new version with write(staging_dir), then renames it to the next free version.

    Args:
      model_dir: <export_dir>/<model_name>, existing and writable.
      write: fills the (empty, existing) staging directory it is given.
    Returns:
      The published version's path, <model_dir>/<max existing version + 1>.
    Raises:
      Whatever `write` raises; the staging directory is removed first, so a
      failed or interrupted export leaves nothing behind.
    """
    staging = tempfile.mkdtemp(dir=model_dir, prefix=STAGING_PREFIX)
    try:
        write(staging)
        return _rename_to_next_version(model_dir, staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _rename_to_next_version(model_dir: str, staging: str) -> str:
    """Renames staging to the next version; retries if a concurrent export takes that number first."""
    while True:
        target = os.path.join(model_dir, str((versions(model_dir) or [0])[-1] + 1))
        try:
            # Fails on a directory that appeared meanwhile (never empty: it was published the same way).
            os.rename(staging, target)
            return target
        except OSError:
            if not os.path.exists(target):
                raise
