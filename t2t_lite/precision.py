"""Mixed precision: matmuls in float16 or bfloat16, variables, softmax and loss in float32.

The model already keeps the numerically delicate parts in float32 whatever
the policy: attention logits and softmax (layers/attention.py), the output
logits (SharedEmbedding.logits), LayerNorm statistics (Keras computes them in
float32 and casts back), the loss (losses.py, whose logits are summed in float32
from half-precision operands: float32_product.py) and beam scores.
"""
import contextlib
import os

from t2t_lite.errors import UserError

PRECISIONS = ("none", "mixed_float16", "mixed_bfloat16")
# Training's default: mixed_bfloat16 where the CPU multiplies bfloat16 natively, else float32 ("none").
AUTO = "auto"
# CPU flags (Linux /proc/cpuinfo) of native bfloat16 matmuls: AVX-512 BF16 and AMX. Without them TensorFlow
# emulates bfloat16 and it runs slower than float32.
NATIVE_BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16")
# oneDNN's own variable: it caps the instructions oneDNN (TensorFlow's CPU kernels, and CTranslate2's on AMD)
# uses in this process, so that one variable makes a Zen 4 or a Xeon compute as an AVX2 CPU. Capped below
# AVX512_CORE_BF16, bfloat16 is emulated and AUTO takes float32. Capped below AVX-512 on a CPU that has it,
# oneDNN has no bfloat16 kernel left, yet TensorFlow (which decides by the CPU's flags) still sends bfloat16
# matmuls to it and the process crashes: an explicit mixed_bfloat16 is refused there (layers_compute_in).
ISA_CAP_VARIABLE = "ONEDNN_MAX_CPU_ISA"
ISAS_WITHOUT_AVX512 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2")
ISAS_WITHOUT_BFLOAT16 = ISAS_WITHOUT_AVX512 + ("AVX512_CORE", "AVX512_CORE_VNNI")


def check(precision: str) -> str:
    """Returns precision if it is one of PRECISIONS, else raises ValueError naming it."""
    if precision not in PRECISIONS:
        raise ValueError(f"mixed precision must be one of {', '.join(PRECISIONS)}; got {precision!r}")
    return precision


def check_setting(setting: str) -> None:
    """Raises UserError unless `setting` is AUTO or one of PRECISIONS: what a run or a decode may ask for."""
    if setting not in (AUTO, *PRECISIONS):
        raise UserError(f"`mixed_precision` must be one of {AUTO}, {', '.join(PRECISIONS)}; got {setting!r}")


def compute_dtype(precision: str) -> str:
    """The dtype the matmuls run in under precision: "float32" for "none", else the policy's name."""
    return "float32" if check(precision) == "none" else precision


def cpuinfo_field(name: str, path: str = "/proc/cpuinfo") -> str | None:
    """The value of the first line of Linux's /proc/cpuinfo that starts with `name` (the first processor's);
    None without one, or where that file does not exist (other systems)."""
    with contextlib.suppress(OSError), open(path, encoding="utf-8") as f:
        return next((line.split(":", 1)[1].strip() for line in f if line.startswith(name)), None)
    return None


def cpu_flags(path: str = "/proc/cpuinfo") -> set[str]:
    """The CPU's feature flags as Linux lists them; empty where that file does not exist (other systems)."""
    return set((cpuinfo_field("flags", path) or "").split())


def isa_cap() -> str | None:
    """ONEDNN_MAX_CPU_ISA as oneDNN reads it (upper case), or None where it is unset or empty."""
    return os.environ.get(ISA_CAP_VARIABLE, "").strip().upper() or None


def native_bfloat16(flags: set[str] | None = None, cap: str | None = None) -> bool:
    """Whether this process multiplies bfloat16 natively: the CPU has the flags and oneDNN is not capped below them.

    Args:
      flags: the CPU's feature flags (default: cpu_flags()).
      cap: the oneDNN instruction cap (default: isa_cap()); one of ISAS_WITHOUT_BFLOAT16 rules bfloat16 out.
    """
    has_flags = bool((cpu_flags() if flags is None else flags) & set(NATIVE_BFLOAT16_FLAGS))
    return has_flags and (isa_cap() if cap is None else cap) not in ISAS_WITHOUT_BFLOAT16


