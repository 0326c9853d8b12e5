"""The decoder's outputs: n-best lists in Moses and JSON Lines form, sampling, ensembles and the paper's BLEU."""
import io
import json
import shutil

import numpy as np
import pytest

from t2t_lite.decoding.batching import Hypothesis, decode_lines
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.errors import UserError
from t2t_lite.bin.lines import DecodeFileRequest, decode_file, format_outputs
from t2t_lite.metrics.bleu import COMPOUND_SPLIT_LABEL, compound_split_bleu
from t2t_lite.decoding.request import DecodeRequest, SamplingSettings
from t2t_lite.run import RunRequest, open_run
from t2t_lite.run_dir import RunDir, load_spec

from cli_helpers import run_tool, run_tools
from saved_runs import save_run

LINES = ["0123456", "", "98", "5550011", "1"]


@pytest.fixture(scope="module")
def source(reverse_run, tmp_path_factory):
    path = tmp_path_factory.mktemp("outputs") / "in.txt"
    path.write_text("".join(line + "\n" for line in LINES))
    return path


@pytest.fixture(scope="module")
def expected(reverse_run):
    """Every line's beam-3 hypotheses as the library decodes them."""
    opened = open_run(RunRequest(output_dir=reverse_run, decode=DecodeRequest(beam_size=3, mixed_precision="none")))
    return decode_lines(opened.problem, Decoder(opened.models, opened.decode_hparams).decode, LINES, batch_size=2)


def decoded(reverse_run, source, run=None, decode=None, **settings) -> str:
    """decode_file's standard output for `source`: `run` RunRequest fields, `decode` DecodeRequest fields
    (batch size 2 and float32 unless given), `settings` DecodeFileRequest fields."""
    decode = DecodeRequest(**{"batch_size": 2, "mixed_precision": "none", **(decode or {})})
    request = RunRequest(output_dir=reverse_run, **(run or {}), decode=decode)
    out = io.StringIO()
    decode_file(DecodeFileRequest(request, str(source), **settings), out=out)
    return out.getvalue()


def test_format_outputs_in_each_format():
    results = [[Hypothesis("b a", -0.5, (5, 4)), Hypothesis("a", -1.25, (4,))], [Hypothesis("", 0.0)]]
    sources = ["a b", ""]
    assert format_outputs(sources, results, 1, "text") == "b a\n\n"
    assert format_outputs(sources, results, 2, "text", first_index=7) == \
        "7 ||| b a ||| -0.5000\n7 ||| a ||| -1.2500\n8 |||  ||| 0.0000\n"
    rows = [json.loads(line) for line in format_outputs(sources, results, 1, "jsonl").splitlines()]
    assert rows == [{"source": "a b", "hypotheses": [{"text": "b a", "score": -0.5, "ids": [5, 4]}]},
                    {"source": "", "hypotheses": [{"text": "", "score": 0.0, "ids": []}]}]


def test_nbest_text_gives_moses_lines_of_every_hypothesis_in_input_order(reverse_run, source, expected):
    lines = decoded(reverse_run, source, decode={"beam_size": 3, "nbest": 3}).splitlines()
    want = [f"{index} ||| {h.text} ||| {h.score:.4f}" for index, hyps in enumerate(expected) for h in hyps[:3]]
    assert lines == want
    assert {line.split(" ||| ")[0] for line in lines} == {"0", "1", "2", "3", "4"}
    assert sum(line.startswith("0 ||| ") for line in lines) == 3  # K per line (the empty line has one)


def test_jsonl_carries_source_texts_scores_and_ids(reverse_run, source, expected):
    rows = [json.loads(line) for line in decoded(reverse_run, source, decode={"beam_size": 3, "nbest": 2},
                                                 output_format="jsonl").splitlines()]
    assert [row["source"] for row in rows] == LINES
    assert rows[1]["hypotheses"] == [{"text": "", "score": 0.0, "ids": []}]
    for row, hyps in zip(rows, expected):
        assert [h["text"] for h in row["hypotheses"]] == [h.text for h in hyps[:2]]
        np.testing.assert_allclose([h["score"] for h in row["hypotheses"]], [h.score for h in hyps[:2]], rtol=1e-6)
    # The ids are the text's tokens: the reverse problem's digit d is id d + 2.
    assert rows[0]["hypotheses"][0]["ids"] == [int(c) + 2 for c in rows[0]["hypotheses"][0]["text"]]


