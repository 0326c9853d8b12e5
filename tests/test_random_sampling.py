"""Sampling one output per sentence: the distribution it draws from, its scores, seeds, and the Decoder's use of it."""
import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

import t2t_lite.hparams  # noqa: F401
from t2t_lite import config
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.decoding.sampling import SamplingSettings, greedy_decode, sampled_choice
from t2t_lite.models import build_model
from t2t_lite.registry import hparams_sets

from trained_runs import REVERSE_TINY as TINY

NEG_INF = -np.inf


def row_keys(count):
    return tf.constant([f"row {i}" for i in range(count)])


def log_softmax(x):
    top = x.max(-1, keepdims=True)
    return x - top - np.log(np.exp(x - top).sum(-1, keepdims=True))


def test_token_frequencies_follow_the_tempered_softmax_over_the_top_k():
    # Every step sees the same logits; PAD and EOS are impossible, so each of the 3000 rows draws 3 tokens.
    logits = np.array([NEG_INF, NEG_INF, 1.0, 0.2, 2.0, -0.5, 0.9, 0.0], np.float32)  # V = 8
    temperature, k, rows, steps = 0.7, 4, 3000, 3
    table = tf.constant(np.tile(logits, [rows, 1]))

    def fn(ids, step, state):
        return table, state

    settings = SamplingSettings(temperature=temperature, top_k=k, seed=11)
    ids, _ = greedy_decode(fn, {}, rows, tf.fill([rows], steps), choose_fn=sampled_choice(settings, row_keys(rows)))
    counts = np.bincount(ids.numpy().ravel(), minlength=len(logits))
    top = np.argsort(-logits, kind="stable")[:k]  # ids 4, 2, 6, 3
    outside = np.setdiff1d(np.arange(len(logits)), top)
    assert counts[outside].sum() == 0, counts
    expected_probs = np.exp(logits[top] / temperature - np.logaddexp.reduce(logits[top] / temperature))
    expected = expected_probs * rows * steps
    chi_square = ((counts[top] - expected) ** 2 / expected).sum()
    # 16.27 is the 99.9% quantile of chi-square with k - 1 = 3 degrees of freedom. Ignoring the
    # temperature (probabilities .54/.20/.18/.09 instead of .66/.16/.14/.05) would give about 670.
    assert chi_square < 16.27, (counts[top], expected)


def test_the_score_is_the_sum_of_the_untempered_log_probs_of_the_sampled_tokens():
    rng = np.random.default_rng(2)
    vocab, rows = 9, 64
    bigram = (rng.normal(size=[vocab, vocab]) * 2).astype(np.float32)  # logits of the next token given the last
    bigram[:, 1] += 1.0  # EOS likely enough to end some rows
    table = tf.constant(bigram)
    max_lengths = rng.integers(1, 8, rows).astype(np.int32)
    min_lengths = np.minimum(rng.integers(0, 4, rows), max_lengths).astype(np.int32)

    def fn(ids, step, state):
        return tf.gather(table, ids[:, 0]), state

    settings = SamplingSettings(temperature=1.5, top_k=3, seed=5)
    ids, scores = greedy_decode(fn, {}, rows, max_lengths, min_decode_lengths=min_lengths,
                                choose_fn=sampled_choice(settings, row_keys(rows)))
    ids, scores = ids.numpy(), scores.numpy()
    ended = 0
    for row in range(rows):
        expected, previous = 0.0, 0
        for step in range(max_lengths[row]):
            token = ids[row, step]
            step_logits = bigram[previous].astype(np.float64)
            if step + 1 < min_lengths[row]:
                step_logits[1] = NEG_INF  # EOS impossible yet: the others renormalised
            assert token in np.argsort(-step_logits, kind="stable")[:3]
            expected += log_softmax(step_logits)[token]  # the whole vocabulary, temperature 1
            previous = token
            if token == 1:
                ended += 1
                break
        assert not ids[row, step + 1:].any()  # PAD after EOS or the max length
        np.testing.assert_allclose(scores[row], expected, rtol=1e-5, atol=1e-5)
    assert 5 < ended < rows  # both kinds of row were checked


