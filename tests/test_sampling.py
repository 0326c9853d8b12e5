"""The greedy decoder driven by scripted logits, with hand-worked expectations.

Bigram scripts: the logits are log P(next | previous token). Vocabulary:
0 <pad> (also the start id), 1 </s>, 2 a, 3 b.
"""
import numpy as np
import tensorflow as tf

from t2t_lite.decoding.sampling import greedy_decode

from scripted_logits import bigram_fn, seqs


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


def test_xla_compiled_greedy_matches_eager():
    fn, _ = random_bigram(seed=4)
    max_lengths, min_lengths = tf.constant([3, 9, 5]), tf.constant([3, 0, 2])

    def greedy(max_lengths, min_lengths):
        return greedy_decode(fn, {}, 3, max_lengths, min_decode_lengths=min_lengths)

    xla_ids, xla_scores = tf.function(greedy, jit_compile=True)(max_lengths, min_lengths)
    ids, scores = greedy(max_lengths, min_lengths)
    np.testing.assert_array_equal(xla_ids, ids)
    np.testing.assert_allclose(xla_scores, scores, rtol=1e-5)
