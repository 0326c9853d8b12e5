"""Decoding many sentences' ids: longest first in padded batches, results back in input order as Hypotheses.

One path for every decoder: a run's `Decoder.decode`, an exported
SavedModel's `decode_ids` signature and a CTranslate2 export's search are all
"a padded id batch in, (ids, scores) out", so `decode_id_batches` serves them
all, and `encode_lines` is where every one of them turns text into ids.

Needs only numpy: a CTranslate2 deployment decodes through here without TensorFlow.
"""
import concurrent.futures
import dataclasses
import os
import time
from collections.abc import Callable
from typing import Protocol

import numpy as np

from t2t_lite.data.ids import EOS_ID, PAD_ID, strip_ids
from t2t_lite.errors import UserError

# int32 [B, T_src] (EOS-terminated, PAD after) -> (ids [B, K, T] with EOS and PAD, scores float32 [B, K]).
DecodeBatch = Callable[[np.ndarray], tuple]


class TextCodec(Protocol):
    """Text <-> ids: a Problem, a data.vocabulary.Vocabulary or a data.pieces.SentencePieceCodec."""

    def encode(self, text: str) -> list[int]:
        """Text -> ids without EOS; ValueError for text it cannot encode."""

    # Optional: `encode_many(texts) -> [ids]`, encode's result for many texts at once (one tf-text op call
    # instead of one per line); encode_lines uses it where a codec has it. It must raise no ValueError.

    def decode(self, ids) -> str:
        """Ids -> text, stopping at the first EOS and skipping PAD."""


@dataclasses.dataclass(frozen=True)
class PairCodec:
    """A TextCodec over a vocabulary per side: sources encoded with `source`, outputs decoded with `target`
    (both TextCodecs; the same one where the sides share a vocabulary)."""

    source: TextCodec
    target: TextCodec

    def encode(self, text: str) -> list[int]:
        return self.source.encode(text)

    def decode(self, ids) -> str:
        return self.target.decode(ids)


@dataclasses.dataclass(frozen=True)
class Hypothesis:
    text: str
    # The search's score: log-probability over the GNMT length penalty (beam), or the log-probability (greedy).
    score: float
    # The token ids of text, without EOS and PAD.
    ids: tuple[int, ...] = ()


def pad_ids(rows: list[list[int]]) -> np.ndarray:
    """Rows of ids as one int32 array [B, T], PAD after each: [[5, 1], [7, 8, 1]] -> [[5, 1, 0], [7, 8, 1]]."""
    width = max([len(ids) for ids in rows] + [1])
    return np.array([ids + [PAD_ID] * (width - len(ids)) for ids in rows], np.int32)


