"""The two precisions a decoding, scoring or export test runs in, on every CPU, and how far each may round.

`mixed_precision=auto` is float32 on a CPU without native bfloat16 and bfloat16 on one with it, so a test left
on auto checks whichever precision the machine happens to pick. Tests whose result depends on the precision
take PRECISIONS instead: both, explicitly, wherever they run. Where bfloat16 is not native TensorFlow runs it
in Eigen, so an AVX2 CI still fails on a bfloat16-only bug; the marks send each to test_forced_isa.py's
passes too (float32 with AVX2 forced, bfloat16 in Eigen).

Two kinds of equality are checked, and they round differently:

- The same arithmetic on the same values (a scorer's log-prob beside the log-softmax of the logits the same
  graph gives; one pair scored alone or in a batch). Both sides round every bfloat16 intermediate alike, so
  only float32 steps differ: SAME_ARITHMETIC_RTOL in both precisions.
- Two computations that round at different places (beam search's incremental step beside the full
  teacher-forced pass): in float32 they agree to SAME_ARITHMETIC_RTOL; in bfloat16 by score_tolerance.
"""
import numpy as np
import pytest

from t2t_lite.decoding.length_penalty import length_penalty

PRECISIONS = [pytest.param("none", marks=pytest.mark.isa, id="float32"),
              pytest.param("mixed_bfloat16", marks=pytest.mark.isa_bfloat16, id="bfloat16")]
# Both, natively only: for tests whose bfloat16 claim PRECISIONS' tests already hold in Eigen too (the scorer's),
# where a second forced pass would cost more than it could find (a module's own training, a parser's decodes).
BOTH_PRECISIONS = [pytest.param("none", id="float32"), pytest.param("mixed_bfloat16", id="bfloat16")]
# float32's rounding of a score summed over a few tokens (2^-24 each), with room for the order of the sums.
SAME_ARITHMETIC_RTOL = 1e-5
# bfloat16 keeps 8 significant bits: rounding x to it moves x by at most half a unit in the last place,
# 2^-9 |x|, so two computations that each round a value once differ by at most 2^-8 of it.
BFLOAT16_ROUNDINGS_APART = 2.0 ** -8


def score_tolerance(precision: str, logits: np.ndarray, alpha: float) -> float:
    """How far two computations of one hypothesis' score (beam search's, the full pass's) may be apart.

    In bfloat16 the two round the decoder's activations at different places, so each of a token's logits
    may differ between them by two roundings of the largest logit, 2^-8 max|z|. A token's log-prob,
    z_y - logsumexp(z), then moves by at most twice that (logsumexp moves by at most the largest change of its
    inputs); the score sums its T tokens and divides by the length penalty.

    Args:
      precision: "none" (float32) or "mixed_bfloat16".
      logits: float [T, V], the full pass's logits at the hypothesis' T tokens (its EOS included).
      alpha: the length penalty's exponent.
    """
    if precision == "none":  # float32: each token's log-prob to SAME_ARITHMETIC_RTOL
        per_token = np.full(len(logits), SAME_ARITHMETIC_RTOL)
    else:
        per_token = 2 * BFLOAT16_ROUNDINGS_APART * np.abs(logits).max(axis=-1)
    return float(per_token.sum()) / length_penalty(len(logits), alpha)


def full_pass_logits(model, source_ids: list[int], target_ids: list[int]) -> np.ndarray:
    """The model's teacher-forced logits [T, V] over one target (its EOS included), one pair in a batch of one."""
    return model({"inputs": np.array([source_ids], np.int32), "targets": np.array([target_ids], np.int32)},
                 training=False).numpy()[0]


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """numpy's log-softmax over the last axis, in float64: the reference a model's log-probs are checked against."""
    shifted = logits.astype(np.float64) - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
