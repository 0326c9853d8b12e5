"""Hparams overrides, validation, JSON round trip, and the registry."""
import dataclasses

import pytest

import t2t_lite.hparams  # noqa: F401
from t2t_lite import config
from t2t_lite.errors import UserError
from t2t_lite.registry import Registry, hparams_sets


def test_overrides_change_only_named_fields_with_their_types():
    base = hparams_sets.get("transformer_base")()
    hp = config.apply_overrides(base, "d_model=256, train.batch_size=1024,share_embeddings=false,alpha=1")
    assert (hp.model.d_model, hp.train.batch_size, hp.model.share_embeddings, hp.decode.alpha) == (256, 1024, False, 1.0)
    assert isinstance(hp.decode.alpha, float)
    assert dataclasses.replace(hp.model, d_model=512, share_embeddings=True) == base.model


@pytest.mark.parametrize("overrides, message", [
    ("d_modl=3", "unknown hparams key 'd_modl'"),
    ("d_model=x", "expected a int"),
    ("dropout=high", "expected a float"),
    ("share_embeddings=maybe", "expected a bool"),
    ("d_model", "not of the form key=value"),
    ("norm_position=middle", "norm_position must be"),
    ("num_heads=3", "not divisible"),
    ("schedule=cosine", "train.schedule must be one of rsqrt, linear_decay, wsd; got 'cosine'"),
    ("warmup_steps=0", "train.warmup_steps must be at least 1"),
    ("learning_rate_constant=-1", "train.learning_rate_constant must be 0 or more"),
    ("min_learning_rate_fraction=1", "train.min_learning_rate_fraction is the floor"),
    ("min_learning_rate_fraction=-0.1", "train.min_learning_rate_fraction is the floor"),
    ("cooldown_fraction=0", "train.cooldown_fraction is the share"),
    ("cooldown_fraction=1.5", "train.cooldown_fraction is the share"),
    ("warmup_fraction=1", "train.warmup_fraction is the warmup's share"),
    ("warmup_fraction=-0.1", "train.warmup_fraction is the warmup's share"),
])
def test_bad_overrides_raise_user_error(overrides, message):
    with pytest.raises(UserError, match=message):
        config.apply_overrides(hparams_sets.get("transformer_base")(), overrides)


def test_json_round_trip_of_every_registered_set():
    for name in hparams_sets.names():
        hp = hparams_sets.get(name)()
        assert config.from_dict(config.to_dict(hp)) == hp


def test_paper_and_t2t_sets_differ_as_documented():
    paper, t2t = hparams_sets.get("transformer_base")(), hparams_sets.get("transformer_base_v3")()
    assert (paper.model.norm_position, paper.train.warmup_steps, paper.train.adam_beta2) == ("post", 4000, 0.98)
    assert (t2t.model.norm_position, t2t.train.warmup_steps, t2t.train.adam_beta2) == ("pre", 8000, 0.997)
    assert (paper.train.learning_rate_constant, t2t.train.learning_rate_constant) == (1.0, 2.0)
    big = hparams_sets.get("transformer_big")()
    assert (big.model.d_model, big.model.d_ff, big.model.num_heads, big.model.dropout) == (1024, 4096, 16, 0.3)


def test_table3_rows_are_registered():
    names = [n for n in hparams_sets.names() if n.startswith("transformer_table3_")]
    assert {n.split("_")[2] for n in names} == {"a", "b", "c", "d", "e"}
    a1 = hparams_sets.get("transformer_table3_a_h1")().model
    assert (a1.num_heads, a1.head_key_dim, a1.head_value_dim) == (1, 512, 512)
    assert hparams_sets.get("transformer_table3_e_learned_positions")().model.position_encoding == "learned"


def test_registry_rejects_duplicates_and_suggests_close_names():
    registry = Registry("thing")
    registry.register("alpha_beta")(object)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("alpha_beta")(object)
    with pytest.raises(UserError, match="did you mean alpha_beta"):
        registry.get("alpha_betta")


def test_schedule_fields_default_to_the_papers_schedule_and_override():
    base = hparams_sets.get("transformer_base")()
    t = base.train
    assert (t.schedule, t.min_learning_rate_fraction, t.cooldown_fraction) == ("rsqrt", 0.0, 0.2)
    hp = config.apply_overrides(base, "schedule=wsd,cooldown_fraction=1,min_learning_rate_fraction=0.05")
    assert (hp.train.schedule, hp.train.cooldown_fraction, hp.train.min_learning_rate_fraction) == ("wsd", 1.0, 0.05)


def test_hparams_json_written_before_the_schedule_fields_loads_with_the_papers_schedule():
    data = config.to_dict(hparams_sets.get("transformer_base")())
    for name in ("schedule", "min_learning_rate_fraction", "cooldown_fraction", "warmup_fraction"):
        del data["train"][name]
    assert config.from_dict(data) == hparams_sets.get("transformer_base")()


def test_decoder_features_take_plus_separated_names_and_the_old_booleans_still_read():
    parser = hparams_sets.get("transformer_parsing_small_data")()
    assert parser.model.decoder_features == ("word_pointer", "open_phrases")
    assert config.apply_overrides(parser, "decoder_features=open_phrases").model.decoder_features == ("open_phrases",)
    assert config.apply_overrides(parser, "decoder_features=").model.decoder_features == ()
    # docs/problems.md's override of when they were booleans: false takes one out, true puts it back.
    assert config.apply_overrides(parser, "open_phrases=false").model.decoder_features == ("word_pointer",)
    assert config.apply_overrides(parser, "model.open_phrases=false,open_phrases=true").model.decoder_features == (
        "word_pointer", "open_phrases")
    with pytest.raises(UserError, match="expected a bool"):
        config.apply_overrides(parser, "open_phrases=maybe")
    with pytest.raises(UserError, match="names a feature twice"):
        config.apply_overrides(parser, "decoder_features=word_pointer+word_pointer")
    # An hparams.json written then: the booleans become the list, in the order the model added them.
    old = config.to_dict(config.HParams())
    old["model"].pop("decoder_features")
    old["model"].update(open_phrases=True, word_pointer=True)
    assert config.from_dict(old).model.decoder_features == ("word_pointer", "open_phrases")
