"""The Keras 3 layer contract, checked for every layer class by one harness (as keras-hub's run_layer_test).

Each layer: its config round-trips through Keras serialization to an equal
config and, with the weights copied, the same outputs; it builds the weights
its settings call for; eager equals tf.function; one training step moves its
outputs; it runs under mixed_bfloat16 with float32 variables, its sub-layers
following its dtype policy.
"""
import dataclasses
import json
from collections.abc import Callable

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.layers.attention import MultiHeadAttention, causal_bias, padding_bias
from t2t_lite.layers.dropout import Dropout
from t2t_lite.layers.embedding import LearnedPosition, SharedEmbedding, SinusoidalPosition
from t2t_lite.layers.feed_forward import FeedForward
from t2t_lite.layers.transformer_layers import DecoderLayer, EncoderLayer, Residual
from t2t_lite.models.transformer import Transformer

D, V = 16, 11
RNG = np.random.default_rng(0)
X = RNG.normal(size=(2, 5, D)).astype(np.float32)  # [B, T, D]
MEMORY = RNG.normal(size=(2, 3, D)).astype(np.float32)  # [B, T_src, D]
IDS = np.array([[3, 4, 5, 1, 0], [6, 7, 8, 9, 1]], np.int32)  # [B, T]
SOURCE = np.array([[3, 4, 1], [5, 1, 0]], np.int32)  # [B, T_src]


@dataclasses.dataclass
class Case:
    """A layer class, its settings, and how to call it."""

    cls: type
    settings: dict
    run: Callable  # (layer, training) -> one tensor
    weights: int  # variables once built
    mixed_dtype: str = "bfloat16"  # the output's dtype under mixed_bfloat16

    @property
    def id(self):
        return self.cls.__name__


CASES = [
    Case(MultiHeadAttention, dict(num_heads=2, key_dim=8, value_dim=4, d_model=D, dropout=0.1),
         lambda layer, training: layer(X, memory=MEMORY, bias=padding_bias(SOURCE), training=training), 8),
    Case(FeedForward, dict(d_model=D, d_ff=32, dropout=0.1),
         lambda layer, training: layer(X, training=training), 4),
    Case(Residual, dict(norm_position="pre", dropout=0.1, epsilon=1e-6),
         lambda layer, training: layer(X, layer.before(X), training=training), 2),
    Case(EncoderLayer, dict(d_model=D, num_heads=2, d_ff=32, dropout=0.1, attention_dropout=0.1,
                            norm_position="pre"),
         lambda layer, training: layer(X, padding_bias(IDS), training=training), 8 + 4 + 2 * 2),
    Case(DecoderLayer, dict(d_model=D, num_heads=2, d_ff=32, key_dim=4, value_dim=6, dropout=0.1),
         lambda layer, training: layer(X, MEMORY, causal_bias(5), padding_bias(SOURCE), training=training),
         2 * 8 + 4 + 3 * 2),
    Case(SharedEmbedding, dict(vocab_size=V, d_model=D),
         lambda layer, training: layer.logits(layer(IDS)), 1, mixed_dtype="float32"),
    Case(SinusoidalPosition, {}, lambda layer, training: layer(X), 0),
    Case(LearnedPosition, dict(max_position=8, d_model=D), lambda layer, training: layer(X), 1),
    Case(Dropout, dict(rate=0.5, seed=3), lambda layer, training: layer(X, training=training), 0),
    Case(Transformer, dict(vocab_size=V, num_encoder_layers=1, num_decoder_layers=1, d_model=D, d_ff=32,
                           num_heads=2, dropout=0.1, norm_position="pre", share_embeddings=False),
         lambda layer, training: layer({"inputs": SOURCE, "targets": IDS}, training=training),
         2 + 16 + 26 + 2 * 2, mixed_dtype="float32"),
]


def _made(case, **overrides):
    layer = case.cls(**case.settings, **overrides)
    case.run(layer, False)  # builds
    return layer


@pytest.fixture(autouse=True)
def _float32_policy():
    yield
    keras.mixed_precision.set_global_policy("float32")


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_the_config_round_trip_rebuilds_an_equal_layer(case):
    layer = _made(case)
    config = layer.get_config()
    assert case.settings.items() <= config.items()  # plain settings, as given
    serialized = json.loads(json.dumps(keras.saving.serialize_keras_object(layer)))
    rebuilt = keras.saving.deserialize_keras_object(serialized)
    assert type(rebuilt) is case.cls and rebuilt.get_config() == config
    case.run(rebuilt, False)
    rebuilt.set_weights(layer.get_weights())
    np.testing.assert_array_equal(case.run(rebuilt, False).numpy(), case.run(layer, False).numpy())


def sublayers(layer) -> list:
    """layer and every layer under it, through public attributes (Keras 3 has no public recursive walk)."""
    found, pending = [], [layer]
    while pending:
        current = pending.pop()
        if not any(current is seen for seen in found):
            found.append(current)
            for name, value in vars(current).items():
                values = value if isinstance(value, (list, tuple)) else [value]
                pending.extend(v for v in values if isinstance(v, keras.layers.Layer) and not name.startswith("_"))
    return found


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_it_builds_the_weights_its_settings_call_for(case):
    layer = case.cls(**case.settings)
    assert not layer.weights
    case.run(layer, False)
    assert layer.built and len(layer.weights) == case.weights
    assert all(sublayer.built for sublayer in sublayers(layer))


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_eager_equals_tf_function(case):
    layer = _made(case)
    eager = case.run(layer, False).numpy()
    np.testing.assert_allclose(tf.function(lambda: case.run(layer, False))().numpy(), eager, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_one_training_step_moves_the_weights(case):
    layer = _made(case)
    before = case.run(layer, False).numpy()
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(tf.cast(case.run(layer, True), tf.float32)))
    if not case.weights:
        assert not layer.trainable_weights
        return
    gradients = tape.gradient(loss, layer.trainable_weights)
    assert all(gradient is not None for gradient in gradients)
    keras.optimizers.SGD(0.05).apply(gradients, layer.trainable_weights)
    assert np.abs(case.run(layer, False).numpy() - before).max() > 1e-4


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_it_runs_under_mixed_bfloat16(case):
    layer = _made(case, dtype="mixed_bfloat16")
    outputs = case.run(layer, True)
    assert outputs.dtype == case.mixed_dtype
    assert np.isfinite(tf.cast(outputs, tf.float32).numpy()).all()
    assert all(weight.dtype == "float32" for weight in layer.weights)
    assert {sublayer.dtype_policy.name for sublayer in sublayers(layer)} == {"mixed_bfloat16"}
    # The same under the global policy, as training sets it.
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    assert case.run(_made(case), False).dtype == case.mixed_dtype