def test_top_1_sampling_is_greedy_exactly():
    rng = np.random.default_rng(7)
    table = tf.constant(rng.normal(size=[6, 6]).astype(np.float32))

    def fn(ids, step, state):
        return tf.gather(table, ids[:, 0]), state

    lengths = tf.constant([5, 2, 6, 4])
    greedy = greedy_decode(fn, {}, 4, lengths)
    sampled = greedy_decode(fn, {}, 4, lengths, choose_fn=sampled_choice(
        SamplingSettings(temperature=3.0, top_k=1, seed=1), row_keys(4)))
    for got, want in zip(sampled, greedy):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("settings, message", [
    (dict(temperature=0.0), "`temperature` must be above 0"),
    (dict(temperature=-1.0), "`temperature` must be above 0"),
    (dict(top_k=-1), "`top_k` must be at least 0"),
])
def test_bad_settings_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        SamplingSettings(**settings)


@pytest.fixture(scope="module")
def tiny():
    """An untrained tiny reverse model (near-uniform outputs, so samples vary) and its decode hparams."""
    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(), f"{TINY},vocab_size=12")
    keras.utils.set_random_seed(3)
    return build_model(hparams), dataclasses.replace(hparams.decode, beam_size=4, extra_length=5)


def sources(count, seed=0):
    """count EOS-terminated random sources of 1-8 digits (ids 2-11), PAD-padded: int32 [count, 9]."""
    rng = np.random.default_rng(seed)
    inputs = np.zeros([count, 9], np.int32)
    for row in range(count):
        length = rng.integers(1, 9)
        inputs[row, :length], inputs[row, length] = rng.integers(2, 12, length), 1
    return inputs


def test_decoder_samples_are_reproducible_and_differ_between_seeds(tiny):
    model, decode = tiny
    inputs = sources(16)
    first = Decoder(model, decode, sampling=SamplingSettings(seed=1)).decode(inputs)
    again = Decoder(model, decode, sampling=SamplingSettings(seed=1)).decode(inputs)
    other = Decoder(model, decode, sampling=SamplingSettings(seed=2)).decode(inputs)
    assert first[0].shape[:2] == (16, 1) and first[1].shape == (16, 1)  # one sample, whatever the beam size
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])
    differing = sum(not np.array_equal(a, b) for a, b in zip(first[0].numpy(), other[0].numpy()))
    assert differing >= 12


def test_a_sentences_sample_does_not_depend_on_its_batch(tiny):
    model, decode = tiny
    inputs = sources(8, seed=1)
    decoder = Decoder(model, decode, sampling=SamplingSettings(temperature=1.2, seed=4))
    ids, scores = (t.numpy() for t in decoder.decode(inputs))
    reversed_ids, reversed_scores = (t.numpy() for t in decoder.decode(inputs[::-1]))
    np.testing.assert_array_equal(reversed_ids[::-1], ids)
    for row in (0, 5):
        alone = inputs[row:row + 1, :(inputs[row] != 0).sum()]  # less padding than in the batch
        alone_ids, alone_scores = (t.numpy() for t in decoder.decode(alone))
        np.testing.assert_array_equal(alone_ids[0, 0], ids[row, 0, :alone_ids.shape[2]])
        np.testing.assert_allclose(alone_scores[0], scores[row], atol=1e-5)
    np.testing.assert_allclose(reversed_scores[::-1], scores, atol=1e-5)


def test_decoder_top_1_sampling_equals_greedy(tiny):
    model, decode = tiny
    inputs = sources(8, seed=2)
    greedy = Decoder(model, dataclasses.replace(decode, beam_size=1)).decode(inputs)
    sampled = Decoder(model, decode, sampling=SamplingSettings(temperature=0.5, top_k=1, seed=9)).decode(inputs)
    for got, want in zip(sampled, greedy):
        np.testing.assert_array_equal(got, want)
