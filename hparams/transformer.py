"""Registered Transformer hparams sets: the paper's, tensor2tensor's later ones, Table 3 and small sets.

Every set is a zero-argument function returning HParams, derived from another
with config.derive so the differences are visible at a glance.
"""
from t2t_lite.config import HParams, derive
from t2t_lite.registry import hparams_sets


@hparams_sets.register("transformer_base")
def transformer_base() -> HParams:
    """The paper's base model (Table 3 row "base"): post-norm, Adam 0.9/0.98/1e-9, warmup 4000."""
    return HParams()  # the groups' defaults are the paper's


@hparams_sets.register("transformer_big")
def transformer_big() -> HParams:
    """The paper's big model: d 1024, d_ff 4096, 16 heads, P_drop 0.3, 300K steps, average 20."""
    return derive(transformer_base(),
                  model=dict(d_model=1024, d_ff=4096, num_heads=16, dropout=0.3),
                  train=dict(train_steps=300_000, average_last_checkpoints=20))


@hparams_sets.register("transformer_big_enfr")
def transformer_big_enfr() -> HParams:
    """The paper's big En-Fr model, which used P_drop 0.1 instead of 0.3."""
    return derive(transformer_big(), model=dict(dropout=0.1))


@hparams_sets.register("transformer_base_v3")
def transformer_base_v3() -> HParams:
    """tensor2tensor's later transformer_base: pre-norm, LR constant 2.0, warmup 8000, beta2 0.997."""
    return derive(transformer_base(),
                  model=dict(norm_position="pre", attention_dropout=0.1, relu_dropout=0.1),
                  train=dict(learning_rate_constant=2.0, warmup_steps=8000, adam_beta2=0.997))


@hparams_sets.register("transformer_base_v3_single_gpu")
def transformer_base_v3_single_gpu() -> HParams:
    """t2t's *_single_gpu variant: warmup 16000 for the smaller per-step batch."""
    return derive(transformer_base_v3(), train=dict(warmup_steps=16000))


@hparams_sets.register("transformer_big_v3")
def transformer_big_v3() -> HParams:
    """tensor2tensor's transformer_big: base_v3 with the big sizes, dropout 0.3, 2048 tokens per GPU."""
    return derive(transformer_base_v3(),
                  model=dict(d_model=1024, d_ff=4096, num_heads=16, dropout=0.3),
                  train=dict(batch_size=2048, train_steps=300_000, average_last_checkpoints=20))


# Table 3 of the paper: each row changes the base model in one respect.
# (set name suffix, model changes, train changes)
_TABLE3 = [
    # (A) heads, keeping the attention width H * Dk = 512.
    ("a_h1", dict(num_heads=1, key_dim=512, value_dim=512), {}),
    ("a_h4", dict(num_heads=4, key_dim=128, value_dim=128), {}),
    ("a_h16", dict(num_heads=16, key_dim=32, value_dim=32), {}),
    ("a_h32", dict(num_heads=32, key_dim=16, value_dim=16), {}),
    # (B) smaller attention keys only.
    ("b_dk16", dict(key_dim=16), {}),
    ("b_dk32", dict(key_dim=32), {}),
    # (C) depth and width.
    ("c_n2", dict(num_encoder_layers=2, num_decoder_layers=2), {}),
    ("c_n4", dict(num_encoder_layers=4, num_decoder_layers=4), {}),
    ("c_n8", dict(num_encoder_layers=8, num_decoder_layers=8), {}),
    ("c_d256", dict(d_model=256, key_dim=32, value_dim=32), {}),
    ("c_d1024", dict(d_model=1024, key_dim=128, value_dim=128), {}),
    ("c_dff1024", dict(d_ff=1024), {}),
    ("c_dff4096", dict(d_ff=4096), {}),
    # (D) regularisation.
    ("d_drop0", dict(dropout=0.0), {}),
    ("d_drop02", dict(dropout=0.2), {}),
    ("d_ls0", {}, dict(label_smoothing=0.0)),
    ("d_ls02", {}, dict(label_smoothing=0.2)),
    # (E) learned positional embeddings instead of sinusoids.
    ("e_learned_positions", dict(position_encoding="learned"), {}),
]


