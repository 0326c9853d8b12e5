"""A trained Transformer saved as .keras reloads with keras.saving.load_model to the same logits."""
import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

import t2t_lite.hparams  # noqa: F401
from t2t_lite import config
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.models import build_model
from t2t_lite.models.transformer import Transformer
from t2t_lite.registry import hparams_sets

from parser_features import BOTH, set_tables

TINY = "vocab_size=13,num_encoder_layers=1,num_decoder_layers=1,d_model=16,d_ff=32,num_heads=2"


def trained(overrides):
    """A tiny model after a few SGD steps on random pairs: weights far from any initialisation."""
    hp = config.apply_overrides(hparams_sets.get("transformer_tiny")(), f"{TINY},{overrides}")
    model = build_model(hp)
    set_tables(model, word_starts=[3, 4, 7, 11])  # weights the reloaded model must carry
    rng = np.random.default_rng(0)
    batch = {"inputs": rng.integers(2, 13, (4, 6)).astype(np.int32),
             "targets": rng.integers(2, 13, (4, 5)).astype(np.int32)}
    optimizer = keras.optimizers.SGD(0.5)
    for _ in range(3):
        with tf.GradientTape() as tape:
            logits = model(batch, training=True)
            loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(batch["targets"], logits,
                                                                               from_logits=True))
        optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
    return model, hp, batch


@pytest.mark.parametrize("overrides", ["norm_position=post", "norm_position=pre,share_embeddings=false,"
                                       "position_encoding=learned,max_position=64",
                                       BOTH])
def test_a_saved_model_reloads_to_the_same_logits_and_decodes_the_same(overrides, tmp_path):
    model, hp, batch = trained(overrides)
    path = str(tmp_path / "x.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert type(reloaded) is Transformer and reloaded.get_config() == model.get_config()
    np.testing.assert_array_equal(reloaded(batch, training=False).numpy(), model(batch, training=False).numpy())
    decode = dataclasses.replace(hp.decode, beam_size=2, extra_length=3)
    ids, scores = Decoder(model, decode).search(batch["inputs"], np.full([4], 4, np.int32))
    reloaded_ids, reloaded_scores = Decoder(reloaded, decode).search(batch["inputs"], np.full([4], 4, np.int32))
    np.testing.assert_array_equal(reloaded_ids.numpy(), ids.numpy())
    np.testing.assert_array_equal(reloaded_scores.numpy(), scores.numpy())


def test_the_models_settings_are_its_hparams_fields():
    """build_model maps ModelHParams one to one onto the model's plain settings."""
    hp = config.apply_overrides(hparams_sets.get("transformer_tiny")(), f"{TINY},key_dim=4")
    settings = build_model(hp).get_config()
    assert {name: settings[name] for name in vars(hp.model)} == vars(hp.model)
