"""A Translator call's own settings: what a call leaves out stays the Translator's, over every backend."""
import pytest

from t2t_lite import Translator
from t2t_lite.decoding.request import DecodeRequest
from t2t_lite.decoding.sampling import SamplingSettings
from t2t_lite.export.exporter import ExportRequest, export_run
from t2t_lite.run import RunRequest

LINES = ["1234", "98765", "305"]  # the tiny reverse run finishes at least 3 of 5 beams on each
SENTENCES = ["A dog runs in the park.", "Two men are playing music.", "A woman sits on a bench."]


@pytest.fixture(scope="module")
def exports(multi30k_run, tmp_path_factory):
    """The shared Multi30k run exported with beam 5: a SavedModel and a CTranslate2 model."""
    root = tmp_path_factory.mktemp("exports")
    run = RunRequest(output_dir=multi30k_run["output_dir"], data_dir=multi30k_run["data_dir"],
                     decode=DecodeRequest(beam_size=5, mixed_precision="none"))
    return {export_format: export_run(ExportRequest(str(root / export_format), run, export_format=export_format))
            for export_format in ("saved_model", "ctranslate2")}


@pytest.fixture(scope="module", params=["run", "saved_model", "ctranslate2"])
def opened(request, multi30k_run, exports):
    """A Translator with nbest=3 over each backend (the run searches with beam 4 unless told)."""
    if request.param == "run":
        return Translator.from_run(multi30k_run["output_dir"], multi30k_run["data_dir"], nbest=3,
                                   mixed_precision="none")
    if request.param == "ctranslate2":
        pytest.importorskip("ctranslate2")
    return Translator.from_export(exports[request.param], nbest=3)


def test_a_call_giving_the_beam_size_keeps_the_translators_nbest(opened):
    got = opened.hypotheses(SENTENCES, beam_size=5)
    assert [len(hyps) for hyps in got] == [3, 3, 3]
    assert got == opened.hypotheses(SENTENCES, beam_size=5, nbest=3)


def test_a_call_with_a_beam_below_the_translators_nbest_gives_as_many_as_its_beam(reverse_run):
    translator = Translator.from_run(reverse_run, nbest=3)
    assert [len(hyps) for hyps in translator.hypotheses(LINES, beam_size=2)] == [2, 2, 2]
    assert translator.translate(LINES, beam_size=1) == Translator.from_run(reverse_run, beam_size=1).translate(LINES)


def test_a_call_keeps_the_translators_precision(reverse_run):
    # bfloat16 moves every score off float32's, so a call falling back to the default precision would show.
    bfloat16 = Translator.from_run(reverse_run, mixed_precision="mixed_bfloat16", nbest=2)
    float32 = Translator.from_run(reverse_run, mixed_precision="none", nbest=2)
    with_beam_5 = [[hyp.score for hyp in hyps] for hyps in bfloat16.hypotheses(LINES, beam_size=5)]
    assert with_beam_5 == [[hyp.score for hyp in hyps] for hyps in
                           Translator.from_run(reverse_run, mixed_precision="mixed_bfloat16", beam_size=5,
                                               nbest=2).hypotheses(LINES)]
    assert with_beam_5 != [[hyp.score for hyp in hyps] for hyps in float32.hypotheses(LINES, beam_size=5)]


def test_a_sampling_translator_keeps_sampling_until_a_call_gives_a_beam(reverse_run):
    sampling = SamplingSettings(temperature=2.0, seed=3)
    sampler = Translator.from_run(reverse_run, sampling=sampling)
    assert sampler.hypotheses(LINES, nbest=1) == sampler.hypotheses(LINES)
    searched = sampler.hypotheses(LINES, beam_size=4)
    assert searched == Translator.from_run(reverse_run).hypotheses(LINES)
