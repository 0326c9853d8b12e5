"""Beam search driven by scripted logits, with expected ids and scores worked out by hand.

Most tests use a bigram script: the logits are log P(next | previous token), so
a hypothesis' log-prob is the log of the product of the probabilities on its
path. Vocabulary: 0 <pad> (also the start id), 1 </s>, 2 a, 3 b.
Length penalty lp(n) = ((5 + n) / 6) ** alpha: lp(1) = 1 for every alpha;
with alpha 1, lp(2) = 7/6 and lp(3) = 8/6.
"""
import os

import numpy as np
import pytest
import tensorflow as tf
from scripted_logits import VOCAB, bigram_fn, seqs

from t2t_lite.decoding.beam_search import _Beams, _BeamSearch, beam_search
from t2t_lite.decoding.sampling import greedy_decode
from t2t_lite.decoding.search_state import NEG_INF, SplitState, repeated_rows


def search(fn, max_lengths, beam_size=2, alpha=0.0, min_lengths=None, final_beams=None):
    """beam_search over the 4-word vocabulary, as numpy."""
    ids, scores = beam_search(fn, {}, len(max_lengths), beam_size, len(VOCAB),
                              tf.constant(max_lengths, tf.int32), alpha, min_decode_lengths=min_lengths,
                              final_beams=final_beams)
    return ids.numpy(), scores.numpy()


# start -> a .6 | </s> .4;   a -> b .8 | </s> .2;   b -> </s> .7 | a .3
PENALTY_SCRIPT = {"<pad>": {"a": .6, "</s>": .4}, "a": {"b": .8, "</s>": .2}, "b": {"</s>": .7, "a": .3}}


def test_length_penalty_changes_the_winner():
    # K=2, max 3. step 0: a .6 alive; </s> .4 finishes (length 1).
    # step 1: a b .6*.8 = .48 alive; a </s> .6*.2 = .12 finishes (length 2).
    # step 2: a b </s> .48*.7 = .336 finishes (length 3); a b a .144 alive; max length.
    ids, scores = search(bigram_fn(PENALTY_SCRIPT), [3], alpha=0.0)
    # alpha 0: ln .4 = -0.916 > ln .336 = -1.091 > ln .12: the short one wins.
    np.testing.assert_array_equal(ids[0], seqs(["</s>", "a b </s>"], 3))
    np.testing.assert_allclose(scores[0], [np.log(.4), np.log(.336)], rtol=1e-6)
    ids, scores = search(bigram_fn(PENALTY_SCRIPT), [3], alpha=1.0)
    # alpha 1: ln .336 / (8/6) = -0.818 > ln .4 / 1 = -0.916 > ln .12 / (7/6) = -1.817.
    np.testing.assert_array_equal(ids[0], seqs(["a b </s>", "</s>"], 3))
    np.testing.assert_allclose(scores[0], [np.log(.336) / (8 / 6), np.log(.4)], rtol=1e-6)


def test_stops_early_when_no_alive_beam_can_beat_the_worst_finished():
    # start -> a .6 | </s> .4;  a -> </s> .6 | b .4. K=2, alpha 0, max 10.
    # step 0: </s> .4 finishes, a .6 alive. step 1: a </s> .36 finishes, a b .24 alive.
    # Worst finished ln .36 = -1.02 > best alive ln .24 / lp(10) = ln .24 = -1.43: stop after 2 calls.
    calls = tf.Variable(0)
    fn = bigram_fn({"<pad>": {"a": .6, "</s>": .4}, "a": {"</s>": .6, "b": .4}}, calls)
    ids, scores = search(fn, [10])
    assert calls.numpy() == 2
    np.testing.assert_array_equal(ids[0], seqs(["</s>", "a </s>"], 10))
    np.testing.assert_allclose(scores[0], np.log([.4, .36]), rtol=1e-6)


