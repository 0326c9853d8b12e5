"""Label-smoothed cross-entropy and accuracy against numpy."""
import numpy as np
import pytest

from t2t_lite.training.losses import correct_tokens, smoothed_cross_entropy


def numpy_smoothed_loss(logits, labels, eps):
    vocab = logits.shape[-1]
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    target = np.full(logits.shape, eps / (vocab - 1))
    np.put_along_axis(target, labels[..., None], 1 - eps, axis=-1)
    entropy = -np.where(target > 0, target * np.log(np.maximum(target, 1e-30)), 0.0).sum(-1)
    per_token = -(target * log_probs).sum(-1) - entropy
    mask = labels != 0
    return (per_token * mask).sum(), mask.sum()


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.2])
def test_matches_numpy_and_ignores_padding(eps):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 5, 11)).astype(np.float32)
    labels = rng.integers(1, 11, size=(3, 5)).astype(np.int32)
    labels[0, 3:] = 0
    labels[2, 1:] = 0
    loss, tokens = smoothed_cross_entropy(logits, labels, eps)
    expected_loss, expected_tokens = numpy_smoothed_loss(logits.astype(np.float64), labels, eps)
    assert float(tokens) == expected_tokens == 9
    np.testing.assert_allclose(float(loss), expected_loss, rtol=1e-5)


def test_perfect_model_scores_zero():
    eps, vocab = 0.1, 6
    labels = np.array([[2, 5, 1, 0]], np.int32)
    target = np.full((1, 4, vocab), eps / (vocab - 1))
    np.put_along_axis(target, labels[..., None], 1 - eps, axis=-1)
    loss, _ = smoothed_cross_entropy(np.log(target).astype(np.float32), labels, eps)
    assert abs(float(loss)) < 1e-5


def test_accuracy_counts_only_real_tokens():
    logits = np.eye(4, dtype=np.float32)[[[1, 2, 3, 3]]]  # argmax 1, 2, 3, 3
    labels = np.array([[1, 3, 3, 0]], np.int32)
    correct, tokens = correct_tokens(logits, labels)
    assert (float(correct), float(tokens)) == (2.0, 3.0)
