"""The decoder and scorer commands' files: lines read from a file or standard input, decoded or scored through a
Translator, written as text, Moses n-best lines, JSON Lines or score lines, with the references' scores.

Command code, above the Translator (t2t_lite/inference/): nothing in the library imports this. Decoding a
CTranslate2 export imports no TensorFlow here either (what a run needs is imported when a run is opened).
"""
import dataclasses
import functools
import json
import os
import select
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO, Callable, TextIO

from t2t_lite import registry, usr_dir
from t2t_lite.decoding.batching import Hypothesis
from t2t_lite.decoding.request import SCORING
from t2t_lite.bin.run_flags import PICKS_A_RUN  # the flags that pick a run, which --export_dir replaces
from t2t_lite.errors import UserError
from t2t_lite.export_format import CTRANSLATE2
from t2t_lite.inference.export_reader import read_export
from t2t_lite.files import atomic_write_text, decode_line, read_lines
from t2t_lite.inference.translator import Translator, refuse_ctranslate2_settings
from t2t_lite.metrics.bleu import compound_split_bleu, problem_report
from t2t_lite.precision import compute_dtype

if TYPE_CHECKING:  # a run's: decoding a CTranslate2 export imports none of them (they import TensorFlow)
    from t2t_lite.ops.step_matmul import StepMatmulSettings
    from t2t_lite.run import RunRequest

# --decode_from_file's name for standard input.
STDIN = "-"
OUTPUT_FORMATS = ("text", "jsonl")
# How long streaming waits for more input before decoding the lines it has (seconds): short enough that an
# interactive user does not notice, long enough that a pipe writing a file's lines fills whole batches.
STREAM_WAIT = 0.05


@dataclasses.dataclass(frozen=True)
class DecodeFileRequest:
    """What t2t-lite-decoder is asked: which run, which file, where the outputs go and in what form."""

    # The run, and run.decode the one decode request (beam, n-best, sampling, batch size, precision, ...).
    run: "RunRequest"
    # Source text, one sentence per line (UTF-8); STDIN ("-") streams standard input.
    decode_from_file: str
    # Where the outputs go; None writes them to `out`.
    decode_to_file: str | None = None
    # Line-aligned references: the problem's scores (Problem.score: BLEU, bracket F1 for parsing, exact match
    # for algorithmic problems) are written after decoding.
    decode_reference: str | None = None
    # Batches decoded at once; None: decode_id_batches' default (two on a machine with two cores or more), one
    # for standard input.
    parallel_batches: int | None = None
    # "text": the best output per line (n-best 1) or Moses n-best lines; "jsonl": one JSON object per line.
    output_format: str = "text"
    # With decode_reference, also the paper's compound-split BLEU, Moses-tokenized for this language.
    paper_bleu_language: str | None = None
    # How a decoding step multiplies on a CPU (the command reads it from the environment: t2t_lite/environment.py).
    step_matmul: "StepMatmulSettings | None" = None
    # Decode an export (SavedModel or CTranslate2) instead of a run. Of `run`, only the decode request applies
    # (resolved against the export: any search for CTranslate2, the exported one for a SavedModel) and
    # usr_dir; the run-picking fields are refused (open_export).
    export_dir: str | None = None
    # A CTranslate2 export's compute type ("default": what its weights were saved in; "int8", "float32", ...).
    compute_type: str = "default"
    # A parser's outputs written as bracketed trees with the words put back (Translator.as_trees) instead of
    # the linearised trees the model writes; scores are of the same trees either way.
    output_trees: bool = False
    # The lines are tokens already, separated by spaces; otherwise a parser tokenizes them as its problem says
    # (Translator.tokenized), and its trees' leaves are those tokens.
    input_tokenized: bool = False


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
    if request.export_dir:
        translator, report, source = open_export(request)
    else:
        translator = Translator.from_request(request.run, step_matmul=request.step_matmul)
        report = functools.partial(problem_report, translator.run.problem)
        source = f"{' + '.join(translator.run.checkpoints)} in {compute_dtype(translator.run.mixed_precision)}"
    if request.output_trees and translator.tree_form is None:
        raise UserError("--output_trees is for parsing problems, whose outputs are trees; drop it")
    decode = translator.decode
    sampling, hp = decode.sampling, decode.hparams
    search = (f"sampling at temperature {sampling.temperature}, top-k {sampling.top_k or 'all'}" if sampling
              else f"beam {hp.beam_size}, alpha {hp.alpha}")
    what = "standard input" if streaming else f"{len(lines)} lines"
    log(f"decoding {what} with {source} ({search})")

    def format_batch(sources, first_index=0):
        tokens = translator.tokenized(sources, request.input_tokenized)
        results = translator.hypotheses(tokens, first_line=first_index + 1, progress=None if streaming else log,
                                        parallel_batches=1 if streaming else request.parallel_batches,
                                        input_tokenized=True)
        # With output_trees, the texts shown are bracketed trees over each source's tokens (Translator.as_trees).
        shown = ([[dataclasses.replace(h, text=translator.as_trees([words], [h.text])[0]) for h in hypotheses]
                  for words, hypotheses in zip(tokens, results)] if request.output_trees else results)
        return results, tokens, format_outputs(sources, shown, decode.nbest, request.output_format, first_index)

    if streaming:
        done = 0
        for batch in stdin_batches(stdin or sys.stdin.buffer, hp.batch_size):
            out.write(format_batch(batch, done)[2])
            out.flush()
            done += len(batch)
        return
    results, tokens, text = format_batch(lines)
    write_output(request.decode_to_file, text, out)
    if references is not None:
        outputs = [r[0].text if r else "" for r in results]
        scores = report(outputs, references, tokens)  # a parser's trees are over the tokens
        if request.paper_bleu_language:
            try:
                scores.append(str(compound_split_bleu(outputs, references, request.paper_bleu_language)))
            except ValueError as error:
                raise UserError(f"--paper_bleu_language: {error}") from None
        out.writelines(line + "\n" for line in scores)


