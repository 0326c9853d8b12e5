"""Decoding a file with a trained run: batch independence, order, empty lines, bad input."""
import dataclasses
import glob
import io
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

import t2t_lite.hparams  # noqa: F401
import t2t_lite.problems  # noqa: F401
from t2t_lite import config
from t2t_lite.precision import layers_compute_in
from t2t_lite.decoding.batching import decode_lines
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.errors import UserError
from t2t_lite.decoding import cached_step
from t2t_lite.bin.lines import DecodeFileRequest, decode_file
from t2t_lite.models import build_model
from t2t_lite.ops import kernel_layout
from t2t_lite.registry import hparams_sets, problems
from t2t_lite.decoding.request import DecodeRequest
from t2t_lite.run import RunRequest, open_run
from t2t_lite.run_dir import RunDir, RunSpec, save_spec

from cli_helpers import run_tools
from parser_features import BOTH, set_tables
from trained_runs import REVERSE_TINY as TINY


@pytest.fixture(scope="module")
def run(reverse_run):
    """A briefly trained algorithmic_reverse run directory (shared, read-only)."""
    return reverse_run


def test_every_sentence_decodes_the_same_alone_and_in_a_batch_of_32():
    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(), f"{TINY},vocab_size=12")
    decoder = Decoder(build_model(hparams), dataclasses.replace(hparams.decode, extra_length=8))
    problem = problems.get("algorithmic_reverse")()
    rng = np.random.default_rng(0)
    lines = ["".join(map(str, rng.integers(0, 10, rng.integers(1, 21)))) for _ in range(32)]
    batched = decode_lines(problem, decoder.decode, lines, batch_size=32)
    for line, together in zip(lines, batched):
        alone = decode_lines(problem, decoder.decode, [line], batch_size=1)[0]
        assert [h.text for h in alone] == [h.text for h in together]
        np.testing.assert_allclose([h.score for h in alone], [h.score for h in together], atol=1e-5)


def test_the_search_is_traced_once_even_when_it_measures_the_kernel_layout():
    # The layout is measured on the first trace of a process (kernel_layout.measured_layout); a variable
    # made then would make TensorFlow trace the whole search a second time.
    kernel_layout.measured_layout.cache_clear()
    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(), f"{TINY},vocab_size=12")
    decoder = Decoder(build_model(hparams), hparams.decode)
    decoder.decode(np.array([[3, 4, 1]], np.int32))
    decoder.decode(np.array([[5, 6, 7, 8, 1], [9, 1, 0, 0, 0]], np.int32))
    assert decoder.decode.experimental_get_tracing_count() == 1


def test_batches_decoded_in_parallel_give_the_one_at_a_time_results_in_input_order():
    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(), f"{TINY},vocab_size=12")
    keras.utils.set_random_seed(1)
    decoder = Decoder(build_model(hparams), dataclasses.replace(hparams.decode, extra_length=6))
    problem = problems.get("algorithmic_reverse")()
    rng = np.random.default_rng(3)
    lines = ["".join(map(str, rng.integers(0, 10, rng.integers(1, 15)))) for _ in range(23)] + ["", "7"]
    one_at_a_time = decode_lines(problem, decoder.decode, lines, batch_size=3)
    in_parallel = decode_lines(problem, decoder.decode, lines, batch_size=3, parallel_batches=3)
    assert len({round(h[0].score, 3) for h in one_at_a_time}) > 15  # distinct scores, so a swap would show
    assert [[h.text for h in hyps] for hyps in in_parallel] == [[h.text for h in hyps] for hyps in one_at_a_time]
    for parallel_hyps, serial_hyps in zip(in_parallel, one_at_a_time):
        np.testing.assert_allclose([h.score for h in parallel_hyps], [h.score for h in serial_hyps], atol=1e-5)
    with pytest.raises(UserError, match="parallel_batches must be at least 1"):
        decode_lines(problem, decoder.decode, lines, batch_size=3, parallel_batches=0)


# float32, and bfloat16 (which `auto` picks on a CPU with native bfloat16; a CPU without emulates it), where the
# cached steps and the full pass multiply in different shapes and round differently: a tolerance of bfloat16's
# rounding, still far below what a row reading another beam's history changes.
# With word_pointer and open_phrases, each beam also carries the words it has begun and the phrases it has open,
# which must follow it as the ancestry does.
@pytest.mark.parametrize("settle_every, mixed_precision, tolerance, overrides", [
    pytest.param(3, "none", 1e-4, "", marks=pytest.mark.isa), pytest.param(16, "none", 1e-4, "", marks=pytest.mark.isa),
    pytest.param(16, "mixed_bfloat16", 0.03, "", marks=pytest.mark.isa_bfloat16),
    (3, "none", 1e-4, BOTH)])
