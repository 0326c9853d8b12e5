"""One model: decoding runs the layers' own `call` with a cache, so a variant decodes as it trains.

A user's variant overrides a layer (docs/extending.md); the beam search's step must run that layer, not a
copy of the bundled arithmetic. And no module outside layers/ and models/ (and the CTranslate2 exporter,
whose job is copying weights) reads a layer's weights or writes attention again.
"""
import ast
import dataclasses
import pathlib

import keras
import numpy as np
import pytest

import t2t_lite.hparams  # noqa: F401  (registers the sets)
from t2t_lite import config
from t2t_lite.config import DecodeHParams
from t2t_lite.data.ids import EOS_ID
from t2t_lite.decoding.cached_step import CachedStep
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.layers.attention import MultiHeadAttention
from t2t_lite.models.transformer import Transformer, shift_right
from t2t_lite.ops.step_matmul import StepMatmulSettings
from t2t_lite.registry import hparams_sets

from precisions import log_softmax

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "t2t_lite"
# Who may read a layer's weights: the layers and models themselves, and the exporter that copies them.
WEIGHT_READERS = ("layers/", "models/", "export/ctranslate2_export.py")
WEIGHTS = {"kernel", "embeddings", "table", "query_proj", "key_proj", "value_proj", "output_proj"}
ATTENTION_ARITHMETIC = {"attend", "scaled_softmax"}


class HalvedAttention(MultiHeadAttention):
    """A variant's attention: the bundled one with its output halved, written as a user would."""

    def call(self, query, cache=None, **kwargs):
        output = super().call(query, cache=cache, **kwargs)
        if cache is None:
            return output * 0.5
        output, cache = output
        return output * 0.5, cache


class DoubledDense(keras.layers.Dense):
    """A variant's Dense: not a plain keras Dense, so a decoding step's prepared products must leave it alone."""

    def call(self, inputs):
        return super().call(inputs) * 2.0


def halved_self_attention(model):
    for layer in model.decoder_layers:
        layer.self_attention = HalvedAttention(layer.num_heads, layer.key_dim, layer.value_dim, layer.d_model,
                                               name="self_attention", dtype=layer.dtype_policy)


def doubled_feed_forward_output(model):
    for layer in model.decoder_layers:
        layer.ffn.output_proj = DoubledDense(layer.d_model, name="output", dtype=layer.dtype_policy)


def variant(change):
    hp = config.apply_overrides(hparams_sets.get("transformer_tiny")(), "vocab_size=23,num_encoder_layers=1,"
                                "num_decoder_layers=2,d_model=16,d_ff=32,num_heads=4,dropout=0").model
    keras.utils.set_random_seed(3)
    model = Transformer(**dataclasses.asdict(hp))
    if change is not None:
        change(model)
    model.build()
    return model


def batch():
    rng = np.random.default_rng(0)
    inputs = rng.integers(2, 23, size=(3, 6)).astype(np.int32)
    inputs[:, -1], inputs[0, 3:] = EOS_ID, [EOS_ID, 0, 0]
    return inputs, rng.integers(2, 23, size=(3, 5)).astype(np.int32)


@pytest.mark.parametrize("change", [halved_self_attention, doubled_feed_forward_output])
def test_a_variants_decoding_steps_give_its_own_full_pass_not_the_bundled_models(change):
    model, bundled = variant(change), variant(None)
    weights = {v.path.split("/", 1)[1]: v for v in model.weights}  # by path below the model's own name
    for v in bundled.weights:  # the same weights, the bundled layers
        v.assign(weights[v.path.split("/", 1)[1]])
    inputs, targets = batch()
    full = model({"inputs": inputs, "targets": targets}).numpy()  # [B, T, V]
    assert np.abs(full - bundled({"inputs": inputs, "targets": targets}).numpy()).max() > 0.1  # the variant matters
    decoder_inputs = np.asarray(shift_right(targets))
    step = CachedStep(model, inputs, 3, 1, StepMatmulSettings())
    state, logits = step.initial_state, []
    for i in range(targets.shape[1]):
        step_logits, state = step(decoder_inputs[:, i:i + 1], i, state)
        logits.append(step_logits.numpy())
    np.testing.assert_allclose(np.stack(logits, axis=1), full, atol=1e-5)


@pytest.mark.parametrize("change", [halved_self_attention, doubled_feed_forward_output])
def test_every_beam_a_variant_decodes_scores_as_its_full_pass(change):
    model = variant(change)
    inputs, _ = batch()
    hparams = DecodeHParams(beam_size=3, alpha=0.0, extra_length=3)
    ids, scores = (t.numpy() for t in Decoder(model, hparams).decode(inputs))  # [B, K, T], [B, K]
    checked = 0
    for b in range(ids.shape[0]):
        for k in range(ids.shape[1]):
            if not np.isfinite(scores[b, k]):
                continue
            ends = np.flatnonzero(ids[b, k] == EOS_ID)
            hypothesis = ids[b, k][:ends[0] + 1 if ends.size else np.count_nonzero(inputs[b]) + 3]
            logits = model({"inputs": inputs[b:b + 1], "targets": hypothesis[None]}).numpy()[0]
            expected = log_softmax(logits)[np.arange(len(hypothesis)), hypothesis].sum()
            np.testing.assert_allclose(scores[b, k], expected, rtol=1e-5, atol=1e-5)
            checked += 1
    assert checked >= 6


def weight_reads(root: pathlib.Path) -> list[str]:
    """'<module>:<line>: <name>' for each read of a layer's weights or of attention's arithmetic outside
    WEIGHT_READERS."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        if module.startswith(WEIGHT_READERS):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Attribute) and node.attr in WEIGHTS | ATTENTION_ARITHMETIC:
                names = [node.attr]
            elif isinstance(node, ast.Name) and node.id in ATTENTION_ARITHMETIC:
                names = [node.id]
            elif isinstance(node, ast.ImportFrom):
                names = [alias.name for alias in node.names if alias.name in ATTENTION_ARITHMETIC]
            found.extend(f"{module}:{node.lineno}: {name}" for name in names)
    return found


def test_no_module_outside_the_layers_and_models_reads_their_weights_or_writes_attention():
    assert weight_reads(PACKAGE) == []


@pytest.mark.parametrize("code, name", [
    ("def step(layer, x):\n    return x @ layer.self_attention.query_proj.kernel\n", "query_proj"),
    ("def logits(model, x):\n    return x @ model.target_embedding.embeddings\n", "embeddings"),
    ("from t2t_lite.layers.attention import attend\n", "attend"),
    ("from t2t_lite.layers import attention\nw = attention.scaled_softmax\n", "scaled_softmax"),
])
def test_the_check_finds_a_planted_weight_read_in_decoding(tmp_path, code, name):
    (tmp_path / "decoding").mkdir()
    (tmp_path / "layers").mkdir()
    (tmp_path / "decoding" / "planted.py").write_text(code, encoding="utf-8")
    (tmp_path / "layers" / "allowed.py").write_text(code, encoding="utf-8")
    found = weight_reads(tmp_path)
    assert found and all(line.startswith("decoding/planted.py:") for line in found)
    assert any(line.endswith(f": {name}") for line in found)
