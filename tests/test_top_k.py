"""The block-maxima top-k against tf.nn.top_k: same values, same indices, ties included."""
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.decoding.top_k import BLOCK, block_width, top_k


def _assert_same_as_tf(values, k):
    expected_values, expected_ids = tf.nn.top_k(values, k=k)
    got_values, got_ids = top_k(tf.constant(values), k)
    np.testing.assert_array_equal(got_ids.numpy(), expected_ids.numpy())
    np.testing.assert_array_equal(got_values.numpy(), expected_values.numpy())


@pytest.mark.parametrize("width", [32 * BLOCK, 32 * BLOCK + 37])  # a whole number of blocks, and a padded tail
@pytest.mark.parametrize("k", [1, 8])
def test_random_rows_match_tf_top_k(width, k):
    values = np.random.default_rng(width + k).normal(size=(6, width)).astype(np.float32)
    _assert_same_as_tf(values, k)


@pytest.mark.parametrize("width, block", [(8000, 125), (32000, 128), (37000, 125), (4099, BLOCK)])
def test_a_width_with_a_divisor_near_the_block_splits_into_whole_blocks_without_padding(width, block):
    # 4,099 is prime: only it pads.
    assert block_width(width) == block
    values = np.random.default_rng(width).normal(size=(5, width)).astype(np.float32)
    values[1, ::block] = 3.0  # one tie per block: lower indices must win
    _assert_same_as_tf(values, 8)
    graph = tf.function(lambda v: top_k(v, 8)).get_concrete_function(tf.TensorSpec([None, width])).graph
    pads = [op.type for op in graph.get_operations() if op.type.startswith("Pad")]
    assert pads == ([] if width % block == 0 else ["PadV2"])


def test_best_entries_crowded_into_one_block_and_ties_across_blocks_match_tf_top_k():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(4, 40 * BLOCK)).astype(np.float32)
    values[0, 5 * BLOCK:5 * BLOCK + 8] = 10.0 + np.arange(8)  # all of the top 8 in one block
    values[1, ::BLOCK] = 7.0  # one tie per block: lower indices must win
    values[2, :] = 1.0  # everything tied
    values[3, 3] = values[3, 4000] = 9.0  # a tie between blocks far apart
    values[3, 17] = float("-inf")
    _assert_same_as_tf(values, 8)


def test_minus_infinity_entries_and_padding_are_ordered_like_tf_top_k():
    values = np.full((2, 32 * BLOCK + 5), float("-inf"), np.float32)
    values[0, [3, 700, 4000]] = [1.0, 2.0, 0.5]  # fewer finite entries than k: the rest are real -inf columns
    values[1, -1] = 0.0  # the only finite entry sits in the padded last block
    _assert_same_as_tf(values, 8)


def test_short_rows_and_unknown_widths_use_tf_top_k_directly():
    values = np.random.default_rng(1).normal(size=(3, 23)).astype(np.float32)
    _assert_same_as_tf(values, 8)
    dynamic = tf.function(lambda v: top_k(v, 8), input_signature=[tf.TensorSpec([None, None], tf.float32)])
    wide = np.random.default_rng(2).normal(size=(2, 40 * BLOCK)).astype(np.float32)
    np.testing.assert_array_equal(dynamic(wide)[1].numpy(), tf.nn.top_k(wide, 8)[1].numpy())
