"""Decoding with an ensemble: the mean of its models' log-probabilities, inside the cached searches."""
import dataclasses

import keras
import numpy as np
import pytest

import t2t_lite.hparams  # noqa: F401
from t2t_lite import config, precision
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.decoding.sampling import SamplingSettings
from t2t_lite.models import build_model
from t2t_lite.ops.kernel_layout import IN_OUT
from t2t_lite.ops.matmul_threads import BATCH_MATMUL, MATMUL
from t2t_lite.ops.step_matmul import StepMatmulSettings
from t2t_lite.registry import hparams_sets

from trained_runs import REVERSE_TINY as TINY

INPUTS = np.array([[5, 7, 3, 9, 1], [4, 4, 8, 1, 0], [11, 2, 6, 10, 1]], np.int32)
EXTRA = 6


def tiny_hparams(overrides=""):
    return config.apply_overrides(hparams_sets.get("transformer_tiny")(), f"{TINY},vocab_size=12{overrides}")


def tiny_model(seed, overrides=""):
    keras.utils.set_random_seed(seed)
    return build_model(tiny_hparams(overrides))


@pytest.fixture(scope="module")
def models():
    """Two untrained tiny reverse models with different weights."""
    return tiny_model(1), tiny_model(2)


def decode_hparams(beam_size, alpha=0.6):
    return dataclasses.replace(tiny_hparams().decode, beam_size=beam_size, alpha=alpha, extra_length=EXTRA)


def log_softmax(x):
    top = x.max(-1, keepdims=True)
    return x - top - np.log(np.exp(x - top).sum(-1, keepdims=True))


def ensemble_score(models, source, tokens, min_length=0):
    """The renormalised mean of the models' teacher-forced log-probs, summed over `tokens` (numpy)."""
    targets = np.array([tokens], np.int32)
    mean = np.mean([log_softmax(m({"inputs": source[None], "targets": targets}).numpy()[0].astype(np.float64))
                    for m in models], axis=0)  # [length, V]
    mean[np.arange(len(tokens)) + 1 < min_length, 1] = -np.inf  # EOS impossible while too short
    return log_softmax(mean)[np.arange(len(tokens)), tokens].sum()


def hypothesis(ids, max_length):
    """A hypothesis' tokens up to and including its EOS (or its max length)."""
    tokens = list(ids[:max_length])
    return tokens[:tokens.index(1) + 1] if 1 in tokens else tokens


@pytest.fixture(scope="module")
def alone(models):
    """alone(i, beam_size, alpha): models[i]'s own search of INPUTS, (ids, scores) as numpy.

    Each search is made (and its Decoder traced) once per module: the renormalised-mean test compares
    with both models' beam-4 searches without a length penalty.
    """
    found = {}

    def search(index, beam_size, alpha):
        if (index, beam_size, alpha) not in found:
            decoder = Decoder(models[index], decode_hparams(beam_size, alpha=alpha))
            found[index, beam_size, alpha] = [t.numpy() for t in decoder.decode(INPUTS)]
        return found[index, beam_size, alpha]

    return search


@pytest.mark.parametrize("beam_size", [1, 4])
def test_an_ensemble_of_a_model_with_itself_is_that_model(models, alone, beam_size):
    # With the default length penalty (alpha 0.6), which the search applies after the ensemble's mean.
    single = alone(0, beam_size, 0.6)
    model = models[0]
    doubled = [t.numpy() for t in Decoder([model, model], decode_hparams(beam_size, alpha=0.6)).decode(INPUTS)]
    np.testing.assert_array_equal(doubled[0], single[0])
    np.testing.assert_allclose(doubled[1], single[1], atol=1e-5)


def test_an_ensemble_of_a_model_with_itself_is_that_model_in_bfloat16_too():
    # float32 above; `auto` picks one of the two on any CPU, and a CPU without native bfloat16 emulates it.
    with precision.layers_compute_in("mixed_bfloat16"):
        model = tiny_model(1)
    single = [t.numpy() for t in Decoder(model, decode_hparams(4)).decode(INPUTS)]
    doubled = [t.numpy() for t in Decoder([model, model], decode_hparams(4)).decode(INPUTS)]
    np.testing.assert_array_equal(doubled[0], single[0])
    np.testing.assert_allclose(doubled[1], single[1], atol=1e-5)


