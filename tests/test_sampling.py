"""Greedy and sampling decoders driven by scripted logits, with hand-worked expectations.

Bigram scripts: the logits are log P(next | previous token). Vocabulary:
0 <pad> (also the start id), 1 </s>, 2 a, 3 b.
"""
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.decoding.sampling import greedy_decode, sample_decode

VOCAB = ["<pad>", "</s>", "a", "b"]


def seqs(texts, length):
    """Token ids of space-separated words, PAD-padded: int32 [len(texts), length]."""
    ids = np.zeros([len(texts), length], np.int32)
    for i, text in enumerate(texts):
        words = text.split()
        ids[i, :len(words)] = [VOCAB.index(w) for w in words]
    return ids


def bigram_fn(probs, calls=None):
    """symbols_to_logits_fn with logits log P(next | previous); rows not in `probs` are uniform.

    probs: {previous word: {next word: probability}}; "<pad>" is the start. calls: a
    tf.Variable counting the model calls.
    """
    table = np.zeros([len(VOCAB), len(VOCAB)], np.float32)  # [V, V]
    for prev, row in probs.items():
        table[VOCAB.index(prev)] = -np.inf
        for word, p in row.items():
            table[VOCAB.index(prev), VOCAB.index(word)] = np.log(p)
    table = tf.constant(table)

    def fn(ids, step, state):
        if calls is not None:
            calls.assign_add(1)
        return tf.gather(table, ids[:, 0]), state  # [B, V]

    return fn


def random_bigram(seed, vocab_size=7):
    """(fn, logits [V, V]) for a fixed random bigram table, EOS made likely enough to end some rows."""
    logits = np.random.default_rng(seed).normal(size=[vocab_size, vocab_size]).astype(np.float32) * 2
    logits[:, 1] += 1.0
    table = tf.constant(logits)
    return (lambda ids, step, state: (tf.gather(table, ids[:, 0]), state)), logits


def test_greedy_stops_each_row_at_eos_or_its_max_length():
    # start -> a .6 | </s> .3 | b .1;  a -> b .7 | </s> .2 | a .1;  b -> </s> .8 | a .2.
    # Greedy: a, b, </s>. Row 0 (max 4): a b </s> then PAD, .6*.7*.8 = .336.
    # Row 1 (max 2): a b, cut at its max, .6*.7 = .42. All rows done after 3 calls.
    calls = tf.Variable(0)
    fn = bigram_fn({"<pad>": {"a": .6, "</s>": .3, "b": .1}, "a": {"b": .7, "</s>": .2, "a": .1},
                    "b": {"</s>": .8, "a": .2}}, calls)
    ids, scores = greedy_decode(fn, {}, 2, tf.constant([4, 2]))
    np.testing.assert_array_equal(ids, seqs(["a b </s>", "a b"], 4))
    np.testing.assert_allclose(scores, np.log([.336, .42]), rtol=1e-6)
    assert calls.numpy() == 3


def test_greedy_min_decode_length():
    # start -> </s> .5 | a .3 | b .2;  a -> </s> .6 | b .3 | a .1;  b -> </s> .9 | a .05 | b .05.
    probs = {"<pad>": {"</s>": .5, "a": .3, "b": .2}, "a": {"</s>": .6, "b": .3, "a": .1},
             "b": {"</s>": .9, "a": .05, "b": .05}}
    ids, scores = greedy_decode(bigram_fn(probs), {}, 1, tf.constant([4]))
    np.testing.assert_array_equal(ids, seqs(["</s>"], 4))
    np.testing.assert_allclose(scores, np.log([.5]), rtol=1e-6)
    # min 3: EOS masked at steps 0 and 1, renormalising: start -> a .6 | b .4; a -> b .75 | a .25.
    # step 2 may end: b -> </s> .9. Score .6*.75*.9 = .405.
    ids, scores = greedy_decode(bigram_fn(probs), {}, 1, tf.constant([4]), min_decode_lengths=tf.constant([3]))
    np.testing.assert_array_equal(ids, seqs(["a b </s>"], 4))
    np.testing.assert_allclose(scores, np.log([.405]), rtol=1e-6)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("temperature", [0.5, 1.0, 3.0])
