"""A constraint's shortlist (decoding/constraints.py): a parser scores only each sentence's possible ids, for
the same outputs.

The tree constraint's columns against its own whole-vocabulary mask along random walks on real sentences,
and a trained parser decoded with and without the shortlist.
"""
import dataclasses

import numpy as np
import pytest
import tensorflow as tf

import t2t_lite.problems  # noqa: F401  (registers the problems)
from t2t_lite.decoding.constraints import shortlist_columns
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.decoding.request import DecodeRequest
from t2t_lite.parsing.tree_constraint import TreeConstraint
from t2t_lite.registry import problems
from t2t_lite.run import RunRequest, open_run, restore_model


SENTENCES = 24


# Both precisions; float32's marked isa: two ways of multiplying by the output embeddings, which
# test_forced_isa.py runs again on AVX2 (bfloat16's claim is held in Eigen by the scorer's PRECISIONS tests).
@pytest.fixture(scope="module", params=[pytest.param("none", marks=pytest.mark.isa, id="float32"),
                                        pytest.param("mixed_bfloat16", id="bfloat16")])
def parser(words_parser, request):
    output_dir, data_dir, _ = words_parser
    return open_run(RunRequest(output_dir=output_dir, data_dir=data_dir,
                               decode=DecodeRequest(mixed_precision=request.param)))


def dev_inputs(problem, count):
    rows = [example["inputs"].numpy() for example in problem.dataset("dev").take(count)]
    inputs = np.zeros([len(rows), max(map(len, rows))], np.int32)
    for i, row in enumerate(rows):
        inputs[i, :len(row)] = row
    return inputs


def toy_tags_constraint():
    """A tags-form constraint (no copied words) over a vocabulary of 30: brackets 2-7, leaves 8-10, the rest
    other ids."""
    return TreeConstraint(30, phrases=[(2, 5), (3, 6), (4, 7)], leaves=[8, 9, 10], word_starts=range(11, 20),
                          continuations=[20])


def walk_checking_columns(constraint, inputs, rows_per_sentence, steps, rng):
    """Random walks through `constraint` (every row a sentence, repeated K times), checking each step that
    the columns hold every id the whole-vocabulary mask allows and mask as it does; returns the steps at
    which some row needed the whole vocabulary."""
    columns = shortlist_columns(constraint, tf.constant(inputs), rows_per_sentence).numpy()  # [B, C]
    assert columns.shape[1] >= 2 * rows_per_sentence
    for row in columns:
        ids = row[row != 0]
        assert len(set(ids)) == len(ids), "an id twice in a sentence's columns"
    inputs = np.repeat(inputs, rows_per_sentence, axis=0)
    max_length = inputs.shape[1] * 3 + 10
    state = constraint.initial_state(tf.constant(inputs), tf.fill([len(inputs)], max_length))
    ids = np.zeros([len(inputs)], np.int32)
    whole = []
    # Compiled, as the search calls them (and eager ops one by one would take most of the test's time).
    advance, allowed, needs_whole_vocabulary = (tf.function(f, autograph=False) for f in (
        constraint.advance, constraint.allowed, constraint.needs_whole_vocabulary))
    for step in range(steps):
        state = advance(state, tf.constant(ids))
        every = allowed(state, tf.constant(step)).numpy()  # [N, V]
        shortlisted = allowed(state, tf.constant(step), tf.constant(columns)).numpy()  # [N, C]
        row_columns = np.repeat(columns, rows_per_sentence, axis=0)  # [N, C]: a sentence's rows share its columns
        np.testing.assert_array_equal(shortlisted, np.take_along_axis(every, row_columns, axis=1))
        if needs_whole_vocabulary(state).numpy():
            whole.append(step)
        else:
            for row in range(len(inputs)):
                assert set(np.flatnonzero(every[row])) <= set(row_columns[row]), (step, row)
        ids = np.array([rng.choice(np.flatnonzero(allowed)) for allowed in every], np.int32)
    return whole


def test_a_parsers_columns_hold_every_id_its_constraint_allows_each_once_and_mask_as_the_whole_row(parser):
    constraint = parser.problem.output_constraint()
    inputs = dev_inputs(parser.problem, 12)
    steps = inputs.shape[1] * 3
    whole = walk_checking_columns(constraint, inputs, rows_per_sentence=2, steps=steps, rng=np.random.default_rng(0))
    # The first word (no "▁" in the input, so any word) needs the whole vocabulary until every row has
    # written it (a random walk writes long words), and never after.
    assert whole and whole == list(range(len(whole))) and len(whole) < steps, whole
    width = shortlist_columns(constraint, tf.constant(inputs), 2).shape[1]
    assert width < parser.problem.vocab_size / 2  # what makes a step cheaper


def test_a_tags_constraint_lists_every_leaf_and_never_needs_the_whole_vocabulary():
    constraint = toy_tags_constraint()
    inputs = np.array([[11, 12, 13, 1, 0], [14, 1, 0, 0, 0], [11, 15, 16, 17, 1]], np.int32)
    assert walk_checking_columns(constraint, inputs, rows_per_sentence=3, steps=14,
                                 rng=np.random.default_rng(1)) == []


@pytest.mark.parametrize("beam_size", [1, 4])
def test_a_parser_decodes_the_same_outputs_and_scores_with_its_shortlist_as_without(parser, beam_size):
    hparams = dataclasses.replace(parser.decode_hparams, beam_size=beam_size, extra_length=40)
    inputs = dev_inputs(parser.problem, SENTENCES)
    constraint = parser.problem.output_constraint()
    decoded = [Decoder(parser.model, hparams, constraint=constraint, shortlist=shortlist).decode(inputs)
               for shortlist in (False, True)]
    (ids, scores), (short_ids, short_scores) = [(i.numpy(), s.numpy()) for i, s in decoded]
    np.testing.assert_array_equal(short_ids, ids)
    np.testing.assert_allclose(short_scores, scores, rtol=1e-5)
    assert np.isfinite(scores[:, 0]).all()


def test_an_ensemble_decodes_the_same_outputs_and_scores_with_its_shortlist_as_without(parser):
    # A second member: the parser's weights, each scaled by its own noise (the same vocabulary, other predictions).
    other = restore_model(parser.spec, parser.checkpoint, parser.mixed_precision)
    rng = np.random.default_rng(0)
    other.set_weights([w * (1 + 0.5 * rng.standard_normal(w.shape)).astype(w.dtype) for w in other.get_weights()])
    hparams = dataclasses.replace(parser.decode_hparams, beam_size=4, extra_length=40)
    inputs = dev_inputs(parser.problem, SENTENCES)
    constraint = parser.problem.output_constraint()
    decoded = [Decoder(models, hparams, constraint=constraint, shortlist=shortlist).decode(inputs)
               for models, shortlist in (((parser.model, other), False), ((parser.model, other), True),
                                         (parser.model, True))]
    (ids, scores), (short_ids, short_scores), (alone_ids, _) = [(i.numpy(), s.numpy()) for i, s in decoded]
    np.testing.assert_array_equal(short_ids, ids)
    np.testing.assert_allclose(short_scores, scores, rtol=1e-5)
    assert np.isfinite(scores[:, 0]).all()
    assert (ids[:, 0] != alone_ids[:, 0]).any(), "the second member changes no output: the test checks nothing"
