"""The one library module that reads environment variables: the commands' decoding speed settings, and where
the commands write under $HOME.

Only bin/ and benchmarks/ call it; the library takes the settings it returns
as arguments (Decoder(..., step_matmul=...)), so a Python user's decoding
never depends on the environment.

  T2T_LITE_KERNEL_LAYOUT  auto | in_out | out_in        (StepMatmulSettings.layout)
  T2T_LITE_STEP_MATMUL    auto | matmul | batch_matmul  (StepMatmulSettings.op)
  T2T_LITE_CACHE_DIR      where the "auto" layout measured on this machine is kept (StepMatmulSettings.layout_record):
                          default $XDG_CACHE_HOME/t2t_lite, else ~/.cache/t2t_lite

A read-only home (docs/install.md): what a command's libraries would write under $HOME is moved before they
are imported (redirect_home_writes, which every command's run_main calls), each with one warning line naming
the variable that chooses the place:
  KERAS_HOME     Keras's keras.json, written at `import keras` when missing (~/.keras)
  MPLCONFIGDIR   matplotlib's config and font cache (~/.config/matplotlib, ~/.cache/matplotlib)
  TFDS_DATA_DIR  tensorflow-datasets' downloads for the WMT problems without --tmp_dir (~/tensorflow_datasets)
The kernel-layout record is not moved (a temporary one would be measured again by every process anyway):
step_matmul_settings says once that each process measures its own layout.
"""
from __future__ import annotations

import atexit
import functools
import importlib.abc
import os
import shutil
import sys
import tempfile

from typing import TYPE_CHECKING

from t2t_lite.errors import UserError

if TYPE_CHECKING:  # imported where used: a command's start-up imports this module before Keras may load
    from t2t_lite.ops.step_matmul import StepMatmulSettings

LAYOUT_VARIABLE = "T2T_LITE_KERNEL_LAYOUT"
OP_VARIABLE = "T2T_LITE_STEP_MATMUL"
CACHE_VARIABLE = "T2T_LITE_CACHE_DIR"
LAYOUT_RECORD = "kernel_layout.json"


def step_matmul_settings() -> StepMatmulSettings:
    """T2T_LITE_KERNEL_LAYOUT and T2T_LITE_STEP_MATMUL, each unset or "auto" for automatic.

    A value neither names is a UserError naming the variable and the values it takes. An "auto" layout whose
    record cannot be written (a read-only home) is measured by each process, which says so once.
    """
    # Here, not at the top: a command's start-up imports this module before Keras and TensorFlow may load.
    from t2t_lite.ops.step_matmul import AUTO, BATCH_MATMUL, IN_OUT, MATMUL, OUT_IN, StepMatmulSettings

    layout = choice(LAYOUT_VARIABLE, (IN_OUT, OUT_IN), "a kernel layout")
    record = os.path.join(cache_dir(), LAYOUT_RECORD)
    if layout == AUTO and not writable(cache_dir()) and not os.path.isfile(record):
        warn_once(f"{cache_dir()} cannot be written, so the kernel layout this process measures is not kept: "
                  f"a bfloat16 decoder and an export made by another process may then differ (each process "
                  f"measures its own); set {CACHE_VARIABLE} to a writable directory, or {LAYOUT_VARIABLE} to "
                  f"{IN_OUT} or {OUT_IN}")
    return StepMatmulSettings(layout=layout, op=choice(OP_VARIABLE, (MATMUL, BATCH_MATMUL), "a step matmul op"),
                              layout_record=record)


def cache_dir() -> str:
    """T2T_LITE_CACHE_DIR, else $XDG_CACHE_HOME/t2t_lite, else ~/.cache/t2t_lite."""
    return (os.environ.get(CACHE_VARIABLE) or
            os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "t2t_lite"))