def test_top_1_sampling_equals_greedy(seed, temperature):
    fn, _ = random_bigram(seed)
    max_lengths = tf.constant([3, 8, 12, 1])
    greedy_ids, greedy_scores = greedy_decode(fn, {}, 4, max_lengths)
    ids, scores = sample_decode(fn, {}, 4, max_lengths, temperature=temperature, top_k=1, seed=seed)
    np.testing.assert_array_equal(ids, greedy_ids)
    np.testing.assert_array_equal(scores, greedy_scores)


def test_samples_stay_in_the_top_k_and_score_model_log_probs():
    fn, logits = random_bigram(seed=7)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))  # [V, V]
    top_2 = np.argsort(-logits, axis=1)[:, :2]  # [V, 2]
    ids, scores = sample_decode(fn, {}, 64, tf.fill([64], 6), temperature=2.0, top_k=2, seed=1)
    for row, score in zip(ids.numpy(), scores.numpy(), strict=True):
        tokens = list(row)
        length = tokens.index(1) + 1 if 1 in tokens else 6
        steps = list(zip([0] + tokens[:length - 1], tokens[:length], strict=True))  # (previous, emitted)
        assert all(token in top_2[prev] for prev, token in steps)
        assert not any(tokens[length:])
        # Scores are the model's log-probs, not those of the tempered top-2 distribution.
        np.testing.assert_allclose(score, sum(log_probs[prev, token] for prev, token in steps), rtol=1e-5)


def test_seed_makes_sampling_reproducible():
    fn, _ = random_bigram(seed=2)
    first = sample_decode(fn, {}, 32, tf.fill([32], 8), seed=11)
    again = sample_decode(fn, {}, 32, tf.fill([32], 8), seed=11)
    other = sample_decode(fn, {}, 32, tf.fill([32], 8), seed=12)
    np.testing.assert_array_equal(first[0], again[0])
    assert not np.array_equal(first[0], other[0])


def test_temperature_flattens_the_distribution():
    # One step from the start row, P = (</s> .1, a .3, b .6). Temperature 2 samples
    # P ** (1/2) renormalised: (.316, .548, .775) / 1.639 = (.193, .334, .473).
    fn = bigram_fn({"<pad>": {"</s>": .1, "a": .3, "b": .6}})
    ids, _ = sample_decode(fn, {}, 4000, tf.ones([4000], tf.int32), temperature=2.0, seed=0)
    frequencies = np.bincount(ids.numpy()[:, 0], minlength=4) / 4000
    np.testing.assert_allclose(frequencies, [0, .193, .334, .473], atol=0.03)


def test_xla_compiled_decoders_match_eager():
    fn, _ = random_bigram(seed=4)
    max_lengths, min_lengths = tf.constant([3, 9, 5]), tf.constant([3, 0, 2])

    def greedy(max_lengths, min_lengths):
        return greedy_decode(fn, {}, 3, max_lengths, min_decode_lengths=min_lengths)

    xla_ids, xla_scores = tf.function(greedy, jit_compile=True)(max_lengths, min_lengths)
    ids, scores = greedy(max_lengths, min_lengths)
    np.testing.assert_array_equal(xla_ids, ids)
    np.testing.assert_allclose(xla_scores, scores, rtol=1e-5)
    # XLA's random bits need not match the CPU kernel's: check the contract, not the draws.
    sample = tf.function(lambda: sample_decode(fn, {}, 3, max_lengths, top_k=3, seed=5), jit_compile=True)
    ids, scores = sample()
    assert ids.shape == (3, 9) and scores.shape == (3,)
    assert not np.any(ids.numpy()[0, 3:]) and not np.any(ids.numpy()[2, 5:])


def test_rejects_bad_sampling_settings():
    fn, _ = random_bigram(seed=0)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        sample_decode(fn, {}, 1, tf.constant([3]), temperature=0.0)
    with pytest.raises(ValueError, match="top_k must be None or at least 1, got 0"):
        sample_decode(fn, {}, 1, tf.constant([3]), top_k=0)
