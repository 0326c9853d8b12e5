"""Reading user text strictly, and writing files that are never half-written under their final name."""
import os
import tempfile

from t2t_lite.errors import UserError


def atomic_write_text(path: str, text: str) -> None:
    """Writes `text` to a temporary file beside `path`, flushes it to disk, then renames it over `path`."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp_path = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        # mkstemp makes the file owner-only; give it the mode open() would (0666 less the umask).
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        os.unlink(tmp_path)
        raise


def _umask() -> int:
    mask = os.umask(0)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return mask


def read_lines(path: str) -> list[str]:
    """The lines of a UTF-8 text file without their line endings.

    Only "\\n" ends a line (as in the decoder's output), so a stray U+2028 or
    form feed inside a sentence cannot shift every later line; a "\\r" before
    it is dropped so that CRLF files score like LF files.

    Raises:
      UserError: the file cannot be read, or a line is not valid UTF-8 (the
        message names the file and the 1-based line number).
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror or error}") from None
    raw_lines = data.split(b"\n")
    if raw_lines[-1] == b"":
        raw_lines.pop()  # the final newline ends the last line; it does not start an empty one
    lines = []
    for number, raw in enumerate(raw_lines, start=1):
        try:
            lines.append(raw.decode("utf-8").removesuffix("\r"))
        except UnicodeDecodeError as error:
            raise UserError(f"{path}: line {number} is not valid UTF-8 (bytes {raw[error.start:error.end]!r} "
                            f"at byte {error.start + 1} of the line)") from None
    return lines
