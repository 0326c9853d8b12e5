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

from t2t_lite import Translator
from t2t_lite.export.exporter import ExportRequest, export_run
from t2t_lite.ops.kernel_layout import OUT_IN
from t2t_lite.ops.matmul_threads import BATCH_MATMUL
from t2t_lite.ops.step_matmul import StepMatmulSettings
from t2t_lite.decoding.request import DecodeRequest
from t2t_lite.run import RunRequest
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
        assert recorded == {"layout": step_matmul.layout, "op": step_matmul.op}
    assert recorded["layout"] in ("in_out", "out_in")
    if mixed_precision == "mixed_bfloat16":  # a bfloat16 graph, recorded as such
        assert export_info["mixed_precision"] == "mixed_bfloat16" and "bfloat16" in matmul_dtypes(path)
