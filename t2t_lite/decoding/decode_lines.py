"""Decoding a file, or many lines of text: sorted by length for speed, returned in input order."""
import concurrent.futures
import dataclasses
import os
import sys
import time
from typing import Callable, TextIO

import numpy as np

from t2t_lite.data.problem import EOS_ID, Problem, strip_ids
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.errors import UserError
from t2t_lite.files import atomic_write_text, read_lines
from t2t_lite.precision import compute_dtype
from t2t_lite.run import RunRequest, open_run


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
      ops between matmuls, as CTranslate2's inter_threads does (the gain is
      in docs/performance.md); results are the same.
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


@dataclasses.dataclass(frozen=True)
class DecodeFileRequest:
    """What t2t-lite-decoder is asked: which run, which file, where the outputs go."""

    run: RunRequest
    # Source text, one sentence per line (UTF-8).
    decode_from_file: str
    # Where the outputs go, one line per input line; None writes them to `out`.
    decode_to_file: str | None = None
    # Line-aligned references: the problem's scores (BLEU, or bracket F1 for parsing) are written after decoding.
    decode_reference: str | None = None
    parallel_batches: int = 1
    # Every beam, "text<TAB>score" each, tab-separated, instead of the best output alone.
    return_beams: bool = False


def decode_file(request: DecodeFileRequest, log: Callable[[str], None] = lambda line: None,
                out: TextIO | None = None) -> None:
    """Decodes request.decode_from_file with the run of request.run.

    Everything the user can fix (an unwritable output, unreadable or
    misaligned files, the run's refusals) is refused before decoding starts;
    the output file is written atomically, so a failure leaves none.

    Args:
      log: progress lines.
      out: where outputs without a decode_to_file and the scores go; default sys.stdout.
    """
    out = out or sys.stdout
    if not request.decode_from_file:
        raise UserError("--decode_from_file is required")
    if request.decode_to_file:
        check_output_file(request.decode_to_file)
    lines = read_lines(request.decode_from_file)
    references = read_lines(request.decode_reference) if request.decode_reference else None
    if references is not None and len(references) != len(lines):
        raise UserError(f"--decode_reference has {len(references)} lines but --decode_from_file has {len(lines)}")
    run = open_run(request.run)
    hp = run.decode_hparams
    log(f"decoding {len(lines)} lines from {run.checkpoint} (beam {hp.beam_size}, alpha {hp.alpha}) in "
        f"{compute_dtype(request.run.mixed_precision)}")
    results = decode_lines(run.problem, Decoder(run.model, hp), lines, hp.batch_size, progress=log,
                           parallel_batches=request.parallel_batches)
    text = "".join(format_line(r, request.return_beams) + "\n" for r in results)
    if request.decode_to_file:
        atomic_write_text(request.decode_to_file, text)
    else:
        out.write(text)
    if references is not None:
        for line in run.problem.score([r[0].text for r in results], references, lines):
            out.write(line + "\n")


def check_output_file(path: str) -> None:
    """Refuses an output path that cannot be written, before the (long) decode rather than after it."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UserError(f"--decode_to_file {path!r} is a directory; give a file name")
    if not os.path.isdir(directory):
        raise UserError(f"--decode_to_file {path!r}: directory {directory!r} does not exist; create it first")
    if not os.access(directory, os.W_OK):
        raise UserError(f"--decode_to_file {path!r}: directory {directory!r} is not writable")


def format_line(hypotheses: list[Hypothesis], return_beams: bool) -> str:
    """One output line: the best text, or every beam's text<TAB>score."""
    if return_beams:
        return "\t".join(f"{h.text}\t{h.score:.4f}" for h in hypotheses)
    return hypotheses[0].text if hypotheses else ""
