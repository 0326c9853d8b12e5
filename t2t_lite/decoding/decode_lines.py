"""Decoding a file, standard input, or many lines of text: sorted by length for speed, returned in input order,
written as text, Moses n-best lines or JSON Lines."""
import concurrent.futures
import dataclasses
import json
import os
import select
import sys
import time
from collections.abc import Iterator
from typing import BinaryIO, Callable, TextIO

import numpy as np

from t2t_lite.data.problem import EOS_ID, Problem, strip_ids
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.decoding.sampling import SamplingSettings
from t2t_lite.errors import UserError
from t2t_lite.files import decode_line, atomic_write_text, read_lines
from t2t_lite.metrics.bleu import compound_split_bleu
from t2t_lite.precision import compute_dtype
from t2t_lite.run import RunRequest
from t2t_lite.translator import Translator

# --decode_from_file's name for standard input.
STDIN = "-"
OUTPUT_FORMATS = ("text", "jsonl")
# How long streaming waits for more input before decoding the lines it has (seconds): short enough that an
# interactive user does not notice, long enough that a pipe writing a file's lines fills whole batches.
STREAM_WAIT = 0.05


@dataclasses.dataclass(frozen=True)
class Hypothesis:
    text: str
    # The search's score: log-probability over the GNMT length penalty (beam), or the log-probability (greedy).
    score: float
    # The token ids of text, without EOS and PAD.
    ids: tuple[int, ...] = ()


def encode_lines(problem: Problem, lines: list[str], first_line: int = 1, what: str = "input") -> list[list[int]]:
    """Each line's ids with EOS; an empty (or whitespace-only) line gives []. Bad text -> UserError with its line.

    Args:
      first_line: the 1-based line number of lines[0], for the error message.
      what: the lines' name in the error message, e.g. "target" for "target line 3: ...".
    """
    encoded = []
    for number, line in enumerate(lines, start=first_line):
        if not line.strip():
            encoded.append([])
            continue
        try:
            encoded.append(problem.encode(line) + [EOS_ID])
        except ValueError as error:
            raise UserError(f"{what} line {number}: {error}") from None
    return encoded


def decode_lines(problem: Problem, decoder: Decoder, lines: list[str], batch_size: int,
                 progress: Callable[[str], None] | None = None,
                 parallel_batches: int = 1, first_line: int = 1) -> list[list[Hypothesis]]:
    """Decodes every line; returns the K hypotheses of each, best first, in input order.

    Lines are decoded longest first in batches of `batch_size` sentences, so
    a batch holds sentences of similar length (little padding); since every
    sentence's search is independent of its batch, order does not change results.
    Empty lines are not decoded: they get one empty hypothesis (score 0, no
    ids), so the output has exactly one entry per input line.

    parallel_batches: how many batches are decoded at once, each from its own
      thread (TensorFlow runs the graphs side by side). On a CPU a second
      batch's kernels use the cycles one batch leaves idle in its many small
      ops between matmuls, as CTranslate2's inter_threads does (the gain is
      in docs/performance.md); results are the same.
    first_line: the 1-based line number of lines[0], for error messages.
    """
    if parallel_batches < 1:
        raise UserError(f"parallel_batches must be at least 1, got {parallel_batches}")
    encoded = encode_lines(problem, lines, first_line)
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
                results[i] = [hypothesis(problem, beam, score)
                              for beam, score in zip(ids[row], scores[row]) if np.isfinite(score)]
            done += len(chunk)
            if progress:
                rate = done / (time.perf_counter() - start)
                progress(f"decoded {done}/{len(order)} sentences ({rate:.1f} sentences/s)")
    finally:
        # On an error or Ctrl-C, batches not yet started are dropped, not decoded to no purpose.
        pool.shutdown(cancel_futures=True)
    return results


def hypothesis(problem: Problem, beam, score) -> Hypothesis:
    """A decoded id sequence (EOS and PAD included) and its score as a Hypothesis."""
    ids = strip_ids(beam)
    return Hypothesis(problem.decode(ids), float(score), tuple(ids))


