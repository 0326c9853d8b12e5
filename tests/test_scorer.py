"""Scoring given translations: beam search's own scores, ensembles, batching and order, the command line."""
import dataclasses
import io
import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite import config
from t2t_lite.decoding.batching import decode_lines
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.decoding.scoring import score_pairs
from t2t_lite.errors import UserError
from t2t_lite.bin.lines import ScoreFileRequest, score_file
from t2t_lite.models import build_model
from t2t_lite.registry import hparams_sets
from t2t_lite.decoding.request import DecodeRequest
from t2t_lite.run import RunRequest, open_run

from cli_helpers import run_tools
from precisions import PRECISIONS, SAME_ARITHMETIC_RTOL, full_pass_logits, log_softmax, score_tolerance
from trained_runs import REVERSE_TINY

SOURCES = ["0123456", "98", "5550011", "1", "31415926", "207"]


@pytest.fixture(scope="module", params=PRECISIONS)
def opened(reverse_run, request):
    """The run opened in float32 and in bfloat16, whatever `auto` would pick on this CPU."""
    return open_run(RunRequest(output_dir=reverse_run,
                               decode=DecodeRequest(beam_size=3, alpha=0.6, mixed_precision=request.param)))


def test_the_score_of_beam_searchs_output_is_the_score_beam_search_reported(opened):
    hp = opened.decode_hparams
    found = decode_lines(opened.problem, Decoder(opened.models, hp).decode, SOURCES, batch_size=4)
    pairs = [(source, h) for source, hyps in zip(SOURCES, found) for h in hyps if h.text]
    assert len(pairs) >= 12  # several beams per sentence, not only the best
    scores = score_pairs(opened.problem, opened.models, [s for s, _ in pairs], [h.text for _, h in pairs],
                         batch_size=5, alpha=hp.alpha)
    for (source, hypothesis), score in zip(pairs, scores):
        assert score.tokens == len(hypothesis.ids) + 1  # its EOS counts
        assert score.score == pytest.approx(score.log_prob / ((5 + score.tokens) / 6) ** 0.6, rel=1e-12)
        logits = full_pass_logits(opened.model, [*opened.problem.encode(source), 1], [*hypothesis.ids, 1])
        tolerance = score_tolerance(opened.mixed_precision, logits, hp.alpha)
        assert abs(score.score - hypothesis.score) <= tolerance, (source, hypothesis.text, tolerance)


def test_a_pairs_score_does_not_depend_on_its_batch_or_position_and_empty_pairs_are_none(opened):
    targets = ["6543210", "89", "", "1", "62951413", "702"]
    sources = SOURCES[:3] + ["   "] + SOURCES[4:]
    together = score_pairs(opened.problem, opened.models, sources, targets, batch_size=6, alpha=0.6)
    assert together[2] is None and together[3] is None  # an empty target, a blank source
    one_at_a_time = score_pairs(opened.problem, opened.models, sources, targets, batch_size=1, alpha=0.6)
    for i in (0, 1, 4, 5):
        alone = score_pairs(opened.problem, opened.models, [sources[i]], [targets[i]], batch_size=1, alpha=0.6)[0] \
            if i == 0 else one_at_a_time[i]
        assert alone.tokens == together[i].tokens == len(targets[i]) + 1
        np.testing.assert_allclose(alone.log_prob, together[i].log_prob, rtol=1e-5)
    assert len({round(s.log_prob, 4) for s in together if s}) == 4  # distinct, so a mix-up would show


def test_an_ensemble_scores_with_the_mean_of_its_models_token_log_probs(opened):
    targets = ["6543210", "89", "1100555"]
    alone = score_pairs(opened.problem, opened.models, SOURCES[:3], targets, batch_size=2, alpha=0.6)
    twice = score_pairs(opened.problem, opened.models * 2, SOURCES[:3], targets, batch_size=2, alpha=0.6)
    for a, b in zip(alone, twice):
        np.testing.assert_allclose([b.log_prob, b.score], [a.log_prob, a.score], rtol=1e-6)
    # With an untrained second model: the mean of each token's log-prob sums to the mean of the two sums.
    other = build_model(config.apply_overrides(hparams_sets.get("transformer_tiny")(),
                                               f"{REVERSE_TINY},vocab_size={opened.problem.vocab_size}"))
    untrained = score_pairs(opened.problem, [other], SOURCES[:3], targets, batch_size=2, alpha=0.6)
    both = score_pairs(opened.problem, [opened.model, other], SOURCES[:3], targets, batch_size=2, alpha=0.6)
    for a, u, b in zip(alone, untrained, both):
        assert abs(a.log_prob - u.log_prob) > 1  # the models disagree
        np.testing.assert_allclose(b.log_prob, (a.log_prob + u.log_prob) / 2, rtol=1e-5)