def test_keeps_decoding_while_an_alive_beam_can_enter_the_k_best():
    # start -> </s> .7 | a .3;  a -> b .9 | </s> .1;  b -> </s> .9 | a .1. K=2, alpha 0, max 10.
    # step 0: </s> .7 finishes. It beats alive a .3 (t2t's default bound would stop here),
    # but the second slot is empty. step 1: a </s> .03 finishes; alive a b .27 can still beat it.
    # step 2: a b </s> .243 finishes and evicts it; worst .243 > alive a b a .027: stop.
    calls = tf.Variable(0)
    fn = bigram_fn({"<pad>": {"</s>": .7, "a": .3}, "a": {"b": .9, "</s>": .1}, "b": {"</s>": .9, "a": .1}}, calls)
    ids, scores = search(fn, [10])
    assert calls.numpy() == 3
    np.testing.assert_array_equal(ids[0], seqs(["</s>", "a b </s>"], 10))
    np.testing.assert_allclose(scores[0], np.log([.7, .243]), rtol=1e-6)


def test_with_one_final_beam_it_stops_once_the_best_finished_is_beyond_every_alive_beam():
    # The script above with final_beams=1: after step 0, </s> .7 finished beats alive a .3 (and any
    # extension of it, alpha 0): the best is final, so one call, t2t's default bound.
    calls = tf.Variable(0)
    fn = bigram_fn({"<pad>": {"</s>": .7, "a": .3}, "a": {"b": .9, "</s>": .1}, "b": {"</s>": .9, "a": .1}}, calls)
    ids, scores = search(fn, [10], final_beams=1)
    assert calls.numpy() == 1
    np.testing.assert_array_equal(ids[0, 0], seqs(["</s>"], 10)[0])
    np.testing.assert_allclose(scores[0, 0], np.log(.7), rtol=1e-6)


def full_and_one_final_beam(seed):
    """Prefix-dependent random logits, 6 sentences of different max lengths, K=4, the paper's alpha: the
    search with all K final and with one, each as (ids, scores, calls of the model)."""
    max_lengths = tf.constant([3, 6, 9, 12, 15, 18])
    initial = {"sentence": tf.range(6), "history": tf.zeros([6, 18], tf.int32)}
    counts = []

    def counted(fn):
        calls = tf.Variable(0)
        counts.append(calls)

        def wrapped(ids, step, state):
            calls.assign_add(1)
            return fn(ids, step, state)
        return wrapped

    full = beam_search(counted(history_fn(seed, 18)), initial, 6, 4, 5, max_lengths, 0.6)
    one = beam_search(counted(history_fn(seed, 18)), initial, 6, 4, 5, max_lengths, 0.6, final_beams=1)
    return [(ids.numpy(), scores.numpy(), calls.numpy()) for (ids, scores), calls in zip((full, one), counts)]


def test_one_final_beam_gives_every_sentences_best_of_the_full_search_in_fewer_steps():
    saved_steps = 0
    for seed in range(4):
        (full_ids, full_scores, full_calls), (ids, scores, calls) = full_and_one_final_beam(seed)
        np.testing.assert_array_equal(ids[:, 0], full_ids[:, 0])
        np.testing.assert_array_equal(scores[:, 0], full_scores[:, 0])
        assert calls <= full_calls
        saved_steps += full_calls - calls
    assert saved_steps > 0, "final_beams=1 never stopped earlier: the bound still waits for all K"


def rows_counted(fn):
    """fn, and a variable adding up the rows it is called on."""
    rows = tf.Variable(0)

    def counted(ids, step, state):
        rows.assign_add(tf.shape(ids)[0])
        return fn(ids, step, state)
    return counted, rows