def test_sampling_is_reproducible_with_a_seed_and_differs_between_seeds(reverse_run, tmp_path):
    long_lines = tmp_path / "long.txt"
    long_lines.write_text("".join(str(n) * 3 + "0123456789" + "\n" for n in range(8)))

    def sample(seed):
        return decoded(reverse_run, long_lines, decode={"sampling": SamplingSettings(3.0, top_k=5, seed=seed)})

    first = sample(1)
    assert len(first.splitlines()) == 8
    assert sample(1) == first
    assert sample(2) != first


def test_an_ensemble_of_the_model_with_itself_decodes_as_the_model(reverse_run, source, expected):
    checkpoint = open_run(RunRequest(output_dir=reverse_run)).checkpoint
    rows = [json.loads(line) for line in decoded(reverse_run, source, run={"checkpoint_path": f"{checkpoint},{checkpoint}"},
                                                 decode={"beam_size": 3, "nbest": 3}, output_format="jsonl").splitlines()]
    for row, hyps in zip(rows, expected):
        assert [h["text"] for h in row["hypotheses"]] == [h.text for h in hyps]
        np.testing.assert_allclose([h["score"] for h in row["hypotheses"]], [h.score for h in hyps], atol=1e-5)


def test_a_run_named_with_a_partner_decodes_as_their_ensemble(reverse_run, source, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    shutil.copytree(reverse_run, first)
    save_run(str(second), load_spec(RunDir(reverse_run)), (1,), seed=3)  # untrained weights
    named = run_tool("ensemble", f"--output_dir={first}", f"--partners={second}", timeout=120)
    assert named.returncode == 0 and f"{first} decodes with {second} as one ensemble" in named.stderr
    settings = {"decode": {"beam_size": 3, "nbest": 3}, "output_format": "jsonl"}
    by_default = decoded(str(first), source, **settings)
    assert by_default == decoded(str(first), source, run={"checkpoint_path": f"{first},{second}"}, **settings)
    assert by_default != decoded(str(first), source, run={"checkpoint_path": str(first)}, **settings)

    refused = run_tool("ensemble", f"--output_dir={first}", f"--partners={tmp_path / 'nowhere'}", timeout=120)
    assert refused.returncode == 2 and refused.error.startswith(f"partner {str(tmp_path / 'nowhere')!r} is not")
    assert json.loads((first / "ensemble.json").read_text()) == {"partners": ["../second"]}  # unchanged


def test_paper_bleu_is_printed_with_its_name_beside_the_other_scores(reverse_run, tmp_path):
    source, reference = tmp_path / "in.txt", tmp_path / "ref.txt"
    source.write_text("0123\n4567\n89\n")
    reference.write_text("3210\n7654\n98\n")
    text = decoded(reverse_run, source, decode_reference=str(reference), paper_bleu_language="de")
    outputs, report = text.splitlines()[:3], text.splitlines()[3:]
    paper = [line for line in report if COMPOUND_SPLIT_LABEL in line]
    assert len(paper) == 1 and report[0].startswith("exact match = ")
    want = compound_split_bleu(outputs, ["3210", "7654", "98"], "de")
    assert paper[0] == str(want) and f"= {want.score:.2f}" in paper[0]


@pytest.mark.parametrize("settings, message", [
    ({"decode": {"beam_size": 2, "nbest": 3}}, "`nbest`=3 is more than the beam size 2"),
    ({"output_format": "xml"}, "--output_format must be one of text, jsonl"),
    ({"paper_bleu_language": "de"}, "--paper_bleu_language scores against --decode_reference"),
])
def test_flags_that_do_not_fit_are_refused(reverse_run, source, settings, message):
    with pytest.raises(UserError, match=message):
        decoded(reverse_run, source, **settings)


def test_the_cli_writes_jsonl_to_a_file_and_refuses_nbest_above_the_beam_in_one_line(reverse_run, source, tmp_path):
    output = tmp_path / "out.jsonl"
    results = run_tools({
        "jsonl": ("decoder", [f"--output_dir={reverse_run}", f"--decode_from_file={source}", "--beam_size=2",
                              "--nbest=2", "--output_format=jsonl", f"--decode_to_file={output}"]),
        "too_many": ("decoder", [f"--output_dir={reverse_run}", f"--decode_from_file={source}", "--beam_size=2",
                                 "--nbest=3", f"--decode_to_file={tmp_path / 'no.txt'}"]),
    }, max_running=2)
    assert results["jsonl"].returncode == 0, results["jsonl"].stderr
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    assert len(rows) == len(LINES) and all(len(row["hypotheses"]) <= 2 for row in rows)
    assert results["too_many"].returncode == 2
    assert results["too_many"].error == "--nbest=3 is more than the beam size 2; raise --beam_size or lower --nbest"
    assert not (tmp_path / "no.txt").exists()
