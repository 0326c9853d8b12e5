"""Timing signal and shared embeddings against numpy."""
import math

import numpy as np
import tensorflow as tf

from t2t_lite.layers.embedding import LearnedPosition, SharedEmbedding, SinusoidalPosition, timing_signal
from t2t_lite import precision


def numpy_timing_signal(length, channels):
    """tensor2tensor's get_timing_signal_1d, written out in numpy."""
    half = channels // 2
    increment = math.log(1e4) / (half - 1)
    inv = np.exp(np.arange(half) * -increment)
    scaled = np.arange(length)[:, None] * inv[None, :]
    return np.concatenate([np.sin(scaled), np.cos(scaled)], axis=1)


def test_timing_signal_matches_numpy():
    np.testing.assert_allclose(np.asarray(timing_signal(50, 16)), numpy_timing_signal(50, 16), atol=1e-5)


def test_timing_signal_known_values():
    signal = np.asarray(timing_signal(3, 4))
    # channels 4: timescales 1 and 1e4; position 2 -> sin(2), sin(2e-4), cos(2), cos(2e-4).
    np.testing.assert_allclose(signal[2], [math.sin(2), math.sin(2e-4), math.cos(2), math.cos(2e-4)], atol=1e-6)
    np.testing.assert_allclose(signal[0], [0, 0, 1, 1])


def test_single_position_equals_row_of_full_signal():
    x = np.zeros((1, 1, 8), np.float32)
    layer = SinusoidalPosition()
    np.testing.assert_allclose(np.asarray(layer(x, position=5))[0, 0], numpy_timing_signal(6, 8)[5], atol=1e-5)


def test_shared_embedding_scales_by_sqrt_d_and_projects_with_same_matrix():
    layer = SharedEmbedding(vocab_size=7, d_model=4)
    ids = np.array([[3, 0, 6]], np.int32)
    vectors = np.asarray(layer(ids))
    table = layer.embeddings.numpy()
    np.testing.assert_allclose(vectors[0], table[[3, 0, 6]] * 2.0, atol=1e-6)
    x = np.random.default_rng(0).normal(size=(1, 2, 4)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(layer.logits(x)), x @ table.T, atol=1e-5)


def test_under_mixed_precision_the_lookup_casts_the_rows_not_the_table():
    with precision.layers_compute_in("mixed_bfloat16"):
        embedding = SharedEmbedding(1000, 16)
        embedding.build()
    ids = tf.constant([[3, 7, 0]])
    vectors = embedding(ids)
    table = embedding.embeddings.numpy()
    expected = tf.cast(tf.cast(table[[3, 7, 0]], tf.bfloat16), tf.float32).numpy() * 4.0
    np.testing.assert_array_equal(tf.cast(vectors, tf.float32).numpy()[0], expected)
    assert vectors.dtype == "bfloat16"
    graph = tf.function(embedding).get_concrete_function(tf.TensorSpec([None, None], tf.int32)).graph
    cast_inputs = [op.inputs[0].shape.as_list() for op in graph.get_operations() if op.type == "Cast"]
    assert cast_inputs and [1000, 16] not in cast_inputs, cast_inputs


def test_under_mixed_precision_learned_positions_cast_the_rows_not_the_table():
    with precision.layers_compute_in("mixed_bfloat16"):
        positions = LearnedPosition(50, 8)
        positions.build(None)
    x = tf.zeros([2, 3, 8], tf.bfloat16)
    expected = tf.cast(tf.cast(positions.table.numpy()[:3], tf.bfloat16), tf.float32).numpy()
    np.testing.assert_array_equal(tf.cast(positions(x), tf.float32).numpy()[1], expected)
    step = positions(x[:, :1], position=tf.constant(7))
    np.testing.assert_array_equal(tf.cast(step, tf.float32).numpy()[0, 0],
                                  tf.cast(tf.cast(positions.table.numpy()[7], tf.bfloat16), tf.float32).numpy())
    graph = tf.function(lambda x: positions(x[:, :1], position=tf.constant(7))).get_concrete_function(
        tf.TensorSpec([None, None, 8], tf.bfloat16)).graph
    cast_inputs = [op.inputs[0].shape.as_list() for op in graph.get_operations() if op.type == "Cast"]
    assert [50, 8] not in cast_inputs, cast_inputs