def test_every_beam_score_equals_rescoring_its_hypothesis_with_the_full_pass(settle_every, mixed_precision,
                                                                             tolerance, overrides, monkeypatch):
    # The cached search keeps a sentence's beams side by side in cache slots and follows the
    # beams through the per-row ancestry alone. A row that read another beam's history would
    # give its hypothesis a score the teacher-forced full pass does not.
    monkeypatch.setattr(cached_step, "SETTLE_EVERY", settle_every)
    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(), f"{TINY},vocab_size=12,{overrides}")
    keras.utils.set_random_seed(4)  # weights under which 3 sentences x 4 beams leave few empty finished slots
    with layers_compute_in(mixed_precision):
        model = build_model(hparams)
    if overrides:
        set_tables(model, word_starts=[2, 5, 8, 9])
    alpha, extra = 0.6, 7
    decoder = Decoder(model, dataclasses.replace(hparams.decode, beam_size=4, alpha=alpha, extra_length=extra))
    inputs = np.array([[5, 7, 3, 9, 1], [4, 4, 8, 1, 0], [11, 2, 6, 10, 1]], np.int32)
    ids, scores = (t.numpy() for t in decoder.decode(inputs))
    max_lengths = (inputs != 0).sum(axis=1) + extra
    rescored = 0
    for b, k in np.ndindex(*scores.shape):
        if scores[b, k] == -np.inf:  # an empty finished slot: fewer than K hypotheses finished
            assert not ids[b, k].any()
            continue
        tokens = list(ids[b, k, :max_lengths[b]])
        length = tokens.index(1) + 1 if 1 in tokens else max_lengths[b]
        targets = np.array([tokens[:length]], np.int32)
        logits = model({"inputs": inputs[b:b + 1], "targets": targets}).numpy()[0].astype(np.float64)  # [length, V]
        log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
            - logits.max(-1, keepdims=True)
        expected = log_probs[np.arange(length), targets[0]].sum() / ((5 + length) / 6) ** alpha
        np.testing.assert_allclose(scores[b, k], expected, rtol=tolerance, atol=tolerance)
        rescored += 1
    assert rescored >= 10
    # The rescored beams of a sentence differ: each went its own way through the slots.
    assert all(len({tuple(h) for h, s in zip(ids[b], scores[b]) if s > -np.inf}) == (scores[b] > -np.inf).sum()
               for b in range(3))


ORDER_INPUT = "0123456\n\n98\n5550011\n   \n1\n"
BF16_INPUT = "0123456\n98\n5550011\n"


def _bad_utf8(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"0123\n45\xff6\n")
    return path


# Refusals the decoder's flags make (absl) and one the library makes, each shown from the command line:
# exit code 2, one line, no traceback, no output file. The library's other refusals are tested in-process below.
CLI_REFUSALS = {
    "invalid_utf8": "line 2 is not valid UTF-8",
    "zero_parallel_batches": "--parallel_batches=0: 0 is not a positive integer",
    "unknown_precision": "--mixed_precision=float8: value should be one of <auto|none|mixed_bfloat16|mixed_float16>",
}


@pytest.fixture(scope="module")
def cli(run, tmp_path_factory):
    """Every t2t-lite-decoder command of this module, run together (each process is mostly CPU)."""
    tmp = tmp_path_factory.mktemp("decoder_cli")
    (tmp / "order.txt").write_text(ORDER_INPUT)
    (tmp / "bf16.txt").write_text(BF16_INPUT)
    good = tmp / "good.txt"
    good.write_text("0123\n")
    refusals = {
        "invalid_utf8": [f"--decode_from_file={_bad_utf8(tmp)}"],
        "zero_parallel_batches": [f"--decode_from_file={good}", "--parallel_batches=0"],
        "unknown_precision": [f"--decode_from_file={good}", "--mixed_precision=float8"],
    }
    for name in refusals:
        (tmp / name).mkdir()
    commands = {
        "order": ("decoder", [f"--output_dir={run}", f"--decode_from_file={tmp / 'order.txt'}",
                              f"--decode_to_file={tmp / 'order.out'}", "--batch_size=2", "--parallel_batches=2",
                              "--mixed_precision=none"]),
        "bf16": ("decoder", [f"--output_dir={run}", f"--decode_from_file={tmp / 'bf16.txt'}",
                             "--mixed_precision=mixed_bfloat16"]),
        **{name: ("decoder", [f"--output_dir={run}", *flags, f"--decode_to_file={tmp / name / 'out.txt'}"])
           for name, flags in refusals.items()},
    }
    return tmp, run_tools(commands, max_running=3)


