"""--mixed_precision=auto: bfloat16 where the CPU multiplies it natively, float32 elsewhere."""
import os

import keras
import pytest

import t2t_lite.hparams  # noqa: F401
from t2t_lite import config, precision
from t2t_lite.errors import UserError
from t2t_lite.registry import hparams_sets
from t2t_lite.training.run_config import RunConfig, resolve_for
from t2t_lite.training.trainer import Trainer
from small_training import TINY, small_problem

ZEN3 = {"fpu", "sse2", "avx", "avx2", "fma", "f16c"}  # AVX2 only: bfloat16 would be emulated
ZEN4 = ZEN3 | {"avx512f", "avx512_bf16", "avx512_vnni"}
SAPPHIRE_RAPIDS = ZEN3 | {"avx512f", "amx_tile", "amx_bf16", "amx_int8"}


@pytest.mark.parametrize("flags, has_gpu, expected", [
    (ZEN4, False, "mixed_bfloat16"),
    (SAPPHIRE_RAPIDS, False, "mixed_bfloat16"),
    (ZEN3, False, "none"),
    (ZEN3 | {"avx512f", "avx512_vnni"}, False, "none"),  # AVX-512 without its BF16 extension
    (ZEN4, True, "none"),  # GPUs: the user chooses float16 or bfloat16
    (set(), False, "none"),  # no /proc/cpuinfo (not Linux)
])
def test_auto_takes_bfloat16_only_where_the_cpu_has_it_natively(flags, has_gpu, expected):
    assert precision.resolve(precision.AUTO, flags=flags, has_gpu=has_gpu, cap="ALL") == expected


@pytest.mark.parametrize("cap, expected", [
    ("AVX2", "none"), ("avx2", "none"), ("AVX512_CORE", "none"), ("AVX512_CORE_VNNI", "none"),
    ("AVX512_CORE_BF16", "mixed_bfloat16"), ("AVX512_CORE_AMX", "mixed_bfloat16"), ("ALL", "mixed_bfloat16")])
def test_auto_treats_onednn_capped_below_bfloat16_as_a_cpu_without_it(monkeypatch, cap, expected):
    # The variable itself, as a user or the forced-ISA pass sets it (tests/test_forced_isa.py).
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    assert precision.resolve(precision.AUTO, flags=ZEN4, has_gpu=False) == expected
    assert precision.resolve(precision.AUTO, flags=SAPPHIRE_RAPIDS, has_gpu=False) == expected
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    assert precision.resolve(precision.AUTO, flags=ZEN4, has_gpu=False) == "mixed_bfloat16"


def test_bfloat16_layers_are_refused_where_the_cap_hides_the_cpus_avx512_and_built_elsewhere(monkeypatch):
    # TensorFlow would send their matmuls to oneDNN (the CPU has AVX-512), which the cap leaves without a
    # bfloat16 kernel: a crash.
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")
    for flags, refused in ((ZEN4, True), (SAPPHIRE_RAPIDS, True), (ZEN3 | {"avx512f"}, True), (ZEN3, False)):
        monkeypatch.setattr(precision, "cpu_flags", lambda flags=flags: flags)
        if refused:
            with pytest.raises(UserError, match="mixed_bfloat16 cannot run with ONEDNN_MAX_CPU_ISA=AVX2"):
                with precision.layers_compute_in("mixed_bfloat16"):
                    pass
        else:
            with precision.layers_compute_in("mixed_bfloat16"):
                assert keras.config.dtype_policy().name == "mixed_bfloat16"
        with precision.layers_compute_in("none"):  # float32 runs anywhere
            assert keras.config.dtype_policy().name == "float32"
    monkeypatch.setattr(precision, "cpu_flags", lambda: ZEN4)
    for cap, onednn in (("AVX512_CORE", "1"), ("AVX512_CORE_BF16", "1"), ("AVX2", "0")):  # emulated, native, Eigen
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
        monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", onednn)
        with precision.layers_compute_in("mixed_bfloat16"):
            assert keras.config.dtype_policy().name == "mixed_bfloat16"


def test_an_explicit_precision_is_kept_whatever_the_cpu_and_a_bad_one_is_refused():
    for chosen in precision.PRECISIONS:
        assert precision.resolve(chosen, flags=ZEN4, has_gpu=False) == chosen
        assert precision.resolve(chosen, flags=ZEN3, has_gpu=True) == chosen
    with pytest.raises(ValueError, match="float8"):
        precision.resolve("float8", flags=ZEN4, has_gpu=False)


def test_cpu_flags_are_read_from_the_flags_line_and_are_empty_without_the_file(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512_bf16\n"
                       "bugs\t\t: sysret_ss_attrs\n\nprocessor\t: 1\nflags\t\t: fpu avx2 avx512_bf16\n")
    assert precision.cpu_flags(str(cpuinfo)) == {"fpu", "avx2", "avx512_bf16"}
    assert precision.cpu_flags(str(tmp_path / "absent")) == set()


def auto_trainer(output_dir, log, **settings):
    """A Trainer of TINY with --mixed_precision=auto, its settings resolved as t2t_lite.train resolves them."""
    problem, hparams = small_problem(), config.apply_overrides(hparams_sets.get("transformer_tiny")(), TINY)
    run = RunConfig(output_dir=str(output_dir), train_steps=1, mixed_precision="auto", memory_probe=False,
                    eval_bleu_sentences=0, **settings)
    return Trainer(problem, hparams, resolve_for(run, problem, hparams, log=log), log=log)


@pytest.mark.isa
def test_auto_is_resolved_for_this_machine_said_once_and_the_trainer_computes_in_it(tmp_path):
    lines = []
    trainer = auto_trainer(tmp_path, lines.append)
    expected = precision.resolve(precision.AUTO)
    if os.environ.get("ONEDNN_MAX_CPU_ISA") == "AVX2":  # the forced pass (test_forced_isa.py): as on an AVX2 CPU
        assert expected == "none"
    assert trainer.run.mixed_precision == expected
    assert [line for line in lines if line.startswith("mixed precision: ")] == [
        "mixed precision: bfloat16 (`mixed_precision`=auto: this CPU multiplies bfloat16 natively; "
        "`mixed_precision`=none trains in float32)" if expected == "mixed_bfloat16" else
        "mixed precision: none, float32 (`mixed_precision`=auto: no native bfloat16 here)"]
    # The model computes in what was chosen; its variables stay float32.
    assert trainer.model.dtype_policy.compute_dtype == ("bfloat16" if expected == "mixed_bfloat16" else "float32")
    assert all(w.dtype == "float32" for w in trainer.model.trainable_weights)


@pytest.mark.parametrize("chosen, kept", [("none", False), ("mixed_bfloat16", True)])
def test_float32_output_projection_under_auto_is_kept_only_when_auto_chose_mixed_precision(tmp_path, monkeypatch,
                                                                                          chosen, kept):
    monkeypatch.setattr(precision, "resolve", lambda name: chosen)
    lines = []
    trainer = auto_trainer(tmp_path, lines.append, float32_output_projection=True)
    assert trainer.run.float32_output_projection is kept
    assert trainer.train_step.float32_output_projection is kept
    ignored = "`float32_output_projection` is ignored: training runs in float32 here"
    assert (ignored in lines) is not kept