def choice(variable: str, choices: tuple[str, ...], kind: str) -> str:
    """The value of `variable` (case and surrounding spaces ignored), AUTO when it is unset.

    Any other value than `choices` and AUTO is a UserError naming the variable, what it is (`kind`, e.g.
    "a kernel layout") and the values it takes.
    """
    from t2t_lite.ops.step_matmul import AUTO

    value = os.environ.get(variable, "").strip().lower() or AUTO
    if value not in (*choices, AUTO):
        raise UserError(f"{variable}={value!r} is not {kind}: use {', '.join(choices)} or {AUTO}")
    return value


def redirect_home_writes() -> None:
    """For the commands (bin/cli.py's run_main), before they import anything: when Keras, matplotlib or
    tensorflow-datasets is first imported, what it would write where it cannot (a read-only home) goes to a
    temporary directory instead, with one warning line naming the variable to set. Where the place can be
    written, or the variable is set to a writable one, nothing changes and nothing is said.
    """
    if not any(isinstance(finder, _HomeWrites) for finder in sys.meta_path):
        sys.meta_path.insert(0, _HomeWrites())


class _HomeWrites(importlib.abc.MetaPathFinder):
    """Runs a library's entry in HOME_WRITES once, as the library is first imported; finds nothing itself."""

    def find_spec(self, name, path, target=None):
        if name in HOME_WRITES:
            HOME_WRITES.pop(name)()
        return None


def _keras_home() -> None:
    place = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    if writable(place) or ("KERAS_HOME" in os.environ and os.path.isfile(os.path.join(place, "keras.json"))):
        return  # Keras writes only a missing keras.json
    os.environ["KERAS_HOME"] = temporary_dir("keras")
    warn_once(f"{place} cannot be written: Keras keeps its keras.json in {os.environ['KERAS_HOME']} for this "
              f"process; set KERAS_HOME to a writable directory")


def _matplotlib_config() -> None:
    places = [os.environ["MPLCONFIGDIR"]] if os.environ.get("MPLCONFIGDIR") else [
        os.path.join(os.environ.get(xdg) or os.path.expanduser(default), "matplotlib")
        for xdg, default in (("XDG_CONFIG_HOME", "~/.config"), ("XDG_CACHE_HOME", "~/.cache"))]
    unwritable = [place for place in places if not writable(place)]
    if unwritable:
        os.environ["MPLCONFIGDIR"] = temporary_dir("matplotlib")
        warn_once(f"{' and '.join(unwritable)} cannot be written: matplotlib keeps its config and font cache in "
                  f"{os.environ['MPLCONFIGDIR']} for this process; set MPLCONFIGDIR to a writable directory")


def _tfds_data_dir() -> None:
    place = os.environ.get("TFDS_DATA_DIR") or os.path.join(os.path.expanduser("~"), "tensorflow_datasets")
    if writable(place):
        return
    # Kept, unlike the others: a WMT download is gigabytes, and a rerun finds it there.
    os.environ["TFDS_DATA_DIR"] = os.path.join(tempfile.gettempdir(), f"t2t-lite-tensorflow_datasets-{os.getuid()}")
    warn_once(f"{place} cannot be written: without `tmp_dir`, tensorflow-datasets downloads go to "
              f"{os.environ['TFDS_DATA_DIR']} (kept); set TFDS_DATA_DIR, or pass `tmp_dir`, to choose the place")


# A library's top-level module -> what moves its writes under $HOME, run once as it is first imported.
HOME_WRITES = {"keras": _keras_home, "matplotlib": _matplotlib_config, "tensorflow_datasets": _tfds_data_dir}


def writable(directory: str) -> bool:
    """Whether files can be made in `directory`: it is a writable directory, or its nearest existing parent
    is one (makedirs would succeed). Nothing is created."""
    path = os.path.abspath(directory)
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)


def temporary_dir(name: str) -> str:
    """A new private directory for this process (t2t-lite-<name>-*), removed when it exits."""
    directory = tempfile.mkdtemp(prefix=f"t2t-lite-{name}-")
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


@functools.lru_cache(maxsize=None)
def warn_once(message: str) -> None:
    """One line on stderr, once per process for each message."""
    print(f"t2t-lite: warning: {message}", file=sys.stderr, flush=True)
