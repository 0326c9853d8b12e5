"""n-best lists hold n: beam search returns K hypotheses per sentence, the finished ones first (best first),
then the best alive ones.

Scripted bigram logits, one table per sentence (the sentence index rides in the search state), over the
4-word vocabulary of scripted_logits.py: 0 <pad> (also the start id), 1 </s>, 2 a, 3 b. Every expected
score is recomputed here in numpy from the tables, never copied from the search.
"""
import itertools

import numpy as np
import pytest
import tensorflow as tf
from scripted_logits import VOCAB

from t2t_lite.decoding.batching import decode_lines
from t2t_lite.decoding.beam_search import beam_search

EOS, ALPHA, BEAM, NBEST = 1, 0.6, 5, 3

SCRIPTS = [
    # The best output is the empty one, finished at step 0; nothing else can ever finish, so the other
    # hypotheses are still alive at the max length (3): the sentence of the bug, which returned </s> alone.
    {"<pad>": {"</s>": .5, "a": .3, "b": .2}, "a": {"a": .7, "b": .3}, "b": {"a": .6, "b": .4}},
    # </s>, a </s> and b </s> finish by step 1, beyond the reach of alive a b and b b (.03, .02 before any
    # penalty): the search stops at 2 of the max length 10 tokens, and the two alive fill the last slots.
    {"<pad>": {"</s>": .5, "a": .3, "b": .2}, "a": {"</s>": .9, "b": .1}, "b": {"</s>": .9, "b": .1}},
    # a a a, alive at the max length (3), scores better than every finished hypothesis, which still come
    # first: a search that ran out of length does not prefer what it cut off.
    {"<pad>": {"</s>": .1, "a": .6, "b": .3}, "a": {"</s>": .02, "a": .98}, "b": {"b": 1.0}},
]
MAX_LENGTHS = [3, 10, 3]


def log_probs_table(script):
    """float32 [V, V]: log P(next | previous), the log-softmax of the script's log-probs (-inf for a word a
    row does not name; a row the script has no entry for is uniform)."""
    logits = np.zeros([len(VOCAB), len(VOCAB)])
    for prev, row in script.items():
        logits[VOCAB.index(prev)] = [np.log(row[word]) if word in row else -np.inf for word in VOCAB]
    return logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))


TABLES = np.stack([log_probs_table(script) for script in SCRIPTS]).astype(np.float32)  # [S, V, V]


def scripted_fn(ids, step, state):
    """symbols_to_logits_fn: row n's logits are its sentence's table at its previous token."""
    rows = tf.stack([state["sentence"], ids[:, 0]], axis=1)  # [N, 2]
    return tf.gather_nd(tf.constant(TABLES), rows), state  # [N, V]


def expected_score(sentence, tokens):
    """The search's score of `tokens` (EOS included if it ended): summed log-probs / GNMT penalty of its length."""
    previous = [0] + list(tokens[:-1])
    log_prob = sum(float(TABLES[sentence, p, t]) for p, t in zip(previous, tokens))
    return log_prob / ((5 + len(tokens)) / 6) ** ALPHA


def hypothesis(row):
    """A returned beam's tokens: up to and with its EOS, or every token of an alive one (no PAD is emitted)."""
    tokens = [int(t) for t in row if t != 0]
    return tokens[:tokens.index(EOS) + 1] if EOS in tokens else tokens


def exhaustive_nbest(sentence, max_length, n):
    """The n best of every hypothesis a search to max_length can end with, by enumeration: each finished one
    (EOS at or before the max length) and each unfinished one of the max length."""
    found = []
    for length in range(1, max_length + 1):
        for prefix in itertools.product([2, 3], repeat=length - 1):
            found.append(list(prefix) + [EOS])
    found += [list(tokens) for tokens in itertools.product([2, 3], repeat=max_length)]
    scored = [(expected_score(sentence, tokens), tokens) for tokens in found]
    return [tokens for _, tokens in sorted(scored, key=lambda pair: -pair[0])[:n]]


def search(compact_finished):
    ids, scores = beam_search(scripted_fn, {"sentence": tf.range(len(SCRIPTS))}, len(SCRIPTS), BEAM, len(VOCAB),
                              tf.constant(MAX_LENGTHS), ALPHA, final_beams=NBEST, compact_finished=compact_finished)
    return ids.numpy(), scores.numpy()


@pytest.mark.parametrize("compact_finished", [False, True])
def test_every_sentence_gets_k_distinct_hypotheses_best_score_first_each_scored_as_the_logits_give(compact_finished):
    ids, scores = search(compact_finished)  # [B, K, T], [B, K]
    for sentence in range(len(SCRIPTS)):
        hyps = [hypothesis(row) for row in ids[sentence]]
        assert np.isfinite(scores[sentence]).all(), scores[sentence]  # K hypotheses, not only the finished
        assert len({tuple(h) for h in hyps}) == BEAM
        finished = [EOS in h for h in hyps]
        assert finished == sorted(finished, reverse=True)  # the finished first, then the alive
        for group in (True, False):  # each best first
            assert (np.diff(scores[sentence][np.array(finished) == group]) <= 0).all(), scores[sentence]
        for tokens, score in zip(hyps, scores[sentence]):
            np.testing.assert_allclose(score, expected_score(sentence, tokens), rtol=1e-5)
    bug, early, cut_off = ([hypothesis(row) for row in ids[s]] for s in range(len(SCRIPTS)))
    # The empty output is the best; the next two are the best unfinished hypotheses of the max length.
    assert bug[:NBEST] == exhaustive_nbest(0, MAX_LENGTHS[0], NBEST) == [[EOS], [2, 2, 2], [3, 2, 2]]
    # Stopped early, the first final_beams (finished) are final; alive ones, scored at their length of 2
    # tokens (not at the max length), fill the slots after them.
    assert early == [[EOS], [2, EOS], [3, EOS], [2, 3], [3, 3]]
    # Every finished hypothesis ahead of a a a and b b b, which outscore them all.
    assert cut_off == [[EOS], [2, 2, EOS], [2, EOS], [2, 2, 2], [3, 3, 3]]
    assert scores[2][4] > scores[2][0]


class WordCodec:
    """Text <-> ids over VOCAB; a source line "s0" or "s1" names the script its sentence follows."""

    def encode(self, text):
        return [2 + int(text[1:])]

    def decode(self, ids):
        return " ".join(VOCAB[i] for i in ids if i > EOS)


def test_decoded_lines_hold_nbest_hypotheses_finished_first_where_they_score_best():
    def decode_batch(inputs):  # [B, T_src] -> ([B, K, T], [B, K]); the source's first id picks the script
        sentence = tf.constant(inputs[:, 0] - 2)
        max_lengths = tf.gather(tf.constant(MAX_LENGTHS), sentence)
        return beam_search(scripted_fn, {"sentence": sentence}, len(inputs), BEAM, len(VOCAB), max_lengths, ALPHA,
                           final_beams=NBEST, compact_finished=True)

    lines = decode_lines(WordCodec(), decode_batch, ["s0", "s1", "s0"], batch_size=2, nbest=NBEST)
    assert [len(hyps) for hyps in lines] == [NBEST] * 3
    assert [h.text for h in lines[0]] == ["", "a a a", "b a a"] == [h.text for h in lines[2]]
    for sentence, hyps in zip([0, 1, 0], lines):
        for h in hyps:
            tokens = list(h.ids) + ([EOS] if len(h.ids) < MAX_LENGTHS[sentence] else [])
            np.testing.assert_allclose(h.score, expected_score(sentence, tokens), rtol=1e-5)
