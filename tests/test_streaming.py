"""--decode_from_file=-: standard input decoded as it comes, each batch's outputs written before the input ends."""
import io
import os
import queue
import subprocess
import sys
import threading

import pytest

from t2t_lite.decoding.batching import decode_lines
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.errors import UserError
from t2t_lite.bin.lines import DecodeFileRequest, decode_file, stdin_batches
from t2t_lite.decoding.request import DecodeRequest
from t2t_lite.run import RunRequest, open_run

from cli_helpers import ENV


def test_stdin_batches_gives_what_has_come_without_waiting_for_the_end():
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb", buffering=0) as source:
        batches = stdin_batches(source, batch_size=4, wait=0.01)
        os.write(write_end, b"a\nb\n")
        assert next(batches) == ["a", "b"]  # the writer is still open: a partial batch
        os.write(write_end, b"c\nd\n\ne\nf\ng\xc3\xa9")
        assert next(batches) == ["c", "d", "", "e"]  # a full batch at once
        assert next(batches) == ["f"]  # "gé" has no newline yet
        os.write(write_end, b"\xff\n")
        with pytest.raises(UserError, match=r"standard input: line 8 is not valid UTF-8 \(bytes b.\\xff. at byte 4 "):
            next(batches)
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb", buffering=0) as source:
        os.write(write_end, b"x\ny")
        os.close(write_end)
        assert list(stdin_batches(source, batch_size=8, wait=0.01)) == [["x", "y"]]  # a last line without "\n"


def test_stdin_cannot_go_to_a_file_or_be_scored(reverse_run, tmp_path):
    for settings in ({"decode_to_file": str(tmp_path / "out.txt")}, {"decode_reference": str(tmp_path / "r")}):
        with pytest.raises(UserError, match="--decode_from_file=- writes each output to standard output"):
            decode_file(DecodeFileRequest(RunRequest(output_dir=reverse_run), "-", **settings))


@pytest.mark.slow  # a fresh interpreter on a pipe
def test_a_pipe_gets_each_lines_outputs_before_its_input_is_closed(reverse_run):
    opened = open_run(RunRequest(output_dir=reverse_run, decode=DecodeRequest(beam_size=2, mixed_precision="none")))
    lines = ["0123", "98", ""]
    expected = decode_lines(opened.problem, Decoder(opened.models, opened.decode_hparams).decode, lines, batch_size=1)
    process = subprocess.Popen([sys.executable, "-m", "t2t_lite.bin.decoder", f"--output_dir={reverse_run}",
                                "--decode_from_file=-", "--beam_size=2", "--nbest=2",
                                "--mixed_precision=none"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=ENV)
    outputs = queue.Queue()
    threading.Thread(target=lambda: [outputs.put(line) for line in process.stdout], daemon=True).start()
    try:
        for index, (line, hypotheses) in enumerate(zip(lines, expected)):
            process.stdin.write(line + "\n")
            process.stdin.flush()
            got = [outputs.get(timeout=300).rstrip("\n") for _ in hypotheses]
            # Moses lines numbered across batches: the index counts every line read so far.
            assert got == [f"{index} ||| {h.text} ||| {h.score:.4f}" for h in hypotheses]
        assert outputs.empty()
        process.stdin.close()
        assert process.wait(timeout=60) == 0, process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_file_is_decoded_with_the_default_batches_in_flight_and_standard_input_a_batch_at_a_time(
        reverse_run, tmp_path, monkeypatch):
    from t2t_lite.inference.translator import Translator

    asked = []
    hypotheses = Translator.hypotheses

    def recording(self, sentences, **settings):
        asked.append(settings["parallel_batches"])
        return hypotheses(self, sentences, **settings)

    monkeypatch.setattr(Translator, "hypotheses", recording)
    source = tmp_path / "in.txt"
    source.write_text("123\n45\n", encoding="utf-8")
    run = RunRequest(output_dir=reverse_run)
    decode_file(DecodeFileRequest(run, decode_from_file=str(source), decode_to_file=str(tmp_path / "out.txt")))
    with open(source, "rb") as stdin:
        decode_file(DecodeFileRequest(run, decode_from_file="-"), out=io.StringIO(), stdin=stdin)
    # None: decode_id_batches' default (two on a machine with two cores or more); standard input one at a time.
    assert asked == [None, 1]