@dataclasses.dataclass(frozen=True)
class DecodeFileRequest:
    """What t2t-lite-decoder is asked: which run, which file, where the outputs go and in what form."""

    run: RunRequest
    # Source text, one sentence per line (UTF-8); STDIN ("-") streams standard input.
    decode_from_file: str
    # Where the outputs go; None writes them to `out`.
    decode_to_file: str | None = None
    # Line-aligned references: the problem's scores (BLEU, or bracket F1 for parsing) are written after decoding.
    decode_reference: str | None = None
    parallel_batches: int = 1
    # Hypotheses per input line, best first: 1 <= nbest <= beam size.
    nbest: int = 1
    # "text": the best output per line (nbest 1) or Moses n-best lines; "jsonl": one JSON object per line.
    output_format: str = "text"
    # Sampling instead of beam search when the temperature is above 0; top_k 0 samples from every token.
    sampling_temperature: float = 0.0
    sampling_topk: int = 0
    random_seed: int | None = None
    # With decode_reference, also the paper's compound-split BLEU, Moses-tokenized for this language.
    paper_bleu_language: str | None = None


def decode_file(request: DecodeFileRequest, log: Callable[[str], None] = lambda line: None,
                out: TextIO | None = None, stdin: BinaryIO | None = None) -> None:
    """Decodes request.decode_from_file with the run (or ensemble) of request.run.

    Everything the user can fix (an unwritable output, unreadable or
    misaligned files, flags that do not fit together, the run's refusals) is
    refused before decoding starts; the output file is written atomically, so
    a failure leaves none. Standard input (decode_from_file "-") is decoded a
    batch at a time, each batch's outputs written and flushed as soon as it is
    decoded (`stdin_batches`).

    Args:
      log: progress lines.
      out: where outputs without a decode_to_file and the scores go; default sys.stdout.
      stdin: what "-" reads; default sys.stdin's bytes.
    """
    out = out or sys.stdout
    check_request(request)
    streaming = request.decode_from_file == STDIN
    if request.decode_to_file:
        check_output_file(request.decode_to_file)
    lines = None if streaming else read_lines(request.decode_from_file)
    references = read_lines(request.decode_reference) if request.decode_reference else None
    if references is not None and len(references) != len(lines):
        raise UserError(f"--decode_reference has {len(references)} lines but --decode_from_file has {len(lines)}")
    translator = Translator.from_request(request.run)
    run = translator.run
    hp = run.decode_hparams
    if request.nbest > hp.beam_size:
        raise UserError(f"--nbest={request.nbest} is more than the beam size {hp.beam_size}; "
                        f"raise --beam_size or lower --nbest")
    sampling = sampling_settings(request)
    search = (f"sampling at temperature {sampling.temperature}, top-k {sampling.top_k or 'all'}" if sampling
              else f"beam {hp.beam_size}, alpha {hp.alpha}")
    what = "standard input" if streaming else f"{len(lines)} lines"
    precision = compute_dtype(request.run.mixed_precision)
    log(f"decoding {what} with {' + '.join(run.checkpoints)} ({search}) in {precision}")

    def format_batch(sources, first_index=0):
        results = translator.hypotheses(sources, nbest=request.nbest, sampling=sampling, first_line=first_index + 1,
                                        progress=None if streaming else log,
                                        parallel_batches=request.parallel_batches)
        return results, format_outputs(sources, results, request.nbest, request.output_format, first_index)

    if streaming:
        done = 0
        for batch in stdin_batches(stdin or sys.stdin.buffer, hp.batch_size):
            out.write(format_batch(batch, done)[1])
            out.flush()
            done += len(batch)
        return
    results, text = format_batch(lines)
    if request.decode_to_file:
        atomic_write_text(request.decode_to_file, text)
    else:
        out.write(text)
    if references is not None:
        outputs = [r[0].text if r else "" for r in results]
        report = list(run.problem.score(outputs, references, lines))
        if request.paper_bleu_language:
            try:
                report.append(str(compound_split_bleu(outputs, references, request.paper_bleu_language)))
            except ValueError as error:
                raise UserError(f"--paper_bleu_language: {error}") from None
        for line in report:
            out.write(line + "\n")


