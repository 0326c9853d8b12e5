"""Label-smoothed cross-entropy and accuracy against numpy."""
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.training.losses import (MAX_SLICES, SLICE_BYTES, correct_tokens, loss_slices,
                                     projected_smoothed_cross_entropy, smoothed_cross_entropy)


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


def projection_case(seed=0, batch=3, length=7, depth=6, vocab=13):
    rng = np.random.default_rng(seed)
    states = rng.normal(size=(batch, length, depth)).astype(np.float32)
    kernel = rng.normal(size=(depth, vocab)).astype(np.float32)
    labels = rng.integers(1, vocab, size=(batch, length)).astype(np.int32)
    labels[0, 4:] = 0
    labels[2, 1:] = 0
    return states, kernel, labels


def loss_and_gradients(loss_fn, states, kernel, upstream=3.0):
    states, kernel = tf.constant(states), tf.constant(kernel)
    with tf.GradientTape() as tape:
        tape.watch([states, kernel])
        loss, tokens = loss_fn(states, kernel)
        scaled = loss * upstream  # a scaled loss, as training's 1 / tokens and loss scaling make it
    return float(loss), float(tokens), [g.numpy() for g in tape.gradient(scaled, [states, kernel])]


@pytest.mark.parametrize("chunks", [1, 4, 8, 30])  # 21 positions: uneven slices, and more slices than positions
def test_projected_loss_matches_numpy_and_the_plain_form_with_its_gradients(chunks):
    states, kernel, labels = projection_case()
    loss, tokens, (d_states, d_kernel) = loss_and_gradients(
        lambda s, k: projected_smoothed_cross_entropy(s, k, labels, 0.1, chunks=chunks), states, kernel)
    expected_loss, expected_tokens = numpy_smoothed_loss((states @ kernel).astype(np.float64), labels, 0.1)
    assert tokens == expected_tokens == 12
    np.testing.assert_allclose(loss, expected_loss, rtol=1e-5)

    _, _, (plain_states, plain_kernel) = loss_and_gradients(
        lambda s, k: smoothed_cross_entropy(tf.matmul(s, k), labels, 0.1), states, kernel)
    np.testing.assert_allclose(d_states, plain_states, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(d_kernel, plain_kernel, rtol=1e-4, atol=1e-5)
    assert np.all(d_states[0, 4:] == 0) and np.abs(d_states[0, :4]).sum() > 0  # PAD positions get no gradient


def test_projected_loss_in_bfloat16_follows_float32():
    states, kernel, labels = projection_case(seed=1, depth=16, vocab=50)
    loss32, _, grads32 = loss_and_gradients(
        lambda s, k: projected_smoothed_cross_entropy(s, k, labels, 0.1), states, kernel)
    loss16, _, grads16 = loss_and_gradients(
        lambda s, k: projected_smoothed_cross_entropy(tf.cast(s, tf.bfloat16), tf.cast(k, tf.bfloat16), labels, 0.1),
        states, kernel)
    np.testing.assert_allclose(loss16, loss32, rtol=2e-2)
    for low, full in zip(grads16, grads32):
        assert low.dtype == np.float32  # flowed back through the casts
        np.testing.assert_allclose(low, full, rtol=0.1, atol=0.05 * np.abs(full).max())


@pytest.mark.parametrize("positions,vocab_size", [(512, 20), (1024, 4000), (2048, 8000), (4096, 32768), (8192, 37000),
                                                  (3000, 2796), (1, 1)])
def test_loss_slices_are_the_fewest_that_keep_a_slices_logits_under_the_bound(positions, vocab_size):
    slices = loss_slices(positions, vocab_size)
    assert 1 <= slices <= MAX_SLICES
    slice_bytes = lambda count: -(-positions // count) * vocab_size * 4  # noqa: E731  (float32 logits of a slice)
    assert slices == MAX_SLICES or slice_bytes(slices) <= SLICE_BYTES
    assert slices == 1 or slice_bytes(slices - 1) > SLICE_BYTES


@pytest.mark.parametrize("overrides", ["vocab_size=40", "vocab_size=40000,train.batch_size=4096"])
def test_the_train_step_projects_in_as_many_slices_as_loss_slices_gives(overrides):
    """Each slice is one TensorScatterSub (its logits' gradient) in the traced gradient pass: a small vocabulary's
    step traces one."""
    import keras

    import t2t_lite.hparams  # noqa: F401
    from t2t_lite import config
    from t2t_lite.models import build_model
    from t2t_lite.registry import hparams_sets
    from t2t_lite.training.steps import TrainStep

    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(),
                                     "num_encoder_layers=1,num_decoder_layers=1,d_model=16,d_ff=32,num_heads=2,"
                                     + overrides)
    strategy = tf.distribute.get_strategy()
    model = build_model(hparams)
    step = TrainStep(model, keras.optimizers.SGD(), strategy, 0.1, hparams.train.batch_size)
    graph = step.gradients.get_concrete_function().graph
    slices = sum(op.type == "TensorScatterSub" for op in graph.get_operations())
    expected = loss_slices(hparams.train.batch_size, hparams.model.vocab_size)
    assert expected == (1 if hparams.model.vocab_size == 40 else MAX_SLICES)
    assert slices == expected
