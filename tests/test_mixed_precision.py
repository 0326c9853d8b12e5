"""Mixed precision: bfloat16 training tracks float32, the float32 islands hold, float16 scales its loss."""
import math
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

import t2t_lite.hparams  # noqa: F401
import t2t_lite.problems  # noqa: F401
from t2t_lite import config
from t2t_lite.config import DecodeHParams
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.models import build_model
from t2t_lite.registry import hparams_sets
from t2t_lite import precision
from t2t_lite.training.run_config import RunConfig, resolve_for
from t2t_lite.training.trainer import Trainer
from small_training import small_problem
from test_losses import numpy_losses

TINY = ("vocab_size=12,d_model=32,d_ff=64,num_heads=4,num_encoder_layers=1,num_decoder_layers=1,"
        "dropout=0,attention_dropout=0,relu_dropout=0,train.batch_size=256,warmup_steps=100,average_last_checkpoints=0")
STEPS = 30
# |bfloat16 - float32| allowed for the dev loss after STEPS steps from the same start on the same batches.
# bfloat16 keeps 8 significant bits: 0.01 leaves room for its rounding over STEPS steps, no more.
TOLERANCE = 0.01


def tiny_hparams():
    return config.apply_overrides(hparams_sets.get("transformer_tiny")(), TINY)


def make_trainer(output_dir, mixed_precision, train_steps, float32_output_projection=False):
    """A Trainer of the tiny model on small_problem() (30 steps see ~600 of its 2,000 examples), logging every
    step into the returned list; without the memory probe, which these tests are not about."""
    run = RunConfig(output_dir=str(output_dir), train_steps=train_steps, eval_steps=4, save_checkpoints_steps=STEPS,
                    log_every_steps=1, random_seed=5, mixed_precision=mixed_precision,
                    float32_output_projection=float32_output_projection, memory_probe=False)
    lines, problem, hparams = [], small_problem(), tiny_hparams()
    return Trainer(problem, hparams, resolve_for(run, problem, hparams, log=lines.append), log=lines.append), lines


def train_losses(lines):
    return [float(line.split("loss ")[1].split()[0]) for line in lines if line.startswith("step ") and "/" in line]


@pytest.fixture(scope="module")
def float32_run(tmp_path_factory):
    """A float32 run of STEPS steps, saved at its end (read-only: copy it to change it): the reference bfloat16
    is compared with, and the run float16 resumes. Returns (output_dir, its dev loss, its training losses)."""
    output_dir = tmp_path_factory.mktemp("float32")
    trainer, lines = make_trainer(output_dir, "none", STEPS)
    trainer.train()
    return output_dir, trainer.evaluate().loss, train_losses(lines)


@pytest.mark.slow  # two runs compared; bfloat16 is emulated on most CPUs
def test_bfloat16_training_reaches_the_float32_loss(tmp_path, float32_run):
    _, float32_dev, float32_train = float32_run
    trainer, lines = make_trainer(tmp_path, "mixed_bfloat16", STEPS)  # from the same start, on the same batches
    trainer.train()
    bfloat16_dev, bfloat16_train = trainer.evaluate().loss, train_losses(lines)
    assert len(bfloat16_train) == STEPS and all(math.isfinite(loss) for loss in bfloat16_train)
    assert float32_dev < float32_train[0] - 0.3  # the runs learned something
    assert abs(bfloat16_dev - float32_dev) < TOLERANCE, (bfloat16_dev, float32_dev)


# The default rounds the kernel to bfloat16 and sums the logits in float32; the flag keeps the kernel float32 too.
@pytest.mark.parametrize("float32_output_projection, kernel_dtype", [(False, tf.bfloat16), (True, tf.float32)])
def test_the_trainers_bfloat16_loss_sums_its_logits_in_float32(tmp_path, float32_output_projection, kernel_dtype):
    trainer, _ = make_trainer(tmp_path, "mixed_bfloat16", 1, float32_output_projection)
    model = trainer.model
    rng = np.random.default_rng(0)
    ids = np.concatenate([rng.integers(2, 12, (8, 9)), np.ones((8, 1))], axis=1).astype(np.int32)
    batch = {"inputs": ids, "targets": ids[::-1].copy()}
    _, loss_sum, _ = trainer.train_step.gradients(batch)
    # The same bfloat16 states (dropout is 0) and the embedding in kernel_dtype, projected and scored in float64.
    states = model.decoder_states(batch, training=True)
    assert states.dtype == tf.bfloat16
    kernel = tf.cast(model.target_embedding.embeddings, kernel_dtype).numpy().astype(np.float64).T
    exact, *_ = numpy_losses(states.numpy().astype(np.float64) @ kernel, batch["targets"],
                             tiny_hparams().train.label_smoothing)
    # Measured: 7e-8 and 6e-9. Each case against the other's kernel: 3.8e-5. The default
    # before 2026-11-25 (its logits rounded to bfloat16, the matmul's own output dtype): 6.7e-5.
    assert abs(float(loss_sum) - exact) / exact < 1e-6


def test_under_bfloat16_weights_logits_layer_norm_and_beam_scores_stay_float32():
    with precision.layers_compute_in("mixed_bfloat16"):
        model = build_model(tiny_hparams())
    assert keras.config.dtype_policy().name == "float32"  # restored for whatever is built next
    assert model.compute_dtype == "bfloat16"
    assert {w.dtype for w in model.trainable_weights} == {"float32"}
    ids = np.array([[3, 4, 5, 1], [6, 7, 1, 0]], np.int32)
    assert model({"inputs": ids, "targets": ids}).dtype == tf.float32
    # Around 1000 bfloat16 values are 8 apart: statistics computed in bfloat16 would be far off.
    norm = model.encoder_0.self_attention_residual.norm
    x = tf.cast(1000.0 + tf.random.stateless_normal([2, 3, 32], seed=[1, 2]), tf.bfloat16)
    exact = x.numpy().astype(np.float64)
    exact = (exact - exact.mean(-1, keepdims=True)) / np.sqrt(exact.var(-1, keepdims=True) + 1e-6)
    normalised = norm(x)
    assert normalised.dtype == tf.bfloat16
    np.testing.assert_allclose(normalised.numpy().astype(np.float64), exact, atol=0.03)
    _, scores = Decoder(model, DecodeHParams(beam_size=2, extra_length=3)).decode(ids)
    assert scores.dtype == tf.float32


def test_float16_scales_the_loss_and_resumes_a_float32_run(tmp_path, float32_run):
    run = tmp_path / "run"
    shutil.copytree(float32_run[0], run)  # a float32 run of STEPS steps, saved at its end
    trainer, lines = make_trainer(run, "mixed_float16", STEPS + 2)
    trainer.train()
    assert any(line.startswith("resumed from") and line.endswith(f"at step {STEPS}") for line in lines)
    losses = train_losses(lines)
    assert trainer.step == STEPS + 2 and len(losses) == 2 and all(math.isfinite(loss) for loss in losses)
    # The loss scale is saved with the run; no overflow has halved it and no 2000 good steps have doubled it.
    scale = tf.train.load_variable(tf.train.latest_checkpoint(str(run)),
                                   "loss_scale/dynamic_scale/.ATTRIBUTES/VARIABLE_VALUE")
    assert scale == 2.0**15