def test_decoder_cli_keeps_input_order_and_empty_lines(run, cli):
    tmp, results = cli
    assert results["order"].returncode == 0, results["order"].stderr
    outputs = (tmp / "order.out").read_text().split("\n")[:-1]
    assert len(outputs) == 6 and outputs[1] == "" and outputs[4] == ""
    # Each output equals decoding that line on its own (order restored after length sorting).
    opened = open_run(RunRequest(output_dir=run, decode=DecodeRequest(mixed_precision="none")))
    decoder = Decoder(opened.model, opened.decode_hparams)
    lines = ORDER_INPUT.split("\n")[:-1]
    alone = [decode_lines(opened.problem, decoder.decode, [line], batch_size=1)[0] for line in lines if line.strip()]
    assert [out for line, out in zip(lines, outputs) if line.strip()] == [hyps[0].text for hyps in alone]
    assert len(set(outputs)) > 3  # distinct outputs, so a swap would show


def test_decoder_cli_decodes_in_bfloat16_as_the_library_does(run, cli):
    _, results = cli
    result = results["bf16"]
    assert result.returncode == 0 and "mixed_bfloat16" in result.stderr, result.stderr
    opened = open_run(RunRequest(output_dir=run, decode=DecodeRequest(mixed_precision="mixed_bfloat16")))
    decoder = Decoder(opened.model, opened.decode_hparams)
    expected = decode_lines(opened.problem, decoder.decode, BF16_INPUT.split("\n")[:-1], opened.decode_hparams.batch_size)
    assert result.stdout == "".join(hyps[0].text + "\n" for hyps in expected)


@pytest.mark.parametrize("case", sorted(CLI_REFUSALS))
def test_cli_refuses_bad_input_with_one_line_and_no_output_file(cli, case):
    tmp, results = cli
    result = results[case]
    assert result.returncode == 2 and CLI_REFUSALS[case] in result.error, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert os.listdir(tmp / case) == []  # no output file, no temporary one left behind


def test_decoder_scores_an_algorithmic_problem_by_exact_match_not_bleu(run, tmp_path):
    """Digit strings without spaces score BLEU 0 even when exact: the problem's own metric is printed."""
    source, reference = tmp_path / "in.txt", tmp_path / "ref.txt"
    source.write_text("0123\n4567\n")
    out = io.StringIO()
    request = DecodeFileRequest(RunRequest(output_dir=run), str(source), decode_reference=str(reference))
    reference.write_text("3210\n7654\n")
    decode_file(request, out=out)
    outputs, report = out.getvalue().splitlines()[:2], out.getvalue().splitlines()[2:]
    name, value = open_run(RunRequest(output_dir=run)).problem.dev_metric(outputs, ["3210", "7654"], [])
    assert report == [f"exact match = {value:.2f}"] and name == "exact match"
    # The references made to be the outputs themselves: exact, 100.
    reference.write_text("".join(line + "\n" for line in outputs))
    out = io.StringIO()
    decode_file(request, out=out)
    assert out.getvalue().splitlines()[2:] == ["exact match = 100.00"]


def test_the_reference_report_is_the_problems_own():
    """Text problems get BLEU, chrF2 and TER; one with its own metric but the default report gets its metric."""
    from t2t_lite.data.problem import Problem
    from t2t_lite.metrics.bleu import problem_report

    class Text(Problem):
        pass

    class Counted(Problem):
        def dev_metric(self, outputs, references, sources):
            return "matches", float(sum(o == r for o, r in zip(outputs, references)))

    class Reported(Counted):
        def score(self, outputs, references, sources):
            return ["its own report"]

    outputs, references = ["a b c d", "e f"], ["a b c d", "e g"]
    text = problem_report(Text.__new__(Text), outputs, references, [])
    assert [line.split(" ")[0] for line in text] == ["BLEU", "BLEU", "chrF2", "TER"]
    assert problem_report(Counted.__new__(Counted), outputs, references, []) == ["matches = 1.00"]
    assert problem_report(Reported.__new__(Reported), outputs, references, []) == ["its own report"]


@pytest.mark.parametrize("case, message", [
    ("missing_checkpoint", "no checkpoint"),
    ("other_hparams_set", "was trained with hparams set 'transformer_tiny', not 'transformer_base'"),
    ("unreadable_input", "cannot read"),
    ("invalid_utf8", "line 2 is not valid UTF-8"),
    ("bad_symbol", "input line 1"),
    ("zero_parallel_batches", "parallel_batches must be at least 1"),
])
def test_bad_input_is_refused_before_any_output_file(run, tmp_path, case, message):
    """What the decoder command calls (decode_file) refuses; the command's one-line form is tested above."""
    good = tmp_path / "in.txt"
    good.write_text("0123\n")
    (tmp_path / "sym.txt").write_text("01x3\n")
    output = tmp_path / "out.txt"
    settings = {"missing_checkpoint": ({"output_dir": str(tmp_path / "empty")}, good, {}),
                "other_hparams_set": ({"hparams_set": "transformer_base"}, good, {}),
                "unreadable_input": ({}, tmp_path / "nope.txt", {}),
                "invalid_utf8": ({}, _bad_utf8(tmp_path), {}),
                "bad_symbol": ({}, tmp_path / "sym.txt", {}),
                "zero_parallel_batches": ({}, good, {"parallel_batches": 0})}
    run_settings, source, file_settings = settings[case]
    request = RunRequest(**{"output_dir": run, **run_settings})
    with pytest.raises(UserError, match=message):
        decode_file(DecodeFileRequest(request, str(source), decode_to_file=str(output), **file_settings))
    assert not output.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


