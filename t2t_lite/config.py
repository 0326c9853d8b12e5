"""Hyperparameters as frozen dataclasses: model, train and decode groups.

A named set is a zero-argument function returning `HParams`, registered in
`t2t_lite.registry.hparams_sets` and derived from another with
`dataclasses.replace`. Users change a set with strict overrides
("d_model=256,num_heads=4") checked against the field types, and the resolved
set travels as `hparams.json` beside the checkpoints.
"""
import dataclasses
import typing
from typing import Any

from t2t_lite.errors import UserError
from t2t_lite.registry import former_feature_settings


@dataclasses.dataclass(frozen=True)
class ModelHParams:
    """The network's shape; defaults are the paper's base model."""

    # The target vocabulary, shared with the source unless source_vocab_size is set; 0 means "take the problem's".
    vocab_size: int = 0
    # The source's own vocabulary where the problem has one per side (set from the problem; needs
    # share_embeddings false); 0: the sources share vocab_size's.
    source_vocab_size: int = 0
    # N in the paper: identical layers in each stack.
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    # d_model: width of every residual stream and embedding.
    d_model: int = 512
    # d_ff: inner width of the position-wise feed-forward network.
    d_ff: int = 2048
    # h: attention heads.
    num_heads: int = 8
    # d_k and d_v per head; 0 means d_model // num_heads (Table 3 row B changes d_k alone).
    key_dim: int = 0
    value_dim: int = 0
    # P_drop on embeddings+positions and on each sub-layer output before the residual add.
    dropout: float = 0.1
    # Dropout on attention weights and on the FFN's hidden layer: not in the paper, 0.1 in t2t v3.
    attention_dropout: float = 0.0
    relu_dropout: float = 0.0
    # "post": LayerNorm(x + Sublayer(x)) as in the paper; "pre": x + Sublayer(LayerNorm(x)) as in t2t v2+.
    norm_position: str = "post"
    # "sinusoid" (paper) or "learned" (Table 3 row E).
    position_encoding: str = "sinusoid"
    # Longest position a learned positional embedding can represent.
    max_position: int = 1024
    # One matrix for source embedding, target embedding and pre-softmax projection (paper 3.4); false keeps a
    # source embedding of its own (the target's stays tied to the pre-softmax projection).
    share_embeddings: bool = True
    layer_norm_epsilon: float = 1e-6
    # What each decoder input is also told beside its token and position: names in registry.decoder_features
    # (t2t_lite/models/decoder_features.py), e.g. a parser's ("word_pointer", "open_phrases"). As an override,
    # "+"-separated: decoder_features=word_pointer+open_phrases (empty for none).
    decoder_features: tuple[str, ...] = ()

    @property
    def head_key_dim(self) -> int:
        return self.key_dim or self.d_model // self.num_heads

    @property
    def head_value_dim(self) -> int:
        return self.value_dim or self.d_model // self.num_heads


@dataclasses.dataclass(frozen=True)
class TrainHParams:
    """Optimisation and batching; defaults are the paper's (section 5)."""

    # Tokens per batch per replica (t2t's batch_size); the paper's ~25k global is 8 x ~3k.
    batch_size: int = 4096
    # Micro-batches of batch_size tokens summed into one update: 8 on one device matches 8 replicas of one each.
    accumulation_steps: int = 1
    # Training examples longer than this (inputs or targets, with EOS) are dropped.
    max_length: int = 256
    # Bucket training examples by (source length, target length) instead of t2t's longer side alone: the
    # shorter side of a pair is then padded far less (batch_size still caps the padded longer side).
    bucket_both_sides: bool = True
    # eps_ls: label smoothing.
    label_smoothing: float = 0.1
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_epsilon: float = 1e-9
    # lr = constant * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5); the paper uses 1.0, t2t v3 2.0.
    learning_rate_constant: float = 1.0
    warmup_steps: int = 4000
    # "rsqrt": the paper's schedule above. "linear_decay": linear warmup to the peak, then linearly down to
    # the floor at the last step. "wsd": warmup, constant at the peak, then linearly down to the floor over
    # the last cooldown_fraction of the run. The last step is train_steps, or under a time budget the step
    # the budget is estimated to run out at (training/last_step.py). Both new schedules peak at rsqrt's peak,
    # constant * d_model^-0.5 * warmup^-0.5, so a set switching schedule keeps its peak rate.
    schedule: str = "rsqrt"
    # linear_decay and wsd: > 0 warms up over this share of the run (of its last step) instead of
    # warmup_steps, which then only sets the peak rate (rsqrt ignores it).
    warmup_fraction: float = 0.0
    # linear_decay and wsd end at this fraction of the peak rather than at zero (rsqrt ignores it).
    min_learning_rate_fraction: float = 0.0
    # wsd: the share of the run's steps spent cooling down to the floor (Hägele et al., 2024 use about 0.2).
    cooldown_fraction: float = 0.2
    # Steps the set was designed for (paper: 100K base, 300K big); --train_steps overrides.
    train_steps: int = 100_000
    # Average this many final checkpoints after training (paper: 5 base, 20 big); 0 = off.
    average_last_checkpoints: int = 5
    # 0: average the last regular checkpoints. s > 0: save those checkpoints at evenly spaced points of the
    # last fraction s of the run (of --train_minutes if given, else of train_steps), so the average is of its end.
    average_span: float = 0.0