def split_history_fn(seed, max_length, beam):
    """history_fn with the sentence index in a SplitState's per_sentence part (one row per sentence)."""
    fn = history_fn(seed, max_length)

    def split_fn(ids, step, state):
        sentence = tf.repeat(state.per_sentence["sentence"], beam)  # [N]
        logits, new = fn(ids, step, {"sentence": sentence, "history": state.per_beam["history"]})
        return logits, SplitState(per_beam={"history": new["history"]}, per_sentence=state.per_sentence)
    return split_fn


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("traced", [False, True])
def test_dropping_finished_sentences_gives_the_same_search_on_fewer_rows(split, traced):
    # 8 sentences of very different max lengths: the short ones finish long before the others.
    beam, max_lengths = 3, tf.constant([2, 18, 3, 5, 18, 4, 9, 12])
    min_lengths = tf.constant([0, 3, 1, 0, 6, 2, 0, 4])
    for seed in range(3):
        if split:
            fn = split_history_fn(seed, 18, beam)
            initial = SplitState(per_beam={"history": tf.zeros([8 * beam, 18], tf.int32)},
                                 per_sentence={"sentence": tf.range(8)})
        else:
            fn, initial = history_fn(seed, 18), {"sentence": tf.range(8), "history": tf.zeros([8, 18], tf.int32)}
        found, rows = {}, {}
        for compact in (False, True):
            counted, rows[compact] = rows_counted(fn)

            def search_all(counted=counted, compact=compact, initial=initial):
                return beam_search(counted, initial, 8, beam, 5, max_lengths, 0.6, min_decode_lengths=min_lengths,
                                   compact_finished=compact)
            found[compact] = (tf.function(search_all, autograph=False) if traced else search_all)()
        np.testing.assert_array_equal(found[True][0], found[False][0])
        if os.environ.get("TF_ENABLE_ONEDNN_OPTS") == "0":
            # Without oneDNN, TensorFlow's Eigen softmax may round a row's last bit by how many rows it has.
            np.testing.assert_allclose(found[True][1], found[False][1], rtol=4 * np.finfo(np.float32).eps)
        else:
            np.testing.assert_array_equal(found[True][1], found[False][1])
        assert rows[True].numpy() < rows[False].numpy()


def test_finished_hypothesis_beats_later_alive_ones_which_fill_the_slots_left():
    # start -> a .9 | </s> .1;  a -> a .9 | b .1;  b -> a .6 | b .4. K=2, alpha 1, max 3.
    # step 0: </s> .1 finishes. Then nothing else finishes: alive a a a .729 scores
    # ln .729 / (8/6) = -0.24, better than ln .1 = -2.30, yet as in t2t the finished
    # hypothesis comes first; the best alive one fills the slot left.
    fn = bigram_fn({"<pad>": {"a": .9, "</s>": .1}, "a": {"a": .9, "b": .1}, "b": {"a": .6, "b": .4}})
    ids, scores = search(fn, [3], alpha=1.0)
    np.testing.assert_array_equal(ids[0], seqs(["</s>", "a a a"], 3))
    np.testing.assert_allclose(scores[0], [np.log(.1), np.log(.729) / (8 / 6)], rtol=1e-6)


# start -> a .7 | b .3;   a -> a .6 | b .4;   b -> a .8 | b .2  (EOS never possible)
NO_EOS_SCRIPT = {"<pad>": {"a": .7, "b": .3}, "a": {"a": .6, "b": .4}, "b": {"a": .8, "b": .2}}


def test_alive_beams_returned_when_nothing_finishes():
    # K=2, alpha 1. Sentence 0, max 3: step 1 keeps a a .42, a b .28 (b a .24 drops out);
    # step 2: a a a .252, a b a .28*.8 = .224 beat a a b .168, a b b .056.
    # Sentence 1, max 1: a .7, b .3. Scores are penalised at the max length.
    ids, scores = search(bigram_fn(NO_EOS_SCRIPT), [3, 1], alpha=1.0)
    np.testing.assert_array_equal(ids[0], seqs(["a a a", "a b a"], 3))
    np.testing.assert_allclose(scores[0], np.log([.252, .224]) / (8 / 6), rtol=1e-6)
    np.testing.assert_array_equal(ids[1], seqs(["a", "b"], 3))
    np.testing.assert_allclose(scores[1], np.log([.7, .3]), rtol=1e-6)


def test_per_sentence_max_length():
    # PENALTY_SCRIPT, alpha 0. Max 3 reaches a b </s> (see above); max 2 stops after
    # step 1 with </s> .4 and a </s> .12 finished, though the batch runs 3 steps.
    ids, scores = search(bigram_fn(PENALTY_SCRIPT), [2, 3])
    np.testing.assert_array_equal(ids[0], seqs(["</s>", "a </s>"], 3))
    np.testing.assert_allclose(scores[0], np.log([.4, .12]), rtol=1e-6)
    np.testing.assert_array_equal(ids[1], seqs(["</s>", "a b </s>"], 3))
    np.testing.assert_allclose(scores[1], np.log([.4, .336]), rtol=1e-6)


# start -> </s> .5 | a .35 | b .15;  a -> </s> .5 | a .3 | b .2;  b -> </s> .5 | a .1 | b .4
MIN_LENGTH_SCRIPT = {"<pad>": {"</s>": .5, "a": .35, "b": .15}, "a": {"</s>": .5, "a": .3, "b": .2},
                     "b": {"</s>": .5, "a": .1, "b": .4}}