def test_checkpoint_of_a_different_shape_is_reported(run, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(), f"{TINY},d_model=16,vocab_size=12")
    save_spec(RunDir(str(other)), RunSpec("algorithmic_reverse", "transformer_tiny", TINY, hparams))
    name = os.path.basename(tf.train.latest_checkpoint(run))
    for path in glob.glob(f"{run}/{name}.*"):
        shutil.copy(path, other)
    (other / "checkpoint").write_text(f'model_checkpoint_path: "{name}"\n')
    with pytest.raises(UserError, match="does not fit hparams set"):
        open_run(RunRequest(output_dir=str(other)))


@pytest.mark.parametrize("beam_size", [1, 3])
def test_forced_length_makes_every_output_exactly_that_long(run, beam_size):
    opened = open_run(RunRequest(output_dir=run, decode=DecodeRequest(beam_size=beam_size, extra_length=8)))
    model, decode = opened.model, opened.decode_hparams
    inputs = np.array([[3, 4, 1, 0], [5, 6, 7, 1]], np.int32)
    free = Decoder(model, decode).decode(inputs)[0].numpy()
    assert (free[:, 0] == 1).any(axis=-1).all()  # left alone, the trained model stops early
    nine = np.full([2], 9, np.int32)
    forced, scores = Decoder(model, decode).search(inputs, nine, min_lengths=nine)
    forced, scores = forced.numpy(), scores.numpy()  # [B, K, 9], [B, K]
    assert forced.shape == (2, beam_size, 9)
    # Each output's own length: up to and with its EOS, or its tokens before any PAD when it has no EOS.
    has_eos = (forced == 1).any(axis=-1)  # [B, K]
    lengths = np.where(has_eos, (forced == 1).argmax(axis=-1) + 1, (forced != 0).cumprod(axis=-1).sum(axis=-1))
    assert (lengths == 9).all(), lengths
    assert (forced[:, :, :8] > 1).all()  # 8 real tokens: neither EOS nor PAD before position 9
    assert np.isfinite(scores).all()  # every slot holds a hypothesis (an empty one scores -inf)


@pytest.mark.parametrize("precision, compute_dtype", [("mixed_bfloat16", "bfloat16"), ("mixed_float16", "float16")])
def test_a_float32_run_decodes_in_reduced_precision_to_nearly_the_float32_results(run, precision, compute_dtype):
    opened = open_run(RunRequest(output_dir=run, decode=DecodeRequest(beam_size=3, extra_length=6, mixed_precision="none")))
    full, decode = opened.model, opened.decode_hparams
    reduced = open_run(RunRequest(output_dir=run, decode=DecodeRequest(mixed_precision=precision))).model
    inputs = np.array([[3, 4, 1, 0], [5, 6, 7, 1]], np.int32)
    assert reduced.encode(inputs, training=False)[0].dtype == compute_dtype  # the matmuls really run reduced
    assert len(reduced.weights) == len(full.weights)
    for reduced_weight, full_weight in zip(reduced.weights, full.weights):  # the checkpoint's float32 weights
        assert reduced_weight.dtype == "float32"
        np.testing.assert_array_equal(reduced_weight.numpy(), full_weight.numpy())
    problem = problems.get("algorithmic_reverse")()
    rng = np.random.default_rng(5)
    lines = ["".join(map(str, rng.integers(0, 10, rng.integers(2, 12)))) for _ in range(24)]
    expected = [hyps[0] for hyps in decode_lines(problem, Decoder(full, decode).decode, lines, batch_size=8)]
    got = [hyps[0] for hyps in decode_lines(problem, Decoder(reduced, decode).decode, lines, batch_size=8)]
    same = [e.text == g.text for e, g in zip(expected, got)]
    # A briefly trained model has near-ties that reduced precision may flip: bfloat16 flipped 2 of 24 on a
    # CPU with bfloat16 units and up to 5 on an AVX2 CPU that emulates them (its sums round more often).
    assert sum(same) >= 18, f"{precision} changed {24 - sum(same)} of 24 best outputs"
    differences = np.array([abs(e.score - g.score) for e, g, s in zip(expected, got, same) if s])
    # Close (bfloat16 keeps 8 bits: up to 0.052 seen on an AVX2 CPU), and not the float32 computation itself.
    assert differences.max() < 0.1 and differences.max() > 0
