"""Reading user text strictly, writing files that are never half-written under their final name, and
telling a full or read-only disk from other failures."""
import errno
import gzip
import json
import os
import sys
from collections.abc import Iterator

from t2t_lite.errors import UserError


def read_json(path: str):
    """The JSON value in the UTF-8 file at path; OSError, or ValueError for a file that is not JSON."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def atomic_write_text(path: str, text: str) -> None:
    """Writes `text` (UTF-8) to a temporary file beside `path`, flushes it to disk, then renames it over `path`."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str, data: bytes) -> None:
    """Writes `data` to a temporary file beside `path`, flushes it to disk, then renames it over `path`."""
    directory, name = os.path.split(os.path.abspath(path))
    tmp_path = os.path.join(directory, f".tmp-{os.urandom(6).hex()}{name}")
    # Made with the mode open() gives a new file, 0666 less the umask (tempfile's are owner-only); O_EXCL: never
    # another's file.
    fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        os.unlink(tmp_path)
        raise


# Writes a user can make succeed again: the disk is full, the quota is spent, the file system is (re)mounted
# read-only. What to do about each, for the one-line errors of the commands.
STORAGE_FAULTS = {errno.ENOSPC: "free some space", errno.EDQUOT: "free some space or raise the quota",
                  errno.EROFS: "make it writable"}


def storage_fault(error: BaseException) -> int | None:
    """The errno of STORAGE_FAULTS that `error` is, else None.

    An OSError carries its errno; TensorFlow's errors (a checkpoint's or a SavedModel's write) carry only
    the operating system's text, at the end of their message.
    """
    if isinstance(error, OSError):
        return error.errno if error.errno in STORAGE_FAULTS else None
    tf = sys.modules.get("tensorflow")  # no TensorFlow error can exist before it is imported
    if tf is not None and isinstance(error, tf.errors.OpError):
        return next((code for code in STORAGE_FAULTS if os.strerror(code) in error.message), None)
    return None


def storage_fault_text(code: int) -> str:
    """E.g. "No space left on device; free some space"."""
    return f"{os.strerror(code)}; {STORAGE_FAULTS[code]}"


def check_dir_can_be_written(path: str, flag: str) -> None:
    """Raises UserError unless `path` is a directory this process can write in, or can be created as one.

    Creates nothing: for a command that must refuse bad input before it writes anything. The nearest
    existing ancestor decides: a file (not a directory), a read-only file system, or no write permission.
    """
    existing = os.path.abspath(path)
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        reason = os.strerror(errno.ENOTDIR)
    elif os.statvfs(existing).f_flag & os.ST_RDONLY:
        reason = os.strerror(errno.EROFS)
    elif not os.access(existing, os.W_OK | os.X_OK):
        reason = os.strerror(errno.EACCES)
    else:
        return
    raise UserError(f"cannot write to {flag} {path!r}: {reason}")


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
        with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
            for number, raw in enumerate(f, start=1):
                yield decode_line(raw, path, number)
    except (OSError, EOFError) as error:  # missing, unreadable, or a corrupt or truncated .gz
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
