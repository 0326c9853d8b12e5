"""Registered hparams sets that carry advice: transformer_small_data."""

import keras
import numpy as np

import t2t_lite.hparams  # noqa: F401
from t2t_lite import config
from t2t_lite.models import build_model
from t2t_lite.registry import hparams_sets
from t2t_lite.training.steps import learning_rate_schedule


def test_small_data_set_is_registered_with_the_multi30k_protocol_values():
    assert "transformer_small_data" in hparams_sets.names()
    hparams = hparams_sets.get("transformer_small_data")()
    m, t = hparams.model, hparams.train
    assert (m.num_encoder_layers, m.num_decoder_layers, m.d_model, m.d_ff, m.num_heads) == (3, 3, 256, 1024, 4)
    assert (m.norm_position, m.dropout, m.attention_dropout, m.relu_dropout) == ("pre", 0.1, 0.1, 0.1)
    assert (t.schedule, t.warmup_fraction, t.min_learning_rate_fraction) == ("linear_decay", 0.1, 0.0)
    assert (t.learning_rate_constant, t.warmup_steps, t.label_smoothing, t.batch_size) == (0.5, 200, 0.1, 4096)
    assert (t.train_steps, t.average_last_checkpoints, t.average_span) == (5000, 5, 0.1)
    assert hparams.decode.batch_size == 64
    # The peak the docstring promises, read off the schedule a run builds, reached as the warmup tenth ends.
    rates = keras.ops.convert_to_numpy(learning_rate_schedule(hparams)(np.arange(t.train_steps)))
    assert abs(rates.max() - 2.2e-3) < 1e-5 and int(rates.argmax()) + 1 == int(0.1 * t.train_steps)
    assert config.validate(hparams) is hparams


def test_small_data_docstring_gives_a_reason_for_every_setting():
    doc = hparams_sets.get("transformer_small_data").__doc__
    for value in ("3+3 layers", "d_model 256", "d_ff 1024", "4 heads", "learning_rate_constant 0.5",
                  "warmup_steps 200", "schedule linear_decay", "warmup_fraction 0.1", "dropout",
                  "label_smoothing 0.1", "batch_size 4096", "average_span 0.1", "decode batch_size 64"):
        assert value in doc, value


def test_small_data_model_builds_at_the_protocols_size():
    hparams = config.apply_overrides(hparams_sets.get("transformer_small_data")(), "vocab_size=8000")
    parameters = build_model(hparams).count_params()
    assert 7_000_000 < parameters < 8_000_000, parameters  # ~7.6M with the 8k shared vocabulary


def test_parsing_small_data_set_has_tiny_sizes_small_datas_schedule_and_its_documented_peak():
    hparams = hparams_sets.get("transformer_parsing_small_data")()
    m, t, d = hparams.model, hparams.train, hparams.decode
    assert (m.num_encoder_layers, m.num_decoder_layers, m.d_model, m.d_ff, m.num_heads) == (2, 2, 128, 512, 4)
    assert (m.norm_position, m.dropout, m.attention_dropout, m.relu_dropout) == ("pre", 0.1, 0.1, 0.1)
    assert (t.schedule, t.warmup_fraction, t.batch_size, t.max_length, t.label_smoothing) == (
        "linear_decay", 0.1, 1024, 512, 0.1)
    assert m.decoder_features == ("word_pointer", "open_phrases")
    assert (d.beam_size, d.batch_size, d.alpha, d.extra_length, d.constrained_decoding) == (6, 128, 1.0, 150, True)
    # The peak its docstring gives (3.1e-3), read off the schedule a run builds.
    rates = keras.ops.convert_to_numpy(learning_rate_schedule(hparams)(np.arange(t.train_steps)))
    assert abs(rates.max() - 3.125e-3) < 1e-5 and "peak 3.1e-3" in hparams_sets.get("transformer_parsing_small_data").__doc__
    assert config.validate(hparams) is hparams
