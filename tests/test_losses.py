"""The targets' losses (models/token_losses.py) against numpy, and their gradient against autodiff of the plain
form and against numpy's."""
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.models.token_losses import token_losses
from t2t_lite.training.losses import MAX_SLICES, SLICE_BYTES, loss_slices


def numpy_losses(logits, labels, eps):
    """(loss sum, tokens, correct, log p(label) [B, T] 0 at PAD, d loss_sum / d logits) in float64."""
    vocab = logits.shape[-1]
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    target = np.full(logits.shape, eps / (vocab - 1))
    np.put_along_axis(target, labels[..., None], 1 - eps, axis=-1)
    entropy = -np.where(target > 0, target * np.log(np.maximum(target, 1e-30)), 0.0).sum(-1)
    per_token = -(target * log_probs).sum(-1) - entropy
    mask = labels != 0
    label_log_probs = np.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0] * mask
    correct = ((logits.argmax(-1) == labels) & mask).sum()
    logit_gradient = (np.exp(log_probs) - target) * mask[..., None]
    return (per_token * mask).sum(), mask.sum(), correct, label_log_probs, logit_gradient


def plain_smoothed_loss(logits, labels, eps):
    """The label-smoothed loss sum written plainly, over whole [B, T, V] logits: what autodiff differentiates."""
    vocab = logits.shape[-1]
    soft_targets = tf.one_hot(labels, vocab, on_value=1.0 - eps, off_value=eps / (vocab - 1))
    entropy = -tf.reduce_sum(tf.where(soft_targets > 0, soft_targets * tf.math.log(soft_targets), 0.0), -1)
    per_token = -tf.reduce_sum(soft_targets * tf.nn.log_softmax(logits), -1) - entropy
    return tf.reduce_sum(per_token * tf.cast(labels != 0, tf.float32))


def case(seed=0, batch=3, length=7, depth=6, vocab=13):
    rng = np.random.default_rng(seed)
    states = rng.normal(size=(batch, length, depth)).astype(np.float32)
    kernel = rng.normal(size=(depth, vocab)).astype(np.float32)
    labels = rng.integers(1, vocab, size=(batch, length)).astype(np.int32)
    labels[0, 4:] = 0
    labels[2, 1:] = 0
    return states, kernel, labels


