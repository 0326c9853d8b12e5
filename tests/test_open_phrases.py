"""The open phrases a decoder input is told of (the open_phrases decoder feature), against a stack in numpy."""
import numpy as np
import pytest

from t2t_lite.parsing.open_phrases import CLOSE, FINISHED, MAX_DEPTH, open_phrases

# Tokens 2 and 3 open label 1, token 4 opens label 2, 5 closes; others are words.
CODE = np.array([0, 0, 1, 1, 2, CLOSE, 0, 0], np.int32)


def reference(ids):
    """Each input's depth and innermost open label, by pushing and popping a stack token by token."""
    depths, labels = [], []
    for row in ids:
        stack, depth, rooted, row_depths, row_labels = [], 0, False, [], []
        for token in row:
            if CODE[token] > 0:
                depth += 1
                rooted = rooted or depth == 1
                if 1 <= depth <= MAX_DEPTH:
                    del stack[depth - 1:]
                    stack.append(CODE[token])
            elif CODE[token] == CLOSE:
                depth -= 1
            row_depths.append(depth)
            row_labels.append(stack[depth - 1] if 1 <= depth <= min(len(stack), MAX_DEPTH)
                              else FINISHED if depth < 1 and rooted else 0)
        depths.append(row_depths)
        labels.append(row_labels)
    return np.array(depths), np.array(labels)


def test_depths_and_labels_equal_a_stack_machines():
    ids = np.array([[2, 6, 4, 6, 5, 4, 7, 5, 5],  # (1 w (2 w ) (2 w ) ): the second label-2 phrase reopens
                    [3, 4, 2, 6, 5, 6, 5, 0, 0],  # nested three deep, then back to label 1 after a close
                    [5, 2, 6, 5, 5, 4, 6, 0, 0]], np.int32)  # closes below depth 0, then an open
    depths, labels, _, depth = open_phrases(CODE, ids, np.zeros((3, MAX_DEPTH), np.int32), np.zeros(3, np.int32))
    expected_depths, expected_labels = reference(ids)
    np.testing.assert_array_equal(np.asarray(depths), expected_depths)
    np.testing.assert_array_equal(np.asarray(labels), expected_labels)
    np.testing.assert_array_equal(np.asarray(depth), expected_depths[:, -1])
    # The reference itself, read by hand: the root closed, and a stack three deep.
    assert expected_labels[0].tolist() == [1, 1, 2, 2, 1, 2, 2, 1, FINISHED]
    assert expected_labels[1].tolist() == [1, 2, 1, 1, 2, 2, 1, 1, 1]


@pytest.mark.parametrize("chunks", [[1] * 40, [3, 17, 1, 19], [40]])
def test_chunks_carrying_the_stack_answer_as_one_pass(chunks):
    rng = np.random.default_rng(0)
    ids = rng.choice(8, size=(4, 40), p=[0.05, 0.05, 0.15, 0.1, 0.1, 0.35, 0.1, 0.1]).astype(np.int32)
    ids[:, :6] = 2  # deep enough that the stack must hold several levels between chunks
    stack, depth = np.zeros((4, MAX_DEPTH), np.int32), np.zeros(4, np.int32)
    got_depths, got_labels, start = [], [], 0
    for size in chunks:
        depths, labels, stack, depth = open_phrases(CODE, ids[:, start:start + size], stack, depth)
        got_depths.append(np.asarray(depths))
        got_labels.append(np.asarray(labels))
        start += size
    expected_depths, expected_labels = reference(ids)
    assert (expected_labels[:, 20:] == FINISHED).any()  # a root closed in a later chunk than it opened
    np.testing.assert_array_equal(np.concatenate(got_depths, axis=1), expected_depths)
    np.testing.assert_array_equal(np.concatenate(got_labels, axis=1), expected_labels)


def test_a_problem_without_trees_refuses_open_phrases_naming_the_feature():
    import t2t_lite.problems  # noqa: F401  (registers the problems)
    from t2t_lite import config
    from t2t_lite.errors import UserError
    from t2t_lite.models import build_model
    from t2t_lite.registry import hparams_sets, problems

    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(), "vocab_size=13,d_model=16,d_ff=32,"
                                     "num_heads=2,decoder_features=open_phrases")
    with pytest.raises(UserError, match="open_phrases decoder feature.*leave it out of decoder_features"):
        build_model(hparams).configure_features(problems.get("algorithmic_reverse")())
