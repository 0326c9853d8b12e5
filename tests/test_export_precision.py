"""A SavedModel decodes the decoder's lines on the machine that exported it, in every precision.

The export traces its decoding step with the products the decoder runs here (layout and op), so in
bfloat16, where a different layout or op rounds differently, the served lines and scores still equal
the decoder's. Checked in the precision `auto` picks on the CPU at hand and in mixed_bfloat16 forced
(which a CPU without native bfloat16 emulates), with the defaults on both sides and with settings fixed
on both sides (so the check does not rest on what `auto` happens to resolve to). Both run again as on
an AVX2 CPU (tests/test_forced_isa.py): `auto` is float32 there, and bfloat16 runs in Eigen's kernels.
An export planted to trace the layout opposite to the decoder's fails the bfloat16 case natively on a
Zen 4 and with AVX2 forced there.
"""
import json
import os

import numpy as np
import pytest

from t2t_lite import Translator, precision
from t2t_lite.export.exporter import ExportRequest, export_run
from t2t_lite.ops.kernel_layout import IN_OUT, OUT_IN, STEP_ROWS, measured_layout, record_key
from t2t_lite.ops.matmul_threads import BATCH_MATMUL
from t2t_lite.ops.step_matmul import StepMatmulSettings
from t2t_lite.decoding.request import DecodeRequest
from t2t_lite.run import RunRequest
from t2t_lite.run_dir import RunDir, load_spec
from cli_helpers import run_forked, run_tools
from saved_model_graph import matmul_dtypes
from trained_runs import multi30k_lines

SENTENCES = 40
DEFAULTS, FIXED = StepMatmulSettings(), StepMatmulSettings(OUT_IN, BATCH_MATMUL)


# auto: bfloat16 on a CPU with native bfloat16, else float32; then bfloat16 forced, so every CPU checks it, with
# settings fixed on both sides.
@pytest.mark.parametrize("mixed_precision, step_matmul", [
    pytest.param("auto", DEFAULTS, marks=pytest.mark.isa, id="auto"),
    pytest.param("mixed_bfloat16", FIXED, marks=pytest.mark.isa_bfloat16, id="bfloat16")])
def test_saved_model_gives_the_decoders_lines_and_scores(multi30k_run, tmp_path, mixed_precision, step_matmul):
    run = RunRequest(output_dir=multi30k_run["output_dir"], data_dir=multi30k_run["data_dir"], decode=DecodeRequest(extra_length=10, mixed_precision=mixed_precision))
    path = export_run(ExportRequest(export_dir=str(tmp_path), run=run, step_matmul=step_matmul))
    sentences = multi30k_lines("test_2016_flickr", "en", SENTENCES).splitlines()

    decoded = Translator.from_request(run, step_matmul).hypotheses(sentences)
    served = Translator.from_export(path).hypotheses(sentences)

    assert [h[0].text for h in served] == [h[0].text for h in decoded]
    assert len({h[0].text for h in decoded}) > 1  # input-dependent outputs: not a vacuous match
    # Equal scores: the same products in the same order, not merely the same argmax.
    np.testing.assert_allclose([h[0].score for h in served], [h[0].score for h in decoded], rtol=1e-6)
    with open(os.path.join(path, "assets", "hparams.json"), encoding="utf-8") as f:
        export_info = json.load(f)["export"]
    recorded = export_info["step_matmul"]
    if step_matmul.layout != "auto":
        assert recorded["layout"] == step_matmul.layout
    assert recorded["layout"] in ("in_out", "out_in")
    # Each product's op as traced: the one the decoder resolves here for its shape (never "auto").
    dtype = "bfloat16" if "bfloat16" in export_info["mixed_precision"] else "float32"
    assert len(recorded["op"]) >= 4 and all(
        op == step_matmul.resolved_op(*map(int, shape.split("x")), dtype) for shape, op in recorded["op"].items())
    if mixed_precision == "mixed_bfloat16":  # a bfloat16 graph, recorded as such
        assert export_info["mixed_precision"] == "mixed_bfloat16" and "bfloat16" in matmul_dtypes(path)


def test_an_export_and_the_run_decoded_by_other_processes_give_the_same_lines(multi30k_run, tmp_path):
    """The exporter here, then the decoder command on the run and on the export, each in a process of its own:
    with the machine's layout record (what the commands keep, StepMatmulSettings.layout_record) all three
    multiply in the recorded layout. The record is seeded with the layout this process would not measure, so a
    process that measured for itself would multiply otherwise (in bfloat16, other lines)."""
    run = RunRequest(output_dir=multi30k_run["output_dir"], data_dir=multi30k_run["data_dir"],
                     decode=DecodeRequest(extra_length=10))
    model = load_spec(RunDir(multi30k_run["output_dir"])).hparams.model
    dtype = "bfloat16" if "bfloat16" in precision.resolve("auto") else "float32"  # as the decoders will compute
    shape = (STEP_ROWS, model.d_model, model.vocab_size, dtype)
    seeded = OUT_IN if measured_layout(*shape) == IN_OUT else IN_OUT
    record = tmp_path / "cache" / "kernel_layout.json"
    record.parent.mkdir()
    record.write_text(json.dumps({record_key(*shape): seeded}))
    path = export_run(ExportRequest(export_dir=str(tmp_path / "exports"), run=run,
                                    step_matmul=StepMatmulSettings(layout_record=str(record))))
    with open(os.path.join(path, "assets", "hparams.json"), encoding="utf-8") as f:
        assert json.load(f)["export"]["step_matmul"]["layout"] == seeded
    source = tmp_path / "source.en"
    source.write_text(multi30k_lines("test_2016_flickr", "en", SENTENCES // 2), encoding="utf-8")
    env = {"T2T_LITE_CACHE_DIR": str(record.parent)}
    # What a command's settings resolve to in a process of its own: the record's layout, not its own timing.
    code, stdout, stderr = run_forked(print_command_layout, *shape, env=env)
    assert code == 0 and stdout.strip() == seeded, stderr[-2000:]
    # Each hypothesis with its score: a product in another layout may keep the words but not the score.
    common = (f"--decode_from_file={source}", "--output_format=jsonl")
    results = run_tools({
        "run": ("decoder", (f"--output_dir={multi30k_run['output_dir']}", f"--data_dir={multi30k_run['data_dir']}",
                            f"--decode_to_file={tmp_path / 'run.out'}", "--extra_length=10", *common), env),
        "export": ("decoder", (f"--export_dir={path}", f"--decode_to_file={tmp_path / 'export.out'}", *common), env)})
    for name, result in results.items():
        assert result.returncode == 0, f"{name}: {result.stderr[-2000:]}"
    lines = [json.loads(line)["hypotheses"][0] for line in (tmp_path / "run.out").read_text().splitlines()]
    assert [json.loads(line)["hypotheses"][0] for line in (tmp_path / "export.out").read_text().splitlines()] == lines
    assert len(lines) == SENTENCES // 2 and len({line["text"] for line in lines}) > 1


def print_command_layout(rows, depth, width, dtype):
    """Prints the layout the commands' settings (the environment's) resolve for a step of this shape."""
    from t2t_lite import environment

    assert rows == STEP_ROWS
    print(environment.step_matmul_settings().resolved_layout(depth, width, dtype))