def check_request(request: DecodeFileRequest) -> None:
    """Refuses flags that do not fit together, in one line, before the run is opened."""
    if not request.decode_from_file:
        raise UserError("--decode_from_file is required (- reads standard input)")
    if request.output_format not in OUTPUT_FORMATS:
        raise UserError(f"--output_format must be one of {', '.join(OUTPUT_FORMATS)}; got {request.output_format!r}")
    if request.nbest < 1:
        raise UserError(f"--nbest must be at least 1, got {request.nbest}")
    if request.sampling_temperature < 0 or request.sampling_topk < 0:
        raise UserError(f"--sampling_temperature and --sampling_topk must be >= 0; got "
                        f"{request.sampling_temperature} and {request.sampling_topk}")
    if request.sampling_temperature == 0 and (request.sampling_topk or request.random_seed is not None):
        raise UserError("--sampling_topk and --random_seed need --sampling_temperature above 0 (0 is beam search)")
    if request.sampling_temperature > 0 and request.nbest != 1:
        raise UserError(f"sampling gives one output per line; drop --nbest={request.nbest} or "
                        f"--sampling_temperature")
    if request.decode_from_file == STDIN and (request.decode_to_file or request.decode_reference):
        raise UserError("--decode_from_file=- writes each output to standard output as it is decoded; "
                        "--decode_to_file and --decode_reference need a file to decode")
    if request.paper_bleu_language and not request.decode_reference:
        raise UserError("--paper_bleu_language scores against --decode_reference; give one")


def sampling_settings(request: DecodeFileRequest) -> SamplingSettings | None:
    """The request's sampling settings, or None for beam search (temperature 0)."""
    if request.sampling_temperature == 0:
        return None
    return SamplingSettings(temperature=request.sampling_temperature, top_k=request.sampling_topk,
                            seed=request.random_seed)


def stdin_batches(source: BinaryIO, batch_size: int, wait: float = STREAM_WAIT) -> Iterator[list[str]]:
    """The lines of `source` (a pipe, a terminal or a file) in batches of at most batch_size.

    A batch is given as soon as it is full, or as soon as no more input has
    come for `wait` seconds: a long-running pipe gets each line's output
    without waiting for the end of its input. The file descriptor is read
    directly (select, then os.read), since a buffered reader would hold lines
    that select cannot see.
    """
    fd = source.fileno()
    pending, batch, number = b"", [], 0
    while True:
        while b"\n" in pending and len(batch) < batch_size:
            raw, pending = pending.split(b"\n", 1)
            number += 1
            batch.append(decode_line(raw, "standard input", number))
        if len(batch) == batch_size:
            yield batch
            batch = []
            continue
        # With no line waiting, block until input comes; with some, wait briefly, then decode what there is.
        if not select.select([fd], [], [], wait if batch else None)[0]:
            yield batch
            batch = []
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:  # end of input; a last line may lack its newline
            if pending:
                batch.append(decode_line(pending, "standard input", number + 1))
            if batch:
                yield batch
            return
        pending += chunk


def check_output_file(path: str, flag: str = "--decode_to_file") -> None:
    """Refuses an output path that cannot be written, before the (long) decode rather than after it.

    Args:
      flag: the path's flag, for the message.
    """
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UserError(f"{flag} {path!r} is a directory; give a file name")
    if not os.path.isdir(directory):
        raise UserError(f"{flag} {path!r}: directory {directory!r} does not exist; create it first")
    if not os.access(directory, os.W_OK):
        raise UserError(f"{flag} {path!r}: directory {directory!r} is not writable")


def format_outputs(sources: list[str], results: list[list[Hypothesis]], nbest: int, output_format: str,
                   first_index: int = 0) -> str:
    """The output text of decoded lines, each with its newline.

    "text" with nbest 1: the best text per input line. "text" with nbest > 1:
    Moses n-best lines "INDEX ||| TEXT ||| SCORE", the nbest best per input
    line (fewer when fewer hypotheses finished), INDEX the 0-based input line.
    "jsonl": one object per input line, {"source", "hypotheses": [{"text",
    "score", "ids"}, ...]}. An empty input line has one empty hypothesis
    (score 0, no ids), so it keeps its place in every format.

    Args:
      first_index: the input line index of sources[0] (when streaming, lines before this batch).
    """
    lines = []
    for index, (source, hypotheses) in enumerate(zip(sources, results), start=first_index):
        best = hypotheses[:nbest]
        if output_format == "jsonl":
            lines.append(json.dumps({"source": source, "hypotheses": [
                {"text": h.text, "score": h.score, "ids": list(h.ids)} for h in best]}, ensure_ascii=False))
        elif nbest == 1:
            lines.append(best[0].text if best else "")
        else:
            lines.extend(f"{index} ||| {h.text} ||| {h.score:.4f}" for h in best)
    return "".join(line + "\n" for line in lines)