# The least value of each numeric decode setting: the one place these rules are written (a DecodeHParams
# and a decode request both check them when made).
DECODE_LEAST = {"beam_size": 1, "alpha": 0, "extra_length": 0, "batch_size": 1, "nbest": 1}


def check_least(settings: dict) -> None:
    """Raises a UserError naming the first of DECODE_LEAST's settings that `settings` (name -> value) holds
    below its least value; a setting it lacks, or holds as None (a request's "keep the engine's"), passes."""
    for name, least in DECODE_LEAST.items():
        value = settings.get(name)
        if value is not None and value < least:
            raise UserError(f"`{name}` must be at least {least}, got {value}")


@dataclasses.dataclass(frozen=True)
class DecodeHParams:
    """Beam search settings; defaults are the paper's (section 6.1). Checked when made (DECODE_LEAST)."""

    beam_size: int = 4
    # GNMT length penalty exponent: lp(Y) = ((5 + |Y|) / 6) ** alpha.
    alpha: float = 0.6
    # Maximum output length = input length + extra_length.
    extra_length: int = 50
    # Sentences per decoding batch.
    batch_size: int = 32
    # Emit only outputs the problem allows (Problem.output_constraint: for parsing, well-formed trees over
    # the input's words, a POS tag per word or the words themselves copied); off decodes freely, as the paper does.
    constrained_decoding: bool = False

    def __post_init__(self):
        check_least(vars(self))


@dataclasses.dataclass(frozen=True)
class HParams:
    """Everything a run needs to rebuild its model, optimizer and decoder."""

    model: ModelHParams = ModelHParams()
    train: TrainHParams = TrainHParams()
    decode: DecodeHParams = DecodeHParams()
    # Registered model class that these hparams build.
    model_name: str = "transformer"


_GROUPS = ("model", "train", "decode")


_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
# How an override's text becomes each field type's value; a tuple is "+"-separated, as "," separates overrides.
_PARSERS = {bool: lambda text: _BOOLEANS[text.lower()], int: int, float: float, str: str,
            tuple[str, ...]: lambda text: tuple(filter(None, (part.strip() for part in text.split("+"))))}


def _parse_value(key: str, text: str, kind: type) -> Any:
    """Converts an override's text to the field's type, or raises UserError."""
    try:
        return _PARSERS[kind](text)
    except (KeyError, ValueError):
        raise UserError(f"hparams override {key}={text!r}: expected a {getattr(kind, '__name__', kind)}") from None


def apply_overrides(hparams: HParams, overrides: str) -> HParams:
    """Returns `hparams` with "key=value,key=value" overrides applied.

    A key is a field name ("d_model") or group-qualified ("train.batch_size");
    bare names must be unambiguous across groups.

    >>> apply_overrides(HParams(), "d_model=256,train.batch_size=1024").model.d_model
    256
    """
    changes: dict[str, dict[str, Any]] = {group: {} for group in _GROUPS}
    for item in filter(None, (part.strip() for part in overrides.split(","))):
        key, sep, text = item.partition("=")
        if not sep:
            raise UserError(f"hparams override {item!r} is not of the form key=value")
        former = key.strip().removeprefix("model.")
        if former in former_feature_settings:
            features = changes["model"].get("decoder_features", hparams.model.decoder_features)
            changes["model"]["decoder_features"] = translate_former_features(
                {former: _parse_value(key, text.strip(), bool)}, features)[1]
            continue
        group, name, kind = _resolve_key(key.strip())
        changes[group][name] = _parse_value(key, text.strip(), kind)
    return validate(derive(hparams, **changes))


def derive(base: HParams, **groups: dict) -> HParams:
    """base with some fields of each group given (model=, train=, decode=: {field: value}) replaced: an
    override's result before validation, and how the bundled hparams sets derive one from another."""
    return dataclasses.replace(base, **{name: dataclasses.replace(getattr(base, name), **changes)
                                        for name, changes in groups.items()})


def translate_former_features(settings: dict, features: tuple[str, ...]) -> tuple[dict, tuple[str, ...]]:
    """Model settings with the booleans that decoder features replaced (registry.former_feature_settings) taken
    out and turned into `features`: true adds the feature (in the order the old models added them), false
    removes it.

    Args:
      settings: a model's settings (hparams.json's "model", a .keras config, a parsed override) holding any.
      features: the decoder features before these settings.
    Returns:
      (settings without the old booleans, the features after them).
    """
    settings, features = dict(settings), list(features)
    for setting, name in former_feature_settings.items():
        if setting not in settings:
            continue
        if settings.pop(setting):
            features += [] if name in features else [name]
        elif name in features:
            features.remove(name)
    return settings, tuple(features)