def test_min_decode_lengths_force_the_length():
    # Without a minimum: </s> .5 finishes at step 0; step 1: a </s> .175 finishes (b </s>
    # .075 ranks third of 2K=4, outside the beam); worst finished .175 > best alive a a .105: stop.
    ids, _ = search(bigram_fn(MIN_LENGTH_SCRIPT), [3])
    np.testing.assert_array_equal(ids[0], seqs(["</s>", "a </s>"], 3))
    # min = max = 3: EOS masked at steps 0 and 1, renormalising the rest:
    # start -> a .7 | b .3;  a -> a .6 | b .4;  b -> a .2 | b .8.
    # step 1: a a .42, a b .28 stay (b b .24, b a .06 drop).
    # step 2: a a </s> .42*.5 = .21 and a b </s> .28*.5 = .14 rank first and second: both finish.
    ids, scores = search(bigram_fn(MIN_LENGTH_SCRIPT), [3], min_lengths=[3])
    np.testing.assert_array_equal(ids[0], seqs(["a a </s>", "a b </s>"], 3))
    np.testing.assert_allclose(scores[0], np.log([.21, .14]), rtol=1e-6)


def test_beam_one_is_greedy_where_t2t_is_not():
    # start -> a .6 | </s> .4;  a -> a .55 | </s> .45. Greedy: a a a, .6*.55*.55 = .1815.
    # t2t would finish </s> (ranked second of 2K=2) at step 0, then stop when a a .33 < .4 and
    # return </s>. Here EOS only finishes inside the beam (top K), so beam 1 follows greedy.
    fn = bigram_fn({"<pad>": {"a": .6, "</s>": .4}, "a": {"a": .55, "</s>": .45}})
    ids, scores = search(fn, [3], beam_size=1)
    np.testing.assert_array_equal(ids[0], seqs(["a a a"], 3))
    np.testing.assert_allclose(scores[0], [np.log(.1815)], rtol=1e-6)


def random_bigram_fn(seed, vocab_size=7):
    """A fixed random bigram table of logits [V, V], EOS made likely enough to end some rows."""
    logits = np.random.default_rng(seed).normal(size=[vocab_size, vocab_size]).astype(np.float32) * 2
    logits[:, 1] += 1.0
    table = tf.constant(logits)
    return lambda ids, step, state: (tf.gather(table, ids[:, 0]), state)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("min_lengths", [None, [2, 1, 4, 1]])
def test_beam_one_equals_greedy(seed, min_lengths):
    fn, max_lengths = random_bigram_fn(seed), tf.constant([2, 5, 9, 12])
    ids, scores = beam_search(fn, {}, 4, 1, 7, max_lengths, 0.0, min_decode_lengths=min_lengths)
    greedy_ids, greedy_scores = greedy_decode(fn, {}, 4, max_lengths, min_decode_lengths=min_lengths)
    np.testing.assert_array_equal(ids[:, 0], greedy_ids)
    np.testing.assert_array_equal(scores[:, 0], greedy_scores)


def per_sentence_fn(seed, num_sentences, vocab_size=7):
    """Random bigram logits per sentence; the state {"sentence": [N]} says whose row it is."""
    logits = np.random.default_rng(seed).normal(size=[num_sentences, vocab_size, vocab_size]) * 2
    logits[:, :, 1] += 0.5
    table = tf.constant(logits.astype(np.float32))  # [S, V, V]

    def fn(ids, step, state):
        rows = tf.stack([state["sentence"], ids[:, 0]], axis=1)  # [N, 2]
        return tf.gather_nd(table, rows), state  # [N, V]

    return fn


