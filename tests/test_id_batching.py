"""The one id-batching path (decoding/batching.py) and the Translator over any engine that decodes id batches."""
import threading
import types

import numpy as np
import pytest

from t2t_lite import Translator
from t2t_lite.data.problem import EOS_ID, PAD_ID
from t2t_lite.config import DecodeHParams
from t2t_lite.decoding import batching
from t2t_lite.decoding.batching import (Hypothesis, decode_id_batches, decode_lines, encode_lines, longest_first,
                                         pad_ids)
from t2t_lite.decoding.request import Engine
from t2t_lite.errors import UserError
from t2t_lite.inference.saved_model_backend import IdBatchBackend

K = 2


class ReversingEngine:
    """A scripted search: beam 0 is the source reversed (score -length), beam 1 never finishes (score -inf).

    Records each batch it is given, to check the padding and the grouping.
    """

    def __init__(self):
        self.batches = []

    def __call__(self, inputs):
        inputs = np.asarray(inputs)  # [B, T_src]
        self.batches.append(inputs)
        width = inputs.shape[1] + 2
        ids = np.full([len(inputs), K, width], PAD_ID, np.int32)  # [B, K, T]
        scores = np.full([len(inputs), K], -np.inf, np.float32)  # [B, K]
        for row, source in enumerate(inputs):
            tokens = [int(i) for i in source if i not in (PAD_ID, EOS_ID)]
            ids[row, 0, :len(tokens) + 1] = tokens[::-1] + [EOS_ID]
            ids[row, 1, :] = 7
            scores[row, 0] = -len(tokens)
        return ids, scores


def as_text(ids):
    return " ".join(map(str, ids))


SENTENCES = [[5, 6, EOS_ID], [], [3, EOS_ID], [4, 5, 6, 7, EOS_ID], [8, 9, EOS_ID]]


def test_padding_and_grouping_follow_their_worked_examples():
    np.testing.assert_array_equal(pad_ids([[5, 1], [7, 8, 1]]), [[5, 1, 0], [7, 8, 1]])
    assert pad_ids([[5, 1]]).dtype == np.int32
    np.testing.assert_array_equal(pad_ids([[1]]), [[1]])
    np.testing.assert_array_equal(pad_ids([[], []]), [[PAD_ID], [PAD_ID]])  # never a batch of width 0
    assert longest_first([2, 0, 5, 3], 2) == [[2, 3], [0]]
    assert longest_first([0, 0], 4) == []


@pytest.mark.parametrize("parallel_batches", [1, 2])
def test_results_come_back_in_input_order_without_eos_pad_or_unfinished_beams(parallel_batches):
    engine = ReversingEngine()
    results = decode_id_batches(engine, SENTENCES, batch_size=2, to_text=as_text, parallel_batches=parallel_batches)
    expected = [[Hypothesis(as_text(s[:-1][::-1]), -float(len(s) - 1), tuple(s[:-1][::-1]))] if s
                else [Hypothesis("", 0.0)] for s in SENTENCES]
    assert results == expected
    # Longest first, two a batch, each padded to its own longest; the empty sentence never decoded.
    shapes = sorted(batch.shape for batch in engine.batches)
    assert shapes == [(2, 3), (2, 5)]  # lengths 5 and 3, then 3 and 2
    assert all((batch[:, -1] != PAD_ID).any() for batch in engine.batches)  # no all-PAD column


def test_progress_counts_the_decoded_sentences_and_their_rate(monkeypatch):
    # A clock that moves 1.5 s between readings: the first batch of 3 ends 1.5 s after the start, the second
    # (1 more) 1.5 s later.
    readings = iter([100.0, 101.5, 103.0])
    monkeypatch.setattr(batching, "time", types.SimpleNamespace(perf_counter=lambda: next(readings)))
    lines = []
    decode_id_batches(ReversingEngine(), SENTENCES, batch_size=3, to_text=as_text, progress=lines.append)
    assert lines == ["decoded 3/4 sentences (2.0 sentences/s)", "decoded 4/4 sentences (1.3 sentences/s)"]


class MeetingEngine(ReversingEngine):
    """Records, for each batch, whether another batch was being decoded at the same time."""

    def __init__(self):
        super().__init__()
        self.barrier, self.met = threading.Barrier(2, timeout=1.0), []

    def __call__(self, inputs):
        try:
            self.barrier.wait()
            self.met.append(True)
        except threading.BrokenBarrierError:
            self.met.append(False)
            self.barrier.reset()
        return super().__call__(inputs)


@pytest.mark.parametrize("cores, default_meets", [({0}, False), ({0, 1, 2, 3}, True)])
def test_batches_are_decoded_two_at_a_time_by_default_where_the_process_has_two_cores(monkeypatch, cores,
                                                                                     default_meets):
    monkeypatch.setattr(batching.os, "sched_getaffinity", lambda pid: cores)
    by_default, alone, together = MeetingEngine(), MeetingEngine(), MeetingEngine()
    decode_id_batches(by_default, SENTENCES, batch_size=2, to_text=as_text)
    assert by_default.met == [default_meets] * 2
    decode_id_batches(alone, SENTENCES, batch_size=2, to_text=as_text, parallel_batches=1)
    decode_id_batches(together, SENTENCES, batch_size=2, to_text=as_text, parallel_batches=2)
    assert alone.met == [False, False] and together.met == [True, True]


