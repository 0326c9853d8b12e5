"""File writing that never leaves a half-written file under its final name."""
import os
import tempfile


def atomic_write_text(path: str, text: str) -> None:
    """Writes `text` to a temporary file beside `path`, flushes it to disk, then renames it over `path`."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp_path = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        os.unlink(tmp_path)
        raise