def _resolve_key(key: str) -> tuple[str, str, type]:
    """The group, field and field type an override's key names, or a UserError."""
    # Every annotation of a group is one of its fields.
    group_fields = {g: typing.get_type_hints(type(getattr(HParams(), g))) for g in _GROUPS}
    if "." in key:
        group, _, name = key.partition(".")
        owners = [group] if name in group_fields.get(group, {}) else []
    else:
        name, owners = key, [g for g in _GROUPS if key in group_fields[g]]
    if len(owners) > 1:
        raise UserError(f"hparams key {key!r} is ambiguous; write one of " + ", ".join(f"{g}.{key}" for g in owners))
    if owners:
        return owners[0], name, group_fields[owners[0]][name]
    valid = sorted(f"{g}.{n}" for g in _GROUPS for n in group_fields[g])
    raise UserError(f"unknown hparams key {key!r}; valid keys: {', '.join(valid)}")


SCHEDULES = ("rsqrt", "linear_decay", "wsd")


def validate(hparams: HParams) -> HParams:
    """Checks cross-field constraints; returns hparams unchanged or raises UserError."""
    m, t = hparams.model, hparams.train
    if m.norm_position not in ("post", "pre"):
        raise UserError(f"norm_position must be 'post' or 'pre', got {m.norm_position!r}")
    if m.position_encoding not in ("sinusoid", "learned"):
        raise UserError(f"position_encoding must be 'sinusoid' or 'learned', got {m.position_encoding!r}")
    if not m.key_dim and m.d_model % m.num_heads:
        raise UserError(f"d_model={m.d_model} is not divisible by num_heads={m.num_heads}; set key_dim and value_dim")
    # Names are looked up when the model is made: a run's hparams.json is read before its usr dir is imported.
    if len(set(m.decoder_features)) < len(m.decoder_features):
        raise UserError(f"decoder_features names a feature twice: {'+'.join(m.decoder_features)}")
    for name, value in (("d_model", m.d_model), ("d_ff", m.d_ff), ("num_heads", m.num_heads)):
        if value <= 0:
            raise UserError(f"{name} must be positive, got {value}")
    if hparams.train.batch_size <= 0 or hparams.train.max_length <= 0:  # named as train's: decoding has its own
        raise UserError("train.batch_size and train.max_length must be positive")
    if not 0.0 <= t.average_span <= 1.0:
        raise UserError(f"train.average_span is a fraction of the run, 0 to 1; got {t.average_span}")
    if t.schedule not in SCHEDULES:
        raise UserError(f"train.schedule must be one of {', '.join(SCHEDULES)}; got {t.schedule!r}")
    if t.warmup_steps < 1:
        raise UserError(f"train.warmup_steps must be at least 1 (the peak rate is taken there), got {t.warmup_steps}")
    if not 0.0 <= t.warmup_fraction < 1.0:
        raise UserError(f"train.warmup_fraction is the warmup's share of the run, 0 (use train.warmup_steps) up to "
                        f"but not including 1; got {t.warmup_fraction}")
    if t.learning_rate_constant < 0:
        raise UserError(f"train.learning_rate_constant must be 0 or more, got {t.learning_rate_constant}")
    if not 0.0 <= t.min_learning_rate_fraction < 1.0:
        raise UserError("train.min_learning_rate_fraction is the floor as a fraction of the peak rate, "
                        f"0 (decay to zero) up to but not including 1; got {t.min_learning_rate_fraction}")
    if not 0.0 < t.cooldown_fraction <= 1.0:
        raise UserError("train.cooldown_fraction is the share of the run spent cooling down, more than 0 "
                        f"and at most 1; got {t.cooldown_fraction}")
    if t.accumulation_steps < 1:
        raise UserError(f"train.accumulation_steps must be at least 1, got {t.accumulation_steps}")
    return hparams


def to_dict(hparams: HParams) -> dict:
    """A JSON-ready dict of all groups."""
    return dataclasses.asdict(hparams)


def from_dict(data: dict) -> HParams:
    """Inverse of `to_dict`; unknown or missing keys raise UserError."""
    try:
        model, features = translate_former_features(data["model"], tuple(data["model"].get("decoder_features", ())))
        data = {**data, "model": {**model, "decoder_features": features}}
        groups = {g: type(getattr(HParams(), g))(**data[g]) for g in _GROUPS}
        return validate(HParams(model_name=data.get("model_name", "transformer"), **groups))
    except (KeyError, TypeError) as error:
        raise UserError(f"hparams do not match this version of t2t-lite: {error}") from None