def test_sentence_decodes_the_same_alone_and_in_a_batch():
    # Same ids; scores equal up to float32 rounding only because TensorFlow's CPU exp/log
    # round an element differently (1 ulp) in the vectorised body and the scalar tail of a
    # buffer, so a row's position in the batch can flip its last bit.
    fn = per_sentence_fn(seed=3, num_sentences=3)
    max_lengths, min_lengths = [3, 9, 6], [0, 2, 4]
    batch_ids, batch_scores = beam_search(fn, {"sentence": tf.range(3)}, 3, 3, 7, tf.constant(max_lengths),
                                          0.6, min_decode_lengths=tf.constant(min_lengths))
    for b in range(3):
        ids, scores = beam_search(fn, {"sentence": tf.constant([b])}, 1, 3, 7, tf.constant(max_lengths[b:b + 1]),
                                  0.6, min_decode_lengths=tf.constant(min_lengths[b:b + 1]))
        np.testing.assert_array_equal(batch_ids[b, :, :max_lengths[b]], ids[0])
        np.testing.assert_array_equal(batch_ids[b, :, max_lengths[b]:], 0)
        np.testing.assert_allclose(batch_scores[b], scores[0], rtol=1e-6)


def history_fn(seed, max_length, vocab_size=5, buckets=101):
    """Logits that depend on the whole prefix, which only the state holds.

    The state {"sentence": [N], "history": [N, T]} records the id fed at each step, as a
    key/value cache records each position; the logits are a random row picked by a hash
    of the sentence and its history.
    """
    table = tf.constant(np.random.default_rng(seed).normal(size=[buckets, vocab_size]).astype(np.float32) * 2)
    weights = tf.constant([7 ** p for p in range(max_length)], tf.int32)  # [T]

    def fn(ids, step, state):
        history = state["history"] + tf.one_hot(step, max_length, dtype=tf.int32) * ids  # [N, T]
        bucket = (tf.reduce_sum(history * weights, axis=1) + 13 * step + 31 * state["sentence"]) % buckets  # [N]
        return tf.gather(table, bucket), {"sentence": state["sentence"], "history": history}  # [N, V]

    return fn


def teacher_forced_log_prob(fn, sentence, tokens, max_length):
    """Summed log-prob of `tokens` fed one at a time through fn with a fresh state of its own."""
    state = {"sentence": tf.constant([sentence]), "history": tf.zeros([1, max_length], tf.int32)}
    prev, total = 0, 0.0
    for step, token in enumerate(tokens):
        logits, state = fn(tf.constant([[prev]]), tf.constant(step), state)
        total += tf.nn.log_softmax(logits)[0, token].numpy()
        prev = token
    return total


def test_state_is_gathered_with_the_beams():
    # Each returned hypothesis, rescored through a state of its own, must get the score the
    # search gave it: a state row that drifted from its beam's ids would change the logits.
    # Seed 3 fills all 2 x 3 slots with hypotheses of lengths 2 to 5 (the assert below checks).
    max_lengths, alpha, fn = [4, 6], 0.6, history_fn(seed=3, max_length=6)
    state = {"sentence": tf.range(2), "history": tf.zeros([2, 6], tf.int32)}
    ids, scores = beam_search(fn, state, 2, 3, 5, tf.constant(max_lengths), alpha)
    assert np.isfinite(scores).all()
    for b, k in np.ndindex(2, 3):
        hypothesis = list(ids[b, k, :max_lengths[b]].numpy())
        length = hypothesis.index(1) + 1 if 1 in hypothesis else max_lengths[b]
        expected = teacher_forced_log_prob(fn, b, hypothesis[:length], 6) / ((5 + length) / 6) ** alpha
        np.testing.assert_allclose(scores[b, k], expected, rtol=1e-5)


def test_split_state_reorders_only_its_per_beam_part():
    # The per-beam history follows the beams as a plain state does, so the search is the same.
    # The per-sentence part comes back to the function as it left it: not repeated to N rows,
    # not reordered (a step counter per sentence, checked at every step).
    max_lengths, fn = tf.constant([4, 6]), history_fn(seed=3, max_length=6)
    plain_ids, plain_scores = beam_search(fn, {"sentence": tf.range(2), "history": tf.zeros([2, 6], tf.int32)},
                                          2, 3, 5, max_lengths, 0.6)
    start = tf.constant([[10, 20]])  # [1, B]

    def split_fn(ids, step, state):
        tf.debugging.assert_equal(state.per_sentence, start + step)
        logits, per_beam = fn(ids, step, state.per_beam)
        return logits, SplitState(per_beam, state.per_sentence + 1)

    per_beam = {"sentence": tf.repeat(tf.range(2), 3), "history": tf.zeros([6, 6], tf.int32)}  # [N, ...]
    ids, scores = beam_search(split_fn, SplitState(per_beam, start), 2, 3, 5, max_lengths, 0.6)
    np.testing.assert_array_equal(ids, plain_ids)
    np.testing.assert_array_equal(scores, plain_scores)