def onednn_crashes_bfloat16() -> bool:
    """Whether TensorFlow here would send bfloat16 matmuls to a oneDNN capped below AVX-512 on a CPU with it.

    Not with TF_ENABLE_ONEDNN_OPTS=0: bfloat16 then runs in Eigen, as TensorFlow runs it on a CPU without AVX-512.
    """
    return ("avx512f" in cpu_flags() and isa_cap() in ISAS_WITHOUT_AVX512
            and os.environ.get("TF_ENABLE_ONEDNN_OPTS") != "0")


def resolve(precision: str, flags: set[str] | None = None, has_gpu: bool | None = None, cap: str | None = None) -> str:
    """precision itself, or for AUTO: "mixed_bfloat16" where bfloat16 is native (native_bfloat16), else "none".

    On such CPUs bfloat16 training runs about twice as fast as float32 with a loss curve that follows
    float32's (docs/performance.md). GPUs keep float32 under AUTO: pick mixed_float16 or mixed_bfloat16
    for them explicitly.

    Args:
      precision: AUTO or one of PRECISIONS.
      flags: the CPU's feature flags (default: cpu_flags()).
      has_gpu: whether TensorFlow sees a GPU (default: asks TensorFlow; this does not fix its devices).
      cap: the oneDNN instruction cap (default: isa_cap()).
    """
    if precision != AUTO:
        return check(precision)
    if has_gpu is None:
        import tensorflow as tf
        has_gpu = bool(tf.config.list_physical_devices("GPU"))
    return "mixed_bfloat16" if not has_gpu and native_bfloat16(flags, cap) else "none"


def describe_auto(chosen: str) -> str:
    """The line a command prints for what AUTO resolved to (`chosen`, as resolve returned it)."""
    if chosen == "mixed_bfloat16":
        return ("mixed precision: bfloat16 (`mixed_precision`=auto: this CPU multiplies bfloat16 natively; "
                "`mixed_precision`=none trains in float32)")
    return "mixed precision: none, float32 (`mixed_precision`=auto: no native bfloat16 here)"


@contextlib.contextmanager
def layers_compute_in(precision: str):
    """Layers constructed inside the block compute in precision's dtype; their variables stay float32.

    A Keras layer takes the global dtype policy when it is constructed, so the
    policy is set only for the block and restored after it: models built
    later in the same process (a decoder, another test) are unaffected.

    Args:
      precision: one of PRECISIONS; "none" is float32.
    """
    import keras  # here, not at the top: decode requests check precisions where Keras is absent (CTranslate2)

    if precision == "mixed_bfloat16" and onednn_crashes_bfloat16():
        # TensorFlow sends bfloat16 to oneDNN by the CPU's flags, and oneDNN, capped, has no kernel for it: the
        # process would die in its first bfloat16 matmul.
        raise UserError(f"{precision} cannot run with {ISA_CAP_VARIABLE}={isa_cap()} on this CPU (TensorFlow "
                        "crashes in its bfloat16 matmuls): unset the variable, use `mixed_precision`=none, or set "
                        "TF_ENABLE_ONEDNN_OPTS=0 too (bfloat16 then runs in Eigen, as on a CPU without AVX-512)")
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(compute_dtype(precision))
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def loss_scaled(optimizer: "keras.optimizers.Optimizer", precision: str) -> "keras.optimizers.Optimizer":
    """optimizer wrapped in dynamic loss scaling under mixed_float16, else optimizer itself.

    float16 gradients underflow below ~6e-8 unless the loss is scaled up first;
    bfloat16 has float32's exponent range and needs no scaling.
    """
    if check(precision) == "mixed_float16":
        import keras

        return keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer
