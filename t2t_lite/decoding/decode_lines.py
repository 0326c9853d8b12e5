"""Decoding many lines of text: sorted by length for speed, returned in input order."""
import concurrent.futures
import dataclasses
import time
from typing import Callable

import numpy as np

from t2t_lite.data.problem import EOS_ID, Problem, strip_ids
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.errors import UserError


@dataclasses.dataclass(frozen=True)
class Hypothesis:
    text: str
    score: float


def encode_lines(problem: Problem, lines: list[str]) -> list[list[int]]:
    """Each line's ids with EOS; an empty (or whitespace-only) line gives []. Bad text -> UserError with its line."""
    encoded = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            encoded.append([])
            continue
        try:
            encoded.append(problem.encode(line) + [EOS_ID])
        except ValueError as error:
            raise UserError(f"input line {number}: {error}") from None
    return encoded


def decode_lines(problem: Problem, decoder: Decoder, lines: list[str], batch_size: int,
                 progress: Callable[[str], None] | None = None,
                 parallel_batches: int = 1) -> list[list[Hypothesis]]:
    """Decodes every line; returns the K hypotheses of each, best first, in input order.

    Lines are decoded longest first in batches of `batch_size` sentences, so
    a batch holds sentences of similar length (little padding); since every
    sentence's search is independent of its batch, order does not change results.
    Empty lines are not decoded: they get one empty hypothesis, so the output
    has exactly one entry per input line.

    parallel_batches: how many batches are decoded at once, each from its own
      thread (TensorFlow runs the graphs side by side). On a CPU a second
      batch's kernels use the cycles one batch leaves idle in its many small
      ops between matmuls, as CTranslate2's inter_threads does
      (benchmarks/RESULTS.md); results are the same.
    """
    if parallel_batches < 1:
        raise UserError(f"parallel_batches must be at least 1, got {parallel_batches}")
    encoded = encode_lines(problem, lines)
    results: list[list[Hypothesis]] = [[Hypothesis("", 0.0)] for _ in lines]
    order = sorted((i for i, ids in enumerate(encoded) if ids), key=lambda i: -len(encoded[i]))
    chunks = [order[first:first + batch_size] for first in range(0, len(order), batch_size)]

    def decode_chunk(chunk):
        width = max(len(encoded[i]) for i in chunk)
        batch = np.array([encoded[i] + [0] * (width - len(encoded[i])) for i in chunk], np.int32)  # [B, T_src]
        ids, scores = decoder.decode(batch)  # [B, K, T], [B, K]
        return ids.numpy(), scores.numpy()

    start, done = time.perf_counter(), 0
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=parallel_batches)
    try:
        # map yields in submission order, so progress counts whole batches as they finish in turn.
        for chunk, (ids, scores) in zip(chunks, pool.map(decode_chunk, chunks)):
            for row, i in enumerate(chunk):
                results[i] = [Hypothesis(problem.decode(strip_ids(beam)), float(score))
                              for beam, score in zip(ids[row], scores[row]) if np.isfinite(score)]
            done += len(chunk)
            if progress:
                rate = done / (time.perf_counter() - start)
                progress(f"decoded {done}/{len(order)} sentences ({rate:.1f} sentences/s)")
    finally:
        # On an error or Ctrl-C, batches not yet started are dropped, not decoded to no purpose.
        pool.shutdown(cancel_futures=True)
    return results
