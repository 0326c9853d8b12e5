"""The one library module that reads environment variables: the commands' decoding speed settings.

Only bin/ and benchmarks/ call it; the library takes the settings it returns
as arguments (Decoder(..., step_matmul=...)), so a Python user's decoding
never depends on the environment.

  T2T_LITE_KERNEL_LAYOUT  auto | in_out | out_in        (StepMatmulSettings.layout)
  T2T_LITE_STEP_MATMUL    auto | matmul | batch_matmul  (StepMatmulSettings.op)
  T2T_LITE_CACHE_DIR      where the "auto" layout measured on this machine is kept (StepMatmulSettings.layout_record):
                          default $XDG_CACHE_HOME/t2t_lite, else ~/.cache/t2t_lite
"""
import os

from t2t_lite.errors import UserError
from t2t_lite.ops.kernel_layout import IN_OUT, OUT_IN
from t2t_lite.ops.matmul_threads import BATCH_MATMUL, MATMUL
from t2t_lite.ops.step_matmul import AUTO, StepMatmulSettings

LAYOUT_VARIABLE = "T2T_LITE_KERNEL_LAYOUT"
OP_VARIABLE = "T2T_LITE_STEP_MATMUL"
CACHE_VARIABLE = "T2T_LITE_CACHE_DIR"
LAYOUT_RECORD = "kernel_layout.json"


def step_matmul_settings() -> StepMatmulSettings:
    """T2T_LITE_KERNEL_LAYOUT and T2T_LITE_STEP_MATMUL, each unset or "auto" for automatic.

    A value neither names is a UserError naming the variable and the values it takes.
    """
    return StepMatmulSettings(layout=choice(LAYOUT_VARIABLE, (IN_OUT, OUT_IN), "a kernel layout"),
                              op=choice(OP_VARIABLE, (MATMUL, BATCH_MATMUL), "a step matmul op"),
                              layout_record=os.path.join(cache_dir(), LAYOUT_RECORD))


def cache_dir() -> str:
    """T2T_LITE_CACHE_DIR, else $XDG_CACHE_HOME/t2t_lite, else ~/.cache/t2t_lite."""
    return (os.environ.get(CACHE_VARIABLE) or
            os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "t2t_lite"))


def choice(variable: str, choices: tuple[str, ...], kind: str) -> str:
    """The value of `variable` (case and surrounding spaces ignored), AUTO when it is unset.

    Any other value than `choices` and AUTO is a UserError naming the variable, what it is (`kind`, e.g.
    "a kernel layout") and the values it takes.
    """
    value = os.environ.get(variable, "").strip().lower() or AUTO
    if value not in (*choices, AUTO):
        raise UserError(f"{variable}={value!r} is not {kind}: use {', '.join(choices)} or {AUTO}")
    return value
