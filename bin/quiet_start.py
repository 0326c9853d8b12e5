"""Keeps TensorFlow's C++ start-up chatter out of a command's output.

Every command would otherwise begin with lines such as `failed call to cuInit: ...
CUDA error` (an E-line a user reads as a failure on any machine without a GPU), oneDNN
and CPU-feature notices and absl's "All log messages before absl::InitializeLog() ..."
warning. TF_CPP_MIN_LOG_LEVEL=3 silences what TensorFlow logs once it runs (cuInit's
ERROR included, so 3 and not 2), but the lines its libraries log while they load go
through absl before its logging is initialised, which writes them whatever the level:
those are filtered out of stderr for the duration of `import tensorflow`.

Set T2T_LITE_DEBUG=1, or TF_CPP_MIN_LOG_LEVEL yourself, to see everything.
"""
import contextlib
import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile

# absl's C++ log prefix: severity letter, a zero date (absl is not initialised), epoch seconds,
# thread id, file:line. Python's absl logging prints a real date, so its lines never match.
_CPP_LOG_LINE = re.compile(rb"^[IWE]0000 00:00:\d+\.\d+\s+\d+ [\w.+-]+:\d+\] ")
_ABSL_PRE_INIT = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"


def install() -> None:
    """Quiets TensorFlow's start-up unless T2T_LITE_DEBUG or TF_CPP_MIN_LOG_LEVEL is set; call before it is imported."""
    if os.environ.get("T2T_LITE_DEBUG") or "TF_CPP_MIN_LOG_LEVEL" in os.environ or "tensorflow" in sys.modules:
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    sys.meta_path.insert(0, _QuietTensorFlowImport())


def is_chatter(line: bytes) -> bool:
    """Whether a stderr line is TensorFlow's C++ logging from before absl's initialisation (FATAL kept)."""
    return bool(_CPP_LOG_LINE.match(line)) or line.rstrip(b"\r\n") == _ABSL_PRE_INIT


@contextlib.contextmanager
def _stderr_without_chatter():
    """Collects everything written to file descriptor 2, then writes back all but the chatter."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as collected:
        os.dup2(collected.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            collected.seek(0)
            with open(2, "wb", closefd=False) as stderr:  # buffered: written in full however the OS splits it
                stderr.writelines(line for line in collected if not is_chatter(line))


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `tensorflow` once, then loads it as its own loader would, inside _stderr_without_chatter.

    The module itself is made the default way (Loader.create_module's None), as TensorFlow's source-file
    loader makes it.
    """

    def find_spec(self, name, path, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            self._loader, spec.loader = spec.loader, self
        return spec

    def exec_module(self, module):
        # The real loader is what the module keeps, as if it had been imported plainly.
        module.__loader__ = module.__spec__.loader = self._loader
        with _stderr_without_chatter():
            self._loader.exec_module(module)
