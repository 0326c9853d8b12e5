"""The Transformer model: sizes against the paper, cached decoding against the full pass."""
import numpy as np
import pytest

import t2t_lite.hparams  # noqa: F401
from t2t_lite import config
from t2t_lite.decoding.cached_step import CachedStep
from t2t_lite.models import build_model
from t2t_lite.models.transformer import shift_right
from t2t_lite.parsing.features import WordPointer
from t2t_lite.ops.step_matmul import StepMatmulSettings
from t2t_lite.registry import hparams_sets

from parser_features import set_tables


def tiny(overrides=""):
    base = "vocab_size=23,num_encoder_layers=2,num_decoder_layers=2,d_model=16,d_ff=32,num_heads=4,dropout=0"
    return config.apply_overrides(hparams_sets.get("transformer_tiny")(), ",".join(filter(None, [base, overrides])))


@pytest.mark.parametrize("set_name, low, high", [
    ("transformer_base", 62.5e6, 63.5e6),
    ("transformer_big", 213e6, 215.5e6),
])
def test_parameter_count_with_vocabulary_37000(set_name, low, high):
    hp = config.apply_overrides(hparams_sets.get(set_name)(), "vocab_size=37000")
    count = build_model(hp).count_params()
    assert low <= count <= high


def test_base_parameter_count_equals_the_layer_arithmetic():
    d, f, v, n = 512, 2048, 37000, 6
    attention = 4 * (d * d + d)
    ffn = d * f + f + f * d + d
    encoder = n * (attention + ffn + 2 * 2 * d)
    decoder = n * (2 * attention + ffn + 3 * 2 * d)
    hp = config.apply_overrides(hparams_sets.get("transformer_base")(), "vocab_size=37000")
    assert build_model(hp).count_params() == v * d + encoder + decoder


@pytest.mark.parametrize("overrides", ["norm_position=post",
                                       "norm_position=pre,position_encoding=learned,share_embeddings=false"])
def test_the_built_model_holds_every_variable_a_forward_pass_and_decoding_use(overrides):
    # Transformer.build creates the variables from the settings, without running `call`: a layer it missed
    # would be built (or fail to be) at the first call instead.
    import tensorflow as tf

    model = build_model(tiny(overrides))
    built = [(v.path, tuple(v.shape)) for v in model.weights]
    inputs, targets = _batch(np.random.default_rng(0))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model({"inputs": inputs, "targets": targets}, training=True))
    gradients = tape.gradient(loss, model.trainable_weights)
    step = CachedStep(model, inputs, 3, 2, StepMatmulSettings())  # the beam search's decoding step
    step(np.zeros((6, 1), np.int32), 0, step.initial_state)
    assert [(v.path, tuple(v.shape)) for v in model.weights] == built
    assert all(g is not None for g in gradients)  # every variable built is one the forward pass uses
    # Per layer: 4 or 8 attention Dense, 2 feed-forward Dense and 2 or 3 LayerNorms, 2 variables each; then the
    # embedding; pre-norm's 2 final LayerNorms, a second embedding and the position table.
    encoder, decoder = 2 * (4 + 2 + 2), 2 * (8 + 2 + 3)
    assert len(model.trainable_weights) == 2 * encoder + 2 * decoder + 1 + (2 * 2 + 1 + 1 if "pre" in overrides else 0)


def _batch(rng, batch=3):
    inputs = rng.integers(2, 23, size=(batch, 7)).astype(np.int32)
    inputs[0, 4:] = 0
    targets = rng.integers(2, 23, size=(batch, 6)).astype(np.int32)
    return inputs, targets


def pointer_model(overrides=""):
    """A tiny model with word_pointer, the even ids beginning words (so that each batch has several), and with
    open_phrases when overrides ask."""
    return set_tables(build_model(tiny(overrides or "decoder_features=word_pointer")))


