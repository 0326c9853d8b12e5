"""The Python API (t2t_lite.Translator): a run as an object, decoding as t2t-lite-decoder does."""
import dataclasses
import shutil

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite import Translator
from t2t_lite.decoding.batching import decode_lines
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.decoding.request import DecodeRequest
from t2t_lite.decoding.sampling import SamplingSettings
from t2t_lite.errors import UserError
from t2t_lite.run import RunRequest, open_run, restore_model
from t2t_lite.run_dir import (AVERAGED_SUBDIR, BEST_SUBDIR, HPARAMS_FILE, RunDir, checkpoint_step, load_spec,
                              spec_json)
from t2t_lite.training.checkpoint_dir import write_model_dir

from cli_helpers import run_forked
from precisions import BOTH_PRECISIONS, full_pass_logits, score_tolerance

LINES = ["1234", "", "98765", "305"]


@pytest.fixture(scope="module", params=BOTH_PRECISIONS)
def translator(reverse_run, request):
    return Translator.from_run(reverse_run, mixed_precision=request.param)


def test_translate_keeps_empty_lines_and_the_input_order(translator):
    together = translator.translate(LINES)
    assert together == [translator.translate([line])[0] for line in LINES]
    assert together[1] == "" and len(set(together)) == 4  # distinct outputs, so a swap would show


def test_translate_gives_the_decoders_outputs_and_scores_for_each_beam_size(translator, reverse_run):
    run = open_run(RunRequest(output_dir=reverse_run,
                              decode=DecodeRequest(mixed_precision=translator.decode.mixed_precision)))
    for beam_size in (1, 3):
        decoder = Decoder(run.model, dataclasses.replace(run.decode_hparams, beam_size=beam_size))
        expected = decode_lines(run.problem, decoder.decode, LINES, batch_size=2)
        got = translator.hypotheses(LINES, beam_size=beam_size, nbest=beam_size)
        assert [[h.text for h in hyps] for hyps in got] == [[h.text for h in hyps] for hyps in expected]
        # The Translator batches the lines its own way; a batch's shape may change the kernels' reduction order,
        # so the scores agree within 1e-4, not bit for bit.
        np.testing.assert_allclose([h.score for hyps in got for h in hyps],
                                   [h.score for hyps in expected for h in hyps], rtol=0, atol=1e-4)


def test_nbest_lists_are_best_first_and_start_with_the_single_best(translator):
    best = translator.translate(LINES)
    assert all(isinstance(text, str) for text in best)
    nbest = translator.hypotheses(LINES, nbest=3)
    assert [hyps[0].text for hyps in nbest] == best
    assert [len(hyps) for hyps in nbest] == [3, 1, 3, 3]
    for hyps in nbest:
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)



def _weights(translator) -> list[np.ndarray]:
    return [weight.numpy() for weight in translator.run.model.weights]