def longest_first(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Indices of the non-zero lengths in batches of batch_size, longest first: a batch pads little.

    [2, 0, 5, 3] with batch_size 2 -> [[2, 3], [0]].
    """
    order = sorted((i for i, length in enumerate(lengths) if length), key=lambda i: -lengths[i])
    return [order[first:first + batch_size] for first in range(0, len(order), batch_size)]


def encode_lines(codec: TextCodec, lines: list[str], first_line: int = 1, what: str = "input",
                 max_length: int | None = None) -> list[list[int]]:
    """Each line's ids with EOS; an empty (or whitespace-only) line gives []. Bad text -> UserError with its line.

    ["a b", " ", "c"] with ids a=3, b=4, c=5 -> [[3, 4, 1], [], [5, 1]]; with max_length 2, [[3, 1], [], [5, 1]].

    Args:
      codec: what encodes a line (its `encode`, or all lines at once with its `encode_many` if it has one).
      first_line: the 1-based line number of lines[0], for the error message.
      what: the lines' name in the error message, e.g. "target" for "target line 3: ...".
      max_length: the most ids per line, EOS included; longer lines are cut before their EOS (an export
        holds positions for so many). None keeps every id.
    """
    encode_many = getattr(codec, "encode_many", None)
    many = iter(encode_many([line for line in lines if line.strip()])) if encode_many else None
    encoded = []
    for number, line in enumerate(lines, start=first_line):
        if not line.strip():
            encoded.append([])
            continue
        try:
            ids = next(many) if many else codec.encode(line)
        except ValueError as error:
            raise UserError(f"{what} line {number}: {error}") from None
        encoded.append((ids if max_length is None else ids[:max_length - 1]) + [EOS_ID])
    return encoded


def decode_id_batches(decode_batch: DecodeBatch, encoded: list[list[int]], batch_size: int,
                      to_text: Callable[[list[int]], str], progress: Callable[[str], None] | None = None,
                      parallel_batches: int | None = None) -> list[list[Hypothesis]]:
    """Decodes every sentence's ids; returns the K hypotheses of each, best first, in input order.

    Sentences are decoded longest first in batches of `batch_size`, so a batch
    holds sentences of similar length (little padding); since every
    sentence's search is independent of its batch, order does not change
    results. Empty sentences ([]) are not decoded: they get one empty
    hypothesis (score 0, no ids), so there is exactly one entry per sentence.
    Slots whose score is not finite hold no hypothesis (fewer than K were possible) and are left out;
    every other, finished or still alive where the search stopped, is kept.

    Args:
      decode_batch: the search (DecodeBatch above), e.g. Decoder.decode or an export's signature.
      encoded: each sentence's source ids, EOS-terminated, or [] for an empty one.
      to_text: ids (without EOS and PAD) -> the output text.
      progress: called with a progress line after each batch.
      parallel_batches: how many batches are decoded at once, each from its
        own thread (TensorFlow runs the graphs side by side). On a CPU a
        second batch's kernels use the cycles one batch leaves idle in its
        many small ops between matmuls, as CTranslate2's inter_threads does;
        results are the same. None: `default_parallel_batches()`.
    """
    parallel_batches = default_parallel_batches() if parallel_batches is None else parallel_batches
    if parallel_batches < 1:
        raise UserError(f"parallel_batches must be at least 1, got {parallel_batches}")
    results: list[list[Hypothesis]] = [[Hypothesis("", 0.0)] for _ in encoded]
    chunks = longest_first([len(ids) for ids in encoded], batch_size)
    total = sum(len(chunk) for chunk in chunks)

    def decode_chunk(chunk):
        ids, scores = decode_batch(pad_ids([encoded[i] for i in chunk]))  # [B, K, T], [B, K]
        return np.asarray(ids), np.asarray(scores)

    start, done = time.perf_counter(), 0
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=parallel_batches)
    try:
        # map yields in submission order, so progress counts whole batches as they finish in turn.
        for chunk, (ids, scores) in zip(chunks, pool.map(decode_chunk, chunks)):
            for row, i in enumerate(chunk):
                found = [(strip_ids(beam), float(score)) for beam, score in zip(ids[row], scores[row])
                         if np.isfinite(score)]
                results[i] = [Hypothesis(to_text(tokens), score, tuple(tokens)) for tokens, score in found]
            done += len(chunk)
            if progress:
                progress(f"decoded {done}/{total} sentences ({done / (time.perf_counter() - start):.1f} sentences/s)")
    finally:
        # On an error or Ctrl-C, batches not yet started are dropped, not decoded to no purpose.
        pool.shutdown(cancel_futures=True)
    return results


def default_parallel_batches() -> int:
    """Batches in flight when the caller says nothing: two where this process may use two cores or more (a
    second batch fills the gaps between the first's small ops: docs/performance.md), else one."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(cores, 2)


def decode_lines(codec: TextCodec, decode_batch: DecodeBatch, lines: list[str], batch_size: int,
                 nbest: int | None = None, first_line: int = 1, max_length: int | None = None,
                 **decoding) -> list[list[Hypothesis]]:
    """Decodes lines of text: decode_id_batches over the codec's ids, each line's nbest best kept (None: all K).

    Empty lines get one empty hypothesis; the order is the input's.

    Args:
      first_line, max_length: as for encode_lines.
      decoding: decode_id_batches' progress and parallel_batches.
    """
    encoded = encode_lines(codec, lines, first_line, max_length=max_length)
    results = decode_id_batches(decode_batch, encoded, batch_size, codec.decode, **decoding)
    return results if nbest is None else [hyps[:nbest] for hyps in results]