def test_xla_compiled_search_matches_eager():
    fn = per_sentence_fn(seed=5, num_sentences=3)

    def run(max_lengths, min_lengths):
        return beam_search(fn, {"sentence": tf.range(3)}, 3, 4, 7, max_lengths, 0.6,
                           min_decode_lengths=min_lengths)

    args = (tf.constant([4, 8, 2]), tf.constant([3, 0, 0]))
    eager_ids, eager_scores = run(*args)
    xla_ids, xla_scores = tf.function(run, jit_compile=True)(*args)
    np.testing.assert_array_equal(xla_ids, eager_ids)
    np.testing.assert_allclose(xla_scores, eager_scores, rtol=1e-5)


def test_bfloat16_logits_are_scored_in_float32():
    # Same result as float32 logits holding the bfloat16-rounded values: the cast comes first.
    bfloat16_fn = bigram_fn(PENALTY_SCRIPT, dtype=tf.bfloat16)

    def float32_fn(ids, step, state):
        logits, state = bfloat16_fn(ids, step, state)
        return tf.cast(logits, tf.float32), state

    ids, scores = search(bfloat16_fn, [3], alpha=1.0)
    expected_ids, expected_scores = search(float32_fn, [3], alpha=1.0)
    np.testing.assert_array_equal(ids, expected_ids)
    np.testing.assert_array_equal(scores, expected_scores)
    assert scores.dtype == np.float32


def test_rejects_a_vocabulary_of_fewer_than_two_tokens():
    # beam_size and final_beams come from a resolved DecodeRequest, which checks them (test_decode_request.py).
    with pytest.raises(ValueError, match="vocab_size must be at least 2"):
        beam_search(bigram_fn(PENALTY_SCRIPT), {}, 1, 2, 1, tf.constant([3]), 0.6)


def test_two_stage_top_k_picks_what_one_top_k_over_all_extensions_picks():
    # Integer logits: many ties inside a row, which TF's top_k breaks towards the lower index.
    rng = np.random.default_rng(0)
    batch, beam, vocab, length = 3, 4, 9, 5
    logits = rng.integers(0, 3, size=(batch * beam, vocab)).astype(np.float32)
    alive = rng.integers(-2, 1, size=(batch, beam)).astype(np.float32)
    search = _BeamSearch(lambda ids, step, state: (tf.constant(logits), state), beam, vocab, 0.6, 1, beam,
                         has_min_lengths=False)
    empty = tf.zeros([batch, beam, length], tf.int32)
    beams = _Beams(empty, tf.constant(alive), empty, tf.fill([batch, beam], NEG_INF), {}, tf.fill([batch], length),
                   tf.zeros([batch * beam], tf.int32), tf.range(batch), tf.zeros([batch], tf.int32))
    candidates, _ = search._grow_topk(tf.constant(0), beams)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))  # [N, V]
    extensions = (log_probs.reshape(batch, beam, vocab) + alive[:, :, None]).reshape(batch, beam * vocab)
    for b in range(batch):
        order = np.argsort(-extensions[b], kind="stable")[:2 * beam]  # best first, lower index on ties
        np.testing.assert_array_equal(candidates.beam[b], order // vocab)
        np.testing.assert_array_equal(candidates.seq[b, :, 0], order % vocab)
        np.testing.assert_allclose(candidates.log_probs[b], extensions[b, order], rtol=1e-6)


@pytest.mark.parametrize("times", [3, tf.constant(2)])
def test_repeated_rows_repeats_each_row_of_every_tensor_in_place_as_numpy_repeat(times):
    rng = np.random.default_rng(0)
    nest = {"a": rng.normal(size=(4, 2, 3)).astype(np.float32), "b": (np.arange(4, dtype=np.int32) * 7,)}
    repeated = repeated_rows(tf.nest.map_structure(tf.constant, nest), times)
    count = int(times)
    np.testing.assert_array_equal(repeated["a"].numpy(), np.repeat(nest["a"], count, axis=0))
    np.testing.assert_array_equal(repeated["b"][0].numpy(), np.repeat(nest["b"][0], count, axis=0))
    assert repeated_rows((), count) == ()