def test_checkpoint_choices_and_paths_open_those_checkpoints(reverse_run, translator, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(reverse_run, copy, ignore=shutil.ignore_patterns(AVERAGED_SUBDIR, BEST_SUBDIR))
    latest = tf.train.latest_checkpoint(str(copy))
    spec = load_spec(RunDir(str(copy)))
    # averaged/ and best/ as training writes them, each with weights of its own: the trained ones, moved by noise.
    paths, weights = {"latest": latest}, {}
    for subdir, seed in ((AVERAGED_SUBDIR, 1), (BEST_SUBDIR, 2)):
        model = restore_model(spec, latest)
        rng = np.random.default_rng(seed)
        for weight in model.weights:
            weight.assign(weight.numpy() + rng.normal(0, 0.3, weight.shape).astype(np.float32))
        weights[subdir] = [weight.numpy() for weight in model.weights]
        paths[subdir] = write_model_dir(model, RunDir(str(copy / subdir)), checkpoint_step(latest), {
            HPARAMS_FILE: spec_json(spec)})
    weights["latest"] = _weights(translator)  # reverse_run's newest checkpoint, which the copy holds too
    for choice, name in ((None, "averaged"), ("averaged", "averaged"), ("best", "best"), ("latest", "latest")):
        opened = Translator.from_run(str(copy), checkpoint=choice)
        assert opened.run.checkpoint == paths[name], choice
        for got, expected in zip(_weights(opened), weights[name], strict=True):
            np.testing.assert_array_equal(got, expected)
        if choice is None:  # what a user who names no checkpoint gets: the averaged model's outputs
            by_default = opened.translate(LINES)
    assert by_default != translator.translate(LINES)  # the newest checkpoint's outputs differ
    by_path = Translator.from_run(checkpoint=paths[BEST_SUBDIR])
    assert by_path.run.checkpoint == paths[BEST_SUBDIR]
    for got, expected in zip(_weights(by_path), weights[BEST_SUBDIR], strict=True):
        np.testing.assert_array_equal(got, expected)

    bare = tmp_path / "bare"
    shutil.copytree(reverse_run, bare, ignore=shutil.ignore_patterns(AVERAGED_SUBDIR, BEST_SUBDIR))
    assert Translator.from_run(str(bare)).run.checkpoint == tf.train.latest_checkpoint(str(bare))
    with pytest.raises(UserError, match="^no best checkpoint in `output_dir`"):
        Translator.from_run(str(bare), checkpoint="best")
    with pytest.raises(UserError, match="^no averaged checkpoint in `output_dir`"):
        Translator.from_run(str(bare), checkpoint="averaged")
    with pytest.raises(UserError, match="^no checkpoint at `checkpoint_path`"):
        Translator.from_run(checkpoint=str(bare / "ckpt-7"))


def test_mistakes_are_user_errors(translator):
    with pytest.raises(UserError, match="takes a list of sentences"):
        translator.translate("1234")
    with pytest.raises(UserError, match=r"^`nbest`=5 is more than the beam size 4"):
        translator.hypotheses(LINES, nbest=5)
    with pytest.raises(UserError, match="^`nbest` must be at least 1, got 0"):
        translator.hypotheses(LINES, nbest=0)
    with pytest.raises(UserError, match="as many targets as sources"):
        translator.score(["1"], [])


def test_the_score_of_each_translation_is_the_score_beam_search_gave_it(translator):
    hypotheses = translator.hypotheses(LINES)
    scores = translator.score(LINES, [hyps[0].text for hyps in hypotheses])
    assert scores[1] is None  # the empty line
    run = translator.run
    for hyps, score, line in zip(hypotheses, scores, LINES):
        if line:
            assert score.tokens == len(hyps[0].ids) + 1  # with EOS
            logits = full_pass_logits(run.model, [*run.problem.encode(line), 1], [*hyps[0].ids, 1])
            tolerance = score_tolerance(translator.decode.mixed_precision, logits, translator.decode.hparams.alpha)
            assert abs(score.score - hyps[0].score) <= tolerance, (line, hyps[0].text, tolerance)


def test_sampling_is_reproducible_and_gives_one_output(translator):
    settings = SamplingSettings(temperature=1.0, seed=7)
    first = translator.translate(LINES, sampling=settings)
    assert translator.translate(LINES, sampling=settings) == first and first[1] == ""
    with pytest.raises(UserError, match="sampling gives one output per sentence"):
        translator.hypotheses(LINES, nbest=2, sampling=settings)


def _translate_as_a_library_user(run: str, mixed_precision: str) -> None:
    """In a process of its own: `from t2t_lite import Translator` and nothing else, as the README shows."""
    import sys

    assert "t2t_lite.problems" not in sys.modules and "t2t_lite.hparams" not in sys.modules
    print("\n".join(Translator.from_run(run, mixed_precision=mixed_precision).translate(LINES)))


def test_a_library_user_needs_no_import_to_register_the_bundled_problems_and_sets(reverse_run, translator):
    code, out, err = run_forked(_translate_as_a_library_user, reverse_run, translator.decode.mixed_precision)
    assert code == 0, err[-2000:]
    assert out.splitlines() == translator.translate(LINES)