def differentiated(loss_of_logits_or_states, states, kernel, upstream=3.0):
    """(outputs, d(upstream * loss_sum)/d states, d/d kernel) with project = states @ kernel, a variable."""
    states, kernel = tf.constant(states), tf.Variable(kernel)
    with tf.GradientTape() as tape:
        tape.watch(states)
        outputs = loss_of_logits_or_states(lambda s: tf.matmul(s, kernel), states)
        loss = outputs if isinstance(outputs, tf.Tensor) else outputs.loss_sum
        scaled = loss * upstream  # a scaled loss, as training's 1 / tokens and loss scaling make it
    return outputs, [g.numpy() for g in tape.gradient(scaled, [states, kernel])]


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("slices", [1, 4, 8, 30])  # 21 positions: uneven slices, and more slices than positions
def test_the_losses_and_their_gradient_match_numpy_and_autodiff_of_the_plain_form(eps, slices):
    states, kernel, labels = case()
    losses, (d_states, d_kernel) = differentiated(
        lambda project, s: token_losses(project, s, labels, 13, eps, slices, differentiable=True), states, kernel)
    loss, tokens, correct, log_probs, logit_gradient = numpy_losses((states @ kernel).astype(np.float64), labels, eps)
    assert float(losses.tokens) == tokens == 12
    assert float(losses.correct) == correct
    np.testing.assert_allclose(float(losses.loss_sum), loss, rtol=1e-5)
    np.testing.assert_allclose(losses.log_probs.numpy(), log_probs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(d_states, 3.0 * logit_gradient @ kernel.T, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(d_kernel, 3.0 * np.einsum("btd,btv->dv", states, logit_gradient), rtol=1e-4, atol=1e-5)

    plain, (plain_states, plain_kernel) = differentiated(
        lambda project, s: plain_smoothed_loss(project(s), labels, eps), states, kernel)
    np.testing.assert_allclose(float(losses.loss_sum), float(plain), rtol=1e-5)
    np.testing.assert_allclose(d_states, plain_states, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(d_kernel, plain_kernel, rtol=1e-4, atol=1e-5)
    assert np.all(d_states[0, 4:] == 0) and np.abs(d_states[0, :4]).sum() > 0  # PAD positions get no gradient


def test_a_projection_with_a_bias_and_a_nonlinearity_gets_the_gradient_autodiff_gives():
    states, kernel, labels = case(seed=3)
    bias = tf.Variable(np.random.default_rng(4).normal(size=13).astype(np.float32))
    projections = {}
    for sliced in (True, False):
        weight = tf.Variable(kernel)
        project = lambda s, weight=weight: tf.tanh(tf.matmul(s, weight) + bias) * 4.0  # noqa: E731
        with tf.GradientTape() as tape:
            loss = (token_losses(project, tf.constant(states), labels, 13, 0.1, 4, differentiable=True).loss_sum
                    if sliced else plain_smoothed_loss(project(tf.constant(states)), labels, 0.1))
        projections[sliced] = [float(loss)] + [g.numpy() for g in tape.gradient(loss, [weight, bias])]
    np.testing.assert_allclose(projections[True][0], projections[False][0], rtol=1e-5)
    for sliced, plain in zip(projections[True][1:], projections[False][1:]):
        assert np.abs(plain).max() > 1e-3
        np.testing.assert_allclose(sliced, plain, rtol=1e-4, atol=1e-5)


def test_the_losses_without_a_gradient_are_the_same_numbers():
    states, kernel, labels = case(seed=2)
    project = lambda s: tf.matmul(s, tf.constant(kernel))  # noqa: E731
    given = [token_losses(project, tf.constant(states), labels, 13, 0.1, 3, differentiable=d) for d in (True, False)]
    for with_gradient, without in zip(*given):
        np.testing.assert_array_equal(with_gradient.numpy(), without.numpy())


def test_a_perfect_model_scores_zero():
    eps, vocab = 0.1, 6
    labels = np.array([[2, 5, 1, 0]], np.int32)
    target = np.full((1, 4, vocab), eps / (vocab - 1))
    np.put_along_axis(target, labels[..., None], 1 - eps, axis=-1)
    losses = token_losses(lambda s: s, np.log(target).astype(np.float32), labels, vocab, eps)
    assert abs(float(losses.loss_sum)) < 1e-5


def test_accuracy_counts_only_real_tokens():
    logits = np.eye(4, dtype=np.float32)[[[1, 2, 3, 3]]]  # argmax 1, 2, 3, 3
    labels = np.array([[1, 3, 3, 0]], np.int32)
    losses = token_losses(lambda s: s, logits, labels, 4)
    assert (float(losses.correct), float(losses.tokens)) == (2.0, 3.0)


def test_the_losses_in_bfloat16_follow_float32():
    from t2t_lite.ops.float32_product import float32_product

    states, kernel, labels = case(seed=1, depth=16, vocab=50)
    results = {}
    for dtype in (tf.float32, tf.bfloat16):
        weight = tf.Variable(kernel)
        with tf.GradientTape() as tape:
            low = tf.cast(tf.constant(states), dtype)
            tape.watch(low)
            losses = token_losses(lambda s: float32_product(s, tf.cast(weight, dtype)), low, labels, 50, 0.1,
                                  differentiable=True)
        results[dtype] = [float(losses.loss_sum)] + tape.gradient(losses.loss_sum, [low, weight])
    np.testing.assert_allclose(results[tf.bfloat16][0], results[tf.float32][0], rtol=2e-2)
    for low, full in zip(results[tf.bfloat16][1:], results[tf.float32][1:]):
        full = full.numpy()
        np.testing.assert_allclose(tf.cast(low, tf.float32).numpy(), full, rtol=0.1, atol=0.05 * np.abs(full).max())
    assert results[tf.bfloat16][2].dtype == tf.float32  # flowed back through the cast


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