def _register_table3(suffix: str, model: dict, train: dict) -> None:
    def table3_set() -> HParams:
        return derive(transformer_base(), model=model, train=train)

    table3_set.__doc__ = f"Paper Table 3 variant {suffix}: base with {model or train}."
    hparams_sets.register(f"transformer_table3_{suffix}")(table3_set)


for _suffix, _model, _train in _TABLE3:
    _register_table3(_suffix, _model, _train)


@hparams_sets.register("transformer_small")
def transformer_small() -> HParams:
    """t2t's transformer_small sizes (2 layers, d 256, 4 heads) for CPU experiments."""
    return derive(transformer_base_v3(),
                  model=dict(num_encoder_layers=2, num_decoder_layers=2, d_model=256, d_ff=1024, num_heads=4),
                  train=dict(batch_size=2048, warmup_steps=4000, train_steps=20_000, average_last_checkpoints=0))


@hparams_sets.register("transformer_tiny")
def transformer_tiny() -> HParams:
    """t2t's transformer_tiny sizes (2 layers, d 128, 4 heads): trains on a CPU in minutes."""
    return derive(transformer_small(),
                  model=dict(d_model=128, d_ff=512, num_heads=4),
                  train=dict(batch_size=1024, warmup_steps=1000, train_steps=2000))


@hparams_sets.register("transformer_small_data")
def transformer_small_data() -> HParams:
    """For a small corpus (~30k sentence pairs, e.g. Multi30k) on a CPU: the Multi30k protocol's model and settings.

    Each value and why (the peer protocol is benchmarks/peers/multi30k, OpenNMT-tf):
    - 3+3 layers, d_model 256, d_ff 1024, 4 heads (~7.6M parameters with an 8k vocabulary): the protocol's
      size; a base model (60M) has far more capacity than 30k pairs can fill and takes 8x longer per step.
    - norm_position "pre" (from transformer_base_v3): trains without the long warmup post-norm needs.
    - schedule linear_decay with warmup_fraction 0.1: warm up over the first tenth of the run, then
      straight down to zero at its last step, which under --train_minutes is where the budget is estimated
      to run out; a tenth, not a step count, so a slow CPU and a fast one both spend a tenth of the budget
      warming up. Chosen on val in 10- and 35-minute Multi30k runs against the paper's rsqrt with a
      400-step warmup (docs/performance.md).
    - learning_rate_constant 0.5, warmup_steps 200: with warmup_fraction these only set the peak,
      0.5 * 256^-0.5 * 200^-0.5 = 2.2e-3; 1.6e-3 lost 2.9 val BLEU at 10 minutes, as a short run's progress
      is limited by its rate. The peer's run 1 with constant 2.0 (peak 4e-3, rsqrt) stalled at a loss of ~4.3.
    - dropout, attention_dropout and relu_dropout 0.1: the peer's; 30k pairs are seen about 10 times in 35
      minutes, so the model overfits without them (0.2-0.3 is the usual next step for much longer runs).
    - label_smoothing 0.1: the paper's and the peer's.
    - batch_size 4096 tokens: the peer's; ~3.3k target tokens, ~140 updates an epoch of 30k pairs, so
      there are enough updates in a short budget.
    - train_steps 5000: ~35 epochs of 30k pairs, more than a 35-minute budget reaches on 2 cores; the
      budget (--train_minutes) or this, whichever comes first, ends the run.
    - average_last_checkpoints 5 with average_span 0.1: the paper averages the last 5 checkpoints; spread
      over the last tenth of the run they average its end rather than reaching back to its middle.
    - decode batch_size 64 sentences: a small model's step is mostly fixed costs per op, which a larger
      batch shares; 64 decoded Multi30k test faster than 32 and 128 (docs/performance.md).
    """
    return derive(transformer_base_v3(),
                  model=dict(num_encoder_layers=3, num_decoder_layers=3, d_model=256, d_ff=1024, num_heads=4,
                             dropout=0.1, attention_dropout=0.1, relu_dropout=0.1),
                  train=dict(schedule="linear_decay", warmup_fraction=0.1, learning_rate_constant=0.5,
                             warmup_steps=200, label_smoothing=0.1, batch_size=4096,
                             train_steps=5000, average_last_checkpoints=5, average_span=0.1),
                  decode=dict(batch_size=64))
