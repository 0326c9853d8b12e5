"""The softmax's log-normaliser against float64 numpy."""
import numpy as np
import tensorflow as tf

from t2t_lite.normaliser import log_normaliser


def test_log_normaliser_is_the_rows_logsumexp():
    rng = np.random.default_rng(7)
    logits = (rng.normal(size=[5, 3000]) * [[1], [5], [20], [0.01], [3]]).astype(np.float32)
    logits[4, :2999] = -1e9  # one allowed token: its log-prob must be exactly 0
    logits[1, 10] = logits[1].max()  # a tie for the best logit
    best_ids = logits.argmax(axis=1)[:, None].astype(np.int32)
    got = log_normaliser(tf.constant(logits), tf.nn.softmax(logits), tf.constant(best_ids)).numpy()
    top = logits.astype(np.float64).max(axis=1, keepdims=True)
    expected = top + np.log(np.exp(logits.astype(np.float64) - top).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=0)  # float32 rounding of ~20
    assert got[4, 0] == logits[4, 2999]