def test_a_self_ensemble_samples_what_its_model_samples(models):
    sampling = SamplingSettings(temperature=0.8, top_k=5, seed=3)
    single = [t.numpy() for t in Decoder(models[0], decode_hparams(4), sampling=sampling).decode(INPUTS)]
    doubled = [t.numpy() for t in Decoder(models[:1] * 2, decode_hparams(4), sampling=sampling).decode(INPUTS)]
    np.testing.assert_array_equal(doubled[0], single[0])
    np.testing.assert_allclose(doubled[1], single[1], atol=1e-5)


def test_every_ensemble_beam_score_is_the_renormalised_mean_of_the_models_log_probs(models, alone):
    decoder = Decoder(models, decode_hparams(4, alpha=0.0))
    ids, scores = (t.numpy() for t in decoder.decode(INPUTS))
    max_lengths = (INPUTS != 0).sum(axis=1) + EXTRA
    checked = set()
    for b, k in np.ndindex(*scores.shape):
        if scores[b, k] > -np.inf:  # else an empty finished slot: fewer than K hypotheses finished
            expected = ensemble_score(models, INPUTS[b], hypothesis(ids[b, k], max_lengths[b]))
            np.testing.assert_allclose(scores[b, k], expected, rtol=1e-5, atol=1e-5)
            checked.add((b, k))
    assert len(checked) >= 6 and {b for b, _ in checked} == {0, 1, 2}
    # The ensemble is neither of its models.
    for index in range(len(models)):
        alone_ids, alone_scores = alone(index, 4, 0.0)
        assert not np.allclose(alone_scores, scores, atol=1e-3) or not np.array_equal(alone_ids, ids)


def test_a_forced_length_ensemble_output_renormalises_without_eos(models):
    # EOS is impossible before the 9th token: each model's distribution without it, averaged, is the
    # average of the unmasked ones renormalised over the other tokens.
    nine = np.full([3], 9, np.int32)
    ids, scores = (t.numpy() for t in Decoder(models, decode_hparams(1)).search(INPUTS, nine, min_lengths=nine))
    for b in range(3):
        tokens = hypothesis(ids[b, 0], 9)
        assert len(tokens) == 9 and 1 not in tokens[:8]
        np.testing.assert_allclose(scores[b, 0], ensemble_score(models, INPUTS[b], tokens, min_length=9),
                                   rtol=1e-5, atol=1e-5)


def test_models_with_different_vocabularies_are_refused(models):
    with pytest.raises(ValueError, match=r"share one vocabulary.*\[12, 13\]"):
        Decoder([models[0], tiny_model(3, ",vocab_size=13")], decode_hparams(4))


def test_each_models_steps_multiply_through_its_own_prepared_kernels(models):
    """Every product of both models' traced steps takes the op the settings fix."""
    counts = {}
    for op in (MATMUL, BATCH_MATMUL):
        settings = StepMatmulSettings(layout=IN_OUT, op=op)
        graph = Decoder(models, decode_hparams(4), settings).decode.get_concrete_function().graph
        nodes = [node.op for function in graph.as_graph_def().library.function for node in function.node_def]
        counts[op] = {kind: nodes.count(kind) for kind in ("MatMul", "BatchMatMulV2")}
    # Per model, per decoder layer: self-attention's q, k and v in one product, its output; cross-attention q,
    # output; FFN 2; then the logits.
    layers = tiny_hparams().model.num_decoder_layers
    per_model = 6 * layers + 1
    assert counts[MATMUL]["MatMul"] == 2 * per_model and counts[BATCH_MATMUL]["MatMul"] == 0
    assert counts[BATCH_MATMUL]["BatchMatMulV2"] == counts[MATMUL]["BatchMatMulV2"] + 2 * per_model
