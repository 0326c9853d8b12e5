"""Scoring given translations: the model's log-probability of each target given its source (forced decoding)."""
import dataclasses
from typing import Callable

import tensorflow as tf

from t2t_lite.data.problem import Problem
from t2t_lite.decoding.batching import encode_lines, longest_first, pad_ids
from t2t_lite.decoding.length_penalty import length_penalty
from t2t_lite.errors import UserError

IDS_SIGNATURE = [tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None], tf.int32)]


@dataclasses.dataclass(frozen=True)
class PairScore:
    # log P(target | source): the sum over the target's tokens, its EOS included.
    log_prob: float
    # The target's tokens, its EOS included.
    tokens: int
    # log_prob over the GNMT length penalty ((5 + tokens) / 6) ** alpha: what beam search reports as a score.
    score: float


def token_log_probs_fn(models) -> Callable:
    """A tf.function of each target token's log-probability under a model, or the mean of several models' (an
    ensemble).

    One teacher-forced pass per model: the target, shifted right, is the
    decoder's input, and every position's log-softmax is read at the target's token.
    """
    def compute(inputs, targets):
        """inputs [B, T_src], targets [B, T_tgt] (EOS-terminated, PAD 0) -> float32 [B, T_tgt], 0 at PAD."""
        # Each model's [B, T, V] logits are cut to the targets' [B, T] before the next model's are made.
        features = {"inputs": inputs, "targets": targets}
        per_model = [model.token_losses(model.decoder_states(features, training=False), targets).log_probs
                     for model in models]
        return tf.add_n(per_model) / len(per_model)  # [B, T], 0 at PAD

    return tf.function(compute, input_signature=IDS_SIGNATURE, autograph=False)


def score_pairs(problem: Problem, models, sources: list[str], targets: list[str], batch_size: int,
                alpha: float, progress: Callable[[str], None] | None = None) -> list[PairScore | None]:
    """Scores every (source, target) pair; None where either side is empty (or whitespace), in input order.

    Pairs are scored longest first in batches of `batch_size`, as sentences are
    decoded (batching.longest_first), so a batch pads little; a pair's score does not depend on its batch.
    With several models (an ensemble), a token's log-probability is the mean of theirs.

    Args:
      models: one built Transformer or more, sharing the problem's vocabulary.
      alpha: the GNMT length penalty exponent the normalised score divides by.
    """
    if len(sources) != len(targets):
        raise UserError(f"{len(sources)} sources but {len(targets)} targets; they must be line-aligned")
    encoded_sources = encode_lines(problem, sources, what="source")
    encoded_targets = encode_lines(problem.target_codec, targets, what="target")
    token_log_probs = token_log_probs_fn(tuple(models))
    results: list[PairScore | None] = [None] * len(sources)
    lengths = [len(source) + len(target) if source and target else 0
               for source, target in zip(encoded_sources, encoded_targets)]
    done = 0
    for chunk in longest_first(lengths, batch_size):
        log_probs = token_log_probs(pad_ids([encoded_sources[i] for i in chunk]),
                                    pad_ids([encoded_targets[i] for i in chunk])).numpy()  # [B, T_tgt]
        for row, i in enumerate(chunk):
            tokens = len(encoded_targets[i])
            total = float(log_probs[row].sum())
            results[i] = PairScore(total, tokens, total / length_penalty(tokens, alpha))
        done += len(chunk)
        if progress:
            progress(f"scored {done}/{sum(map(bool, lengths))} pairs")
    return results