def open_export(request: DecodeFileRequest):
    """The Translator of request.export_dir with request.run.decode resolved against it, its report of outputs
    against references (Problem.score's) and a description. Flags that pick a run are refused before it
    loads."""
    export = read_export(request.export_dir)
    for name in PICKS_A_RUN:
        if getattr(request.run, name) is not None:
            raise UserError(f"--{name} picks a run, but --export_dir decodes an export: drop --{name}, or drop "
                            f"--export_dir to decode the run")
    ctranslate2 = export.format == CTRANSLATE2
    settings = {"compute_type": request.compute_type} if ctranslate2 or request.compute_type != "default" else {}
    translator = Translator.from_export(request.export_dir, request.run.decode, **settings)
    engine = f"CTranslate2 ({request.compute_type})" if ctranslate2 else "a SavedModel"

    def report(outputs, references, sources):
        recorded = export.report(outputs, references, sources)  # without the problem's code, or TensorFlow
        if recorded is not None:
            return recorded
        usr_dir.import_for_run(request.run.usr_dir, export.spec.usr_dir)  # a problem that scores its own way
        return problem_report(registry.problems.get(export.spec.problem)(None), outputs, references, sources)

    return translator, report, f"{request.export_dir}, {engine}"


def check_request(request: DecodeFileRequest) -> None:
    """Refuses flags that do not fit together, in one line, before the run is opened."""
    if not request.decode_from_file:
        raise UserError("--decode_from_file is required (- reads standard input)")
    if request.output_format not in OUTPUT_FORMATS:
        raise UserError(f"--output_format must be one of {', '.join(OUTPUT_FORMATS)}; got {request.output_format!r}")
    if request.compute_type != "default" and not request.export_dir:
        refuse_ctranslate2_settings({"compute_type": request.compute_type}, "a run computes in `mixed_precision`")
    if request.decode_from_file == STDIN and (request.decode_to_file or request.decode_reference):
        raise UserError("--decode_from_file=- writes each output to standard output as it is decoded; "
                        "--decode_to_file and --decode_reference need a file to decode")
    if request.decode_from_file == STDIN and (request.parallel_batches or 1) > 1:
        raise UserError("--decode_from_file=- decodes each batch as its lines come, one at a time; "
                        "--parallel_batches needs a file to decode")
    if request.paper_bleu_language and not request.decode_reference:
        raise UserError("--paper_bleu_language scores against --decode_reference; give one")


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
        # A full batch goes at once. With no line waiting, block until input comes; with some, wait briefly, then
        # decode what there is.
        if len(batch) == batch_size or not select.select([fd], [], [], wait if batch else None)[0]:
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


def write_output(path: str | None, text: str, out: TextIO) -> None:
    """Writes `text` to `path` atomically (its failure leaves no file), or without a path to `out`."""
    if path:
        atomic_write_text(path, text)
    else:
        out.write(text)


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


@dataclasses.dataclass(frozen=True)
class ScoreFileRequest:
    """What t2t-lite-scorer is asked: which run (or ensemble), which line-aligned files, where the scores go."""

    # The run (or ensemble), and run.decode: its alpha and batch size (scoring searches nothing).
    run: "RunRequest"
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
    translator = Translator.from_request(request.run, engine=SCORING)
    run, hp = translator.run, translator.run.decode_hparams
    log(f"scoring {len(sources)} pairs with {' + '.join(run.checkpoints)} (alpha {hp.alpha}) in "
        f"{compute_dtype(run.mixed_precision)}")
    scores = translator.score(sources, targets, progress=log)
    # One line per pair: log_prob<TAB>tokens<TAB>score, or an empty line for a pair that was not scored.
    text = "".join("\n" if s is None else f"{s.log_prob:.6f}\t{s.tokens}\t{s.score:.6f}\n" for s in scores)
    write_output(request.output_file, text, out or sys.stdout)