def test_each_decoder_input_points_at_the_next_source_word_it_has_not_begun():
    model = pointer_model()
    # Even ids begin words, and so does the first piece: words [3] [4 5] [6] [8] / [2] [2 7].
    inputs = np.array([[3, 4, 5, 6, 8, 1], [2, 2, 7, 1, 0, 0]], np.int32)
    memory = np.random.default_rng(0).normal(size=(2, 6, 16)).astype(np.float32)
    word_memory = model.feature_contexts(inputs, memory)["word_pointer"].numpy()
    # Two rows per sentence (beams), sentence-major; one had begun a word before this column.
    decoder_inputs = np.array([[0, 4, 3, 6], [0, 3, 3, 3], [0, 2, 2, 2], [0, 9, 2, 3]], np.int32)
    begun = np.array([0, 1, 0, 0], np.int32)
    pointed, begun_after = WordPointer()(model, word_memory, decoder_inputs, begun)
    starts = [[0, 1, 3, 4], [0, 1]]  # each sentence's word-initial pieces
    expected = np.zeros((4, 4, 16), np.float32)
    for row in range(4):
        sentence = row // 2
        count = begun[row]
        for t in range(4):
            count += decoder_inputs[row, t] % 2 == 0 and decoder_inputs[row, t] > 0
            if count < len(starts[sentence]):
                expected[row, t] = memory[sentence, starts[sentence][count]]
    np.testing.assert_allclose(pointed.numpy(), expected, atol=1e-6)
    np.testing.assert_array_equal(begun_after.numpy(), [2, 1, 3, 1])
    np.testing.assert_array_equal(word_memory[0, 4:], 0)  # four words, then nothing


def test_decoder_is_causal_and_padding_in_inputs_is_ignored():
    model = build_model(tiny())
    inputs, targets = _batch(np.random.default_rng(1))
    base = model({"inputs": inputs, "targets": targets}).numpy()
    later_changed = targets.copy()
    later_changed[:, 4:] = 5
    changed = model({"inputs": inputs, "targets": later_changed}).numpy()
    # Position t sees targets < t only: logits up to position 4 are unchanged.
    np.testing.assert_allclose(changed[:, :5], base[:, :5], atol=1e-6)
    assert np.abs(changed[:, 5:] - base[:, 5:]).max() > 1e-4
    longer = np.pad(inputs, [[0, 0], [0, 3]])  # more PAD on the source side
    np.testing.assert_allclose(model({"inputs": longer, "targets": targets}).numpy(), base, atol=1e-5)


def test_shift_right_prepends_start_id():
    np.testing.assert_array_equal(np.asarray(shift_right(np.array([[5, 6, 1]]))), [[0, 5, 6]])


@pytest.mark.parametrize("overrides", ["", "share_embeddings=false,norm_position=pre"])
def test_training_loss_from_decoder_states_equals_loss_of_the_logits_with_gradients(overrides):
    """What the train step differentiates (states, projected inside the loss) is the loss of call()'s logits."""
    import tensorflow as tf

    from test_losses import plain_smoothed_loss

    model = build_model(tiny(overrides))
    inputs, targets = _batch(np.random.default_rng(2))
    targets[1, 3:] = 0
    batch = {"inputs": inputs, "targets": targets}
    results = []
    for fused in (False, True):
        with tf.GradientTape() as tape:
            if fused:
                states = model.decoder_states(batch, training=False)
                loss = model.token_losses(states, targets, 0.1, slices=4, differentiable=True).loss_sum
            else:
                loss = plain_smoothed_loss(model(batch, training=False), targets, 0.1)
        gradients = tape.gradient(loss, model.trainable_variables)
        results.append((float(loss), [np.asarray(tf.convert_to_tensor(g)) for g in gradients]))
    (plain_loss, plain_grads), (fused_loss, fused_grads) = results
    np.testing.assert_allclose(fused_loss, plain_loss, rtol=1e-5)
    assert len(fused_grads) == len(plain_grads) == len(model.trainable_variables)
    for fused_grad, plain_grad in zip(fused_grads, plain_grads):
        np.testing.assert_allclose(fused_grad, plain_grad, rtol=1e-4, atol=1e-6)