@pytest.mark.parametrize("parallel_batches", [1, 2])
def test_an_error_drops_the_batches_not_yet_started(parallel_batches):
    calls = []

    def failing(inputs):
        calls.append(len(inputs))
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        decode_id_batches(failing, [[5, EOS_ID]] * 8, batch_size=1, to_text=as_text, parallel_batches=parallel_batches)
    # Those in flight when the first failed, and at most one more each thread took up before the error was seen.
    assert len(calls) <= 2 * parallel_batches
    # An error while the results are turned into text (or Ctrl-C there), outside the search's own thread.
    engine = ReversingEngine()

    def failing_text(ids):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        decode_id_batches(engine, [[5, EOS_ID]] * 8, batch_size=1, to_text=failing_text,
                          parallel_batches=parallel_batches)
    assert len(engine.batches) <= 2 * parallel_batches


class WordProblem:
    """A problem's text side: words a, b, c are ids 3, 4, 5; anything else cannot be encoded."""

    ids = {"a": 3, "b": 4, "c": 5}

    def encode(self, text):
        try:
            return [self.ids[word] for word in text.split()]
        except KeyError as error:
            raise ValueError(f"unknown word {error}") from None

    def decode(self, ids):
        words = {i: w for w, i in self.ids.items()}
        return " ".join(words[i] for i in ids)


class BatchWordProblem(WordProblem):
    """WordProblem that also encodes many lines at once, and records each batch it was asked for."""

    def __init__(self):
        self.batches = []

    def encode_many(self, texts):
        self.batches.append(list(texts))
        return [[self.ids[word] + 10 for word in text.split()] for text in texts]  # unlike encode's ids


def test_a_codec_that_encodes_many_lines_at_once_is_called_once_for_the_non_blank_lines():
    problem = BatchWordProblem()
    lines = ["a b", "", "c", "  ", "b a c"]
    assert encode_lines(problem, lines) == [[13, 14, EOS_ID], [], [15, EOS_ID], [], [14, 13, 15, EOS_ID]]
    assert problem.batches == [["a b", "c", "b a c"]]


def test_lines_are_encoded_with_eos_empty_ones_as_nothing_and_bad_ones_named_by_number():
    assert encode_lines(WordProblem(), ["a b", "", "  ", "c"]) == [[3, 4, EOS_ID], [], [], [5, EOS_ID]]
    with pytest.raises(UserError) as error:
        encode_lines(WordProblem(), ["a", "a d"], first_line=10, what="target")
    assert str(error.value) == "target line 11: unknown word 'd'"
    with pytest.raises(UserError) as error:
        encode_lines(WordProblem(), ["d"])
    assert str(error.value) == "input line 1: unknown word 'd'"


def test_decode_lines_decodes_text_through_the_decoder_in_input_order():
    engine, lines = ReversingEngine(), []
    results = decode_lines(WordProblem(), engine, ["a b c", "", "b a"], batch_size=1, progress=lines.append)
    assert results == [[Hypothesis("c b a", -3.0, (5, 4, 3))], [Hypothesis("", 0.0)], [Hypothesis("a b", -2.0, (3, 4))]]
    assert len(engine.batches) == 2 and len(lines) == 2
    with pytest.raises(UserError, match="^input line 1: unknown word 'x'$"):
        decode_lines(WordProblem(), engine, ["x"], batch_size=1)
    with pytest.raises(UserError, match="^input line 7: unknown word 'x'$"):
        decode_lines(WordProblem(), engine, ["a", "x"], batch_size=1, first_line=6)


def test_decode_lines_decodes_as_many_batches_at_once_as_asked(monkeypatch):
    monkeypatch.setattr(batching.os, "sched_getaffinity", lambda pid: {0})  # by default one at a time, so 2 is asked
    alone, together = MeetingEngine(), MeetingEngine()
    decode_lines(WordProblem(), alone, ["a", "b"], batch_size=1)
    results = decode_lines(WordProblem(), together, ["a", "b"], batch_size=1,
                           parallel_batches=2)
    assert alone.met == [False, False] and together.met == [True, True]
    assert results == [[Hypothesis("a", -1.0, (3,))], [Hypothesis("b", -1.0, (4,))]]


def test_zero_parallel_batches_is_refused():
    with pytest.raises(UserError, match="parallel_batches must be at least 1, got 0"):
        decode_id_batches(ReversingEngine(), SENTENCES, 2, as_text, parallel_batches=0)


def backend(engine, beam_size=K):
    vocabulary = {"a": 3, "b": 4, "c": 5}
    words = {i: w for w, i in vocabulary.items()}
    fixed = Engine("a SavedModel", DecodeHParams(beam_size=beam_size, batch_size=2), fixed=("beam_size",),
                   samples=False)
    return IdBatchBackend(engine, encode=lambda text: [vocabulary[w] for w in text.split()],
                          decode=lambda ids: " ".join(words[i] for i in ids), engine=fixed)


def test_a_translator_over_an_id_batch_engine_translates_and_gives_hypotheses():
    engine = ReversingEngine()
    translator = Translator(backend(engine))
    assert translator.translate(["a b c", "", "  ", "b"]) == ["c b a", "", "", "b"]
    assert all(batch[row, (batch[row] != PAD_ID).sum() - 1] == EOS_ID  # the backend appends EOS
               for batch in engine.batches for row in range(len(batch)))
    hypotheses = translator.hypotheses(["c a"], nbest=2)
    assert hypotheses == [[Hypothesis("a c", -2.0, (3, 5))]]  # the unfinished beam is left out


def test_an_id_batch_engine_refuses_what_its_fixed_search_cannot_do():
    translator = Translator(backend(ReversingEngine()))
    with pytest.raises(UserError, match=r"^a SavedModel decodes with the beam_size it was exported with \(2\)"):
        translator.translate(["a"], beam_size=4)
    with pytest.raises(UserError, match=r"^`nbest`=3 is more than the beam size 2"):
        translator.hypotheses(["a"], nbest=3)
    with pytest.raises(UserError, match="holds beam search only"):
        translator.score(["a"], ["b"])
