"""Reading user text strictly, and writing files that are never half-written under their final name."""
import gzip
import os
import tempfile
from collections.abc import Iterator

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
    """Every line of a UTF-8 text file (gzip when its name ends in .gz), as iter_lines gives them."""
    return list(iter_lines(path))


def iter_lines(path: str) -> Iterator[str]:
    """The lines of a UTF-8 text file (gzip when its name ends in .gz) without their line endings, as they are read.

    Only "\\n" ends a line (as in the decoder's output), so a stray U+2028 or
    form feed inside a sentence cannot shift every later line; a "\\r" before
    it is dropped so that CRLF files read like LF files, and so is a byte order
    mark at the start, which is no text.

    Raises:
      UserError: the file cannot be read (or is a damaged .gz), or a line is not
        valid UTF-8 (the message names the file and the 1-based line number).
    """
    try:
        f = gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror or error}") from None
    with f:
        try:
            for number, raw in enumerate(f, start=1):
                yield decode_line(raw, path, number)
        except (OSError, EOFError) as error:  # a corrupt or truncated .gz
            raise UserError(f"cannot read {path}: {getattr(error, 'strerror', None) or error}") from None


def decode_line(raw: bytes, path: str, number: int) -> str:
    """One raw line (line end included) of `path` as text, as iter_lines reads it; number is 1-based."""
    raw = raw.removesuffix(b"\n").removesuffix(b"\r")
    if number == 1:
        raw = raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UserError(f"{path}: line {number} is not valid UTF-8 (bytes {raw[error.start:error.end]!r} "
                        f"at byte {error.start + 1} of the line)") from None
