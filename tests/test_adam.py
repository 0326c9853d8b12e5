"""FusedAdam against Adam's formula in numpy and against Keras's own Adam, eagerly, compiled and mirrored."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite import compat
from t2t_lite.training.adam import FusedAdam

SETTINGS = dict(beta_1=0.9, beta_2=0.98, epsilon=1e-9)
STEPS = 4


def numpy_adam(value, gradients, learning_rates, beta_1, beta_2, epsilon):
    """Paper 5.3 / Kingma and Ba, with epsilon added to sqrt(v) as Keras does."""
    m, v = np.zeros_like(value), np.zeros_like(value)
    for t, (g, lr) in enumerate(zip(gradients, learning_rates), 1):
        m = beta_1 * m + (1 - beta_1) * g
        v = beta_2 * v + (1 - beta_2) * g * g
        value = value - lr * np.sqrt(1 - beta_2**t) / (1 - beta_1**t) * m / (np.sqrt(v) + epsilon)
    return value, m, v


class _Rising(keras.optimizers.schedules.LearningRateSchedule):
    """A learning rate that changes every step, so a stale one would show."""

    def __call__(self, step):
        return 1e-3 * tf.cast(step + 1, tf.float32)


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    start = rng.normal(size=(5, 3)).astype(np.float32)
    # Gradients of very different sizes, and one element always 0 (Adam leaves it where it is).
    gradients = [rng.normal(scale=10.0**-k, size=(5, 3)).astype(np.float32) for k in range(STEPS)]
    for g in gradients:
        g[0, 0] = 0
    return start, gradients


def _train(optimizer_class, strategy=None, compiled=False):
    start, gradients = _problem()
    with (strategy or tf.distribute.get_strategy()).scope():
        variable = keras.Variable(start)
        optimizer = optimizer_class(learning_rate=_Rising(), **SETTINGS)
        optimizer.build([variable])

    def step(gradient):
        optimizer.apply_gradients([(gradient, variable)])

    if strategy is not None:  # as TrainStep runs it: the replicas' step inside the compiled function
        replica_step = step

        def step(gradient):
            # Copied onto the replica's device: MirroredStrategy cannot all-reduce a tensor placed on none.
            strategy.run(lambda g: replica_step(tf.identity(g)), args=(gradient,))

    if compiled:
        step = tf.function(step, autograph=False)
    for gradient in gradients:
        step(tf.constant(gradient))
    momentum, velocity = compat.adam_slots(optimizer, variable)
    return (np.asarray(variable.value), np.asarray(momentum.value), np.asarray(velocity.value),
            int(optimizer.iterations.numpy()))


@pytest.mark.parametrize("compiled", [False, True])
def test_equals_adams_formula_and_keras_adam(compiled):
    start, gradients = _problem()
    learning_rates = [1e-3 * (t + 1) for t in range(STEPS)]
    expected = numpy_adam(start.astype(np.float64), [g.astype(np.float64) for g in gradients], learning_rates,
                          **SETTINGS)
    value, m, v, iterations = _train(FusedAdam, compiled=compiled)
    assert iterations == STEPS
    for got, want in zip((value, m, v), expected):
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-12)
    assert value[0, 0] == start[0, 0]
    # Keras's own Adam takes the same path up to float32 rounding.
    for got, keras_value in zip((value, m, v), _train(keras.optimizers.Adam, compiled=compiled)[:3]):
        np.testing.assert_allclose(got, keras_value, rtol=3e-6, atol=1e-12)


def test_a_mirrored_strategys_update_equals_the_plain_one():
    # A mirrored variable's handle is its copy on the device being updated (strategy.extended.update).
    mirrored = _train(FusedAdam, strategy=tf.distribute.MirroredStrategy(["/cpu:0"]), compiled=True)
    plain = _train(FusedAdam, compiled=True)
    for got, want in zip(mirrored, plain):
        np.testing.assert_array_equal(got, want)


def test_sparse_gradients_take_keras_update():
    start, gradients = _problem()
    results = []
    for optimizer_class in (FusedAdam, keras.optimizers.Adam):
        variable = keras.Variable(start)
        optimizer = optimizer_class(learning_rate=1e-2, **SETTINGS)
        sparse = tf.IndexedSlices(tf.constant(gradients[0][[1, 3]]), tf.constant([1, 3]), tf.constant([5, 3]))
        optimizer.apply_gradients([(sparse, variable)])
        results.append(np.asarray(variable.value))
    np.testing.assert_array_equal(*results)
    assert not np.array_equal(results[0][1], start[1]) and np.array_equal(results[0][0], start[0])