def test_the_log_prob_is_the_numpy_log_softmax_of_the_models_logits(opened):
    model, ids = opened.model, [5, 6, 7, 1]
    # The logits from a graph, as the scorer makes them: run eagerly, a bfloat16 model rounds each op's output
    # on its own where the graph fuses them (a matmul with its bias), and the two differ by bfloat16 roundings.
    logits = tf.function(model)({"inputs": np.array([[2, 3, 4, 1]], np.int32),
                                 "targets": np.array([ids], np.int32)}).numpy()[0]
    score = score_pairs(opened.problem, opened.models, ["012"], ["345"], batch_size=1, alpha=1.0)[0]
    np.testing.assert_allclose(score.log_prob, log_softmax(logits)[np.arange(4), ids].sum(),
                               rtol=SAME_ARITHMETIC_RTOL)
    np.testing.assert_allclose(score.score, score.log_prob / 1.5, rtol=1e-6)


def test_score_file_refuses_misaligned_files_and_bad_targets_before_scoring(reverse_run, tmp_path):
    source, target, output = tmp_path / "src.txt", tmp_path / "tgt.txt", tmp_path / "out.txt"
    source.write_text("012\n34\n")
    target.write_text("210\n")
    request = ScoreFileRequest(RunRequest(output_dir=reverse_run), str(source), str(target), str(output))
    with pytest.raises(UserError, match="--target_file has 1 lines but --source_file has 2"):
        score_file(request)
    target.write_text("210\n4x\n")
    with pytest.raises(UserError, match="target line 2"):
        score_file(request)
    with pytest.raises(UserError, match="--output_file .* does not exist"):
        score_file(dataclasses.replace(request, output_file=str(tmp_path / "no" / "out.txt")))
    assert not output.exists() and not list(tmp_path.glob(".tmp-*"))


def test_the_cli_writes_one_line_per_pair_and_refuses_misaligned_files_in_one_line(reverse_run, opened, tmp_path):
    source, target, misaligned = tmp_path / "src.txt", tmp_path / "tgt.txt", tmp_path / "short.txt"
    source.write_text("0123\n\n98\n777\n")
    target.write_text("3210\n5\n89\n\n")
    misaligned.write_text("3210\n")
    # Two processes, started together.
    results = run_tools({
        "scores": ("scorer", [f"--output_dir={reverse_run}", f"--source_file={source}", f"--target_file={target}",
                              f"--output_file={tmp_path / 'scores.tsv'}", f"--mixed_precision={opened.mixed_precision}"]),
        "misaligned": ("scorer", [f"--output_dir={reverse_run}", f"--source_file={source}",
                                  f"--target_file={misaligned}", f"--output_file={tmp_path / 'no.tsv'}"]),
    }, max_running=2)
    assert results["scores"].returncode == 0, results["scores"].stderr
    lines = (tmp_path / "scores.tsv").read_text().split("\n")[:-1]
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""
    expected = score_pairs(opened.problem, opened.models, ["0123", "98"], ["3210", "89"], batch_size=2,
                           alpha=opened.decode_hparams.alpha)
    for line, want in zip((lines[0], lines[2]), expected):
        log_prob, tokens, score = line.split("\t")
        assert int(tokens) == want.tokens
        np.testing.assert_allclose([float(log_prob), float(score)], [want.log_prob, want.score], atol=2e-6)
    assert results["misaligned"].returncode == 2
    assert results["misaligned"].error == "--target_file has 1 lines but --source_file has 4; they must be line-aligned"
    assert not (tmp_path / "no.tsv").exists()
    # The command calls score_file with its flags; without --output_file the scores go to `out`. A model
    # ensembled with itself writes what the model alone wrote (to float32 rounding).
    written = io.StringIO()
    checkpoint = opened.checkpoint
    ensembled = RunRequest(checkpoint_path=f"{checkpoint},{checkpoint}",
                           decode=DecodeRequest(mixed_precision=opened.mixed_precision))
    score_file(ScoreFileRequest(ensembled, str(source), str(target)), out=written)
    def values(text_lines):  # a blank line (an empty pair) has none
        return [[float(v) for v in line.split("\t")] if line else [] for line in text_lines]

    ensemble, alone = values(written.getvalue().split("\n")[:-1]), values(lines)
    assert [len(row) for row in ensemble] == [len(row) for row in alone]
    for ensemble_row, row in zip(ensemble, alone):  # the mean of two equal log-probs may round in the 7th digit
        np.testing.assert_allclose(ensemble_row, row, atol=2e-6)


def test_an_ensemble_of_runs_with_different_vocabularies_is_refused_before_scoring(reverse_run, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(reverse_run, other)
    spec = json.loads((other / "hparams.json").read_text())
    spec["hparams"]["model"]["vocab_size"] += 1
    (other / "hparams.json").write_text(json.dumps(spec))
    mine, theirs = tf.train.latest_checkpoint(reverse_run), tf.train.latest_checkpoint(str(other))
    (tmp_path / "src.txt").write_text("012\n")
    request = ScoreFileRequest(RunRequest(checkpoint_path=f"{mine},{theirs}"), str(tmp_path / "src.txt"),
                               str(tmp_path / "src.txt"), str(tmp_path / "out.txt"))
    with pytest.raises(UserError, match="an ensemble's models must share one vocabulary"):
        score_file(request)
    assert not (tmp_path / "out.txt").exists()
