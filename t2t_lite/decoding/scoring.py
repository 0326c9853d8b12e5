"""Scoring given translations: the model's log-probability of each target given its source (forced decoding)."""
import dataclasses
import sys
from typing import Callable, TextIO

import numpy as np
import tensorflow as tf

from t2t_lite.data.problem import Problem
from t2t_lite.decoding.decode_lines import check_output_file, encode_lines
from t2t_lite.errors import UserError
from t2t_lite.files import atomic_write_text, read_lines
from t2t_lite.precision import compute_dtype
from t2t_lite.run import RunRequest
from t2t_lite.translator import Translator

IDS_SIGNATURE = [tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None], tf.int32)]


@dataclasses.dataclass(frozen=True)
class PairScore:
    # log P(target | source): the sum over the target's tokens, its EOS included.
    log_prob: float
    # The target's tokens, its EOS included.
    tokens: int
    # log_prob over the GNMT length penalty ((5 + tokens) / 6) ** alpha: what beam search reports as a score.
    score: float


class TokenLogProbs:
    """Each target token's log-probability under a model, or the mean of several models' (an ensemble).

    One teacher-forced pass per model: the target, shifted right, is the
    decoder's input, and every position's log-softmax is read at the target's token.
    """

    def __init__(self, models):
        self.models = tuple(models)
        self.compute = tf.function(self._compute, input_signature=IDS_SIGNATURE, autograph=False)

    def _compute(self, inputs, targets):
        """inputs [B, T_src], targets [B, T_tgt] (EOS-terminated, PAD 0) -> float32 [B, T_tgt], 0 at PAD."""
        per_model = []
        for model in self.models:
            logits = tf.cast(model({"inputs": inputs, "targets": targets}, training=False), tf.float32)  # [B, T, V]
            per_model.append(tf.gather(tf.nn.log_softmax(logits), targets, axis=-1, batch_dims=2))  # [B, T]
        mean = tf.add_n(per_model) / len(per_model)
        return tf.where(tf.not_equal(targets, 0), mean, tf.zeros_like(mean))


def score_pairs(problem: Problem, models, sources: list[str], targets: list[str], batch_size: int,
                alpha: float, progress: Callable[[str], None] | None = None) -> list[PairScore | None]:
    """Scores every (source, target) pair; None where either side is empty (or whitespace), in input order.

    Pairs are scored longest first in batches of `batch_size`, as decode_lines
    decodes, so a batch pads little; a pair's score does not depend on its batch.
    With several models (an ensemble), a token's log-probability is the mean of theirs.

    Args:
      models: one built Transformer or more, sharing the problem's vocabulary.
      alpha: the GNMT length penalty exponent the normalised score divides by.
    """
    if len(sources) != len(targets):
        raise UserError(f"{len(sources)} sources but {len(targets)} targets; they must be line-aligned")
    encoded_sources = encode_lines(problem, sources, what="source")
    encoded_targets = encode_lines(problem, targets, what="target")
    token_log_probs = TokenLogProbs(models)
    results: list[PairScore | None] = [None] * len(sources)
    order = sorted((i for i in range(len(sources)) if encoded_sources[i] and encoded_targets[i]),
                   key=lambda i: -(len(encoded_sources[i]) + len(encoded_targets[i])))
    for first in range(0, len(order), batch_size):
        chunk = order[first:first + batch_size]
        log_probs = token_log_probs.compute(padded([encoded_sources[i] for i in chunk]),
                                            padded([encoded_targets[i] for i in chunk])).numpy()  # [B, T_tgt]
        for row, i in enumerate(chunk):
            tokens = len(encoded_targets[i])
            total = float(log_probs[row].sum())
            results[i] = PairScore(total, tokens, total / ((5.0 + tokens) / 6.0) ** alpha)
        if progress:
            progress(f"scored {first + len(chunk)}/{len(order)} pairs")
    return results


def padded(rows: list[list[int]]) -> np.ndarray:
    """Rows of ids as one int32 array, PAD (0) after each."""
    width = max(len(ids) for ids in rows)
    return np.array([ids + [0] * (width - len(ids)) for ids in rows], np.int32)


def format_score(score: PairScore | None) -> str:
    """One output line: log_prob<TAB>tokens<TAB>score, or "" for a pair that was not scored."""
    return "" if score is None else f"{score.log_prob:.6f}\t{score.tokens}\t{score.score:.6f}"


@dataclasses.dataclass(frozen=True)
class ScoreFileRequest:
    """What t2t-lite-scorer is asked: which run (or ensemble), which line-aligned files, where the scores go."""

    run: RunRequest
    source_file: str
    target_file: str
    # Where the scores go, one line per pair; None writes them to `out`.
    output_file: str | None = None


def score_file(request: ScoreFileRequest, log: Callable[[str], None] = lambda line: None,
               out: TextIO | None = None) -> None:
    """Scores the pairs of request.source_file and request.target_file with the run (or ensemble) of request.run.

    Files that are unreadable or misaligned, an unwritable output and the
    run's refusals are refused before scoring; the output file is written
    atomically.

    Args:
      log: progress lines.
      out: where the scores go without an output_file; default sys.stdout.
    """
    if not request.source_file or not request.target_file:
        raise UserError("--source_file and --target_file are both required")
    if request.output_file:
        check_output_file(request.output_file, flag="--output_file")
    sources, targets = read_lines(request.source_file), read_lines(request.target_file)
    if len(sources) != len(targets):
        raise UserError(f"--target_file has {len(targets)} lines but --source_file has {len(sources)}; "
                        f"they must be line-aligned")
    translator = Translator.from_request(request.run)
    run, hp = translator.run, translator.run.decode_hparams
    log(f"scoring {len(sources)} pairs with {' + '.join(run.checkpoints)} (alpha {hp.alpha}) in "
        f"{compute_dtype(request.run.mixed_precision)}")
    scores = translator.score(sources, targets, progress=log)
    text = "".join(format_score(score) + "\n" for score in scores)
    if request.output_file:
        atomic_write_text(request.output_file, text)
    else:
        (out or sys.stdout).write(text)
