"""Decoding a CTranslate2 export (ctranslate2_export.py) with t2t-lite-decoder's tokenizer and search settings.

The search is CTranslate2's, set up to match t2t-lite's beam search
(decoding/beam_search.py), which it follows step for step: K alive beams,
the 2K best extensions, an EOS finishing a hypothesis only from the top K,
per-sentence maximum length input length + extra_length (EOS counted), EOS
allowed from the first step (min_decoding_length=0). Greedy (beam 1) is
CTranslate2's greedy search, scored by the summed log-probability as ours.

One difference remains, the length penalty. CTranslate2 divides a finished
hypothesis' log-probability by length**alpha and stops once its top beam and
K hypotheses have finished; t2t-lite divides by the GNMT ((5 + length) / 6)**alpha
and stops once no alive beam can still beat its K finished, which often means
searching on for longer hypotheses. So CTranslate2 searches with patience
SEARCH_PATIENCE (it waits for that many times K finished hypotheses), returns
its K best, lengths counting the EOS as ours, and they are re-ranked by the
GNMT score, which is what each Hypothesis.score holds. The output is ours
whenever our best is among those K; it can differ when the two penalties keep
different hypotheses or CTranslate2 stops earlier (docs/performance.md gives
how often).

`CTranslate2Export.search(hp)` returns a t2t_lite.decoding.batching.DecodeBatch, padded
id batches in, (ids, scores) out, as a SavedModel's signature and the
Decoder are, so the same encoding, batching and Hypotheses serve all three.

Nothing here imports TensorFlow: a CTranslate2 export decodes with
`ctranslate2`, `sentencepiece` (data/pieces.py, the tf-text tokenizer's ids)
and numpy alone (tests/test_ctranslate2_without_tensorflow.py).
"""
import itertools
import os

import numpy as np

from t2t_lite.config import DecodeHParams
from t2t_lite.data.ids import PAD_ID
from t2t_lite.data.pieces import SentencePieceCodec
from t2t_lite.decoding.batching import DecodeBatch, Hypothesis, PairCodec, decode_lines
from t2t_lite.decoding.length_penalty import length_penalty
from t2t_lite.decoding.request import ResolvedDecode
from t2t_lite.errors import UserError
from t2t_lite.export_format import CTRANSLATE2, require_ctranslate2
from t2t_lite.files import read_json
from t2t_lite.inference.export_reader import ExportDir, read_export

# CTranslate2's default, 1, stops before t2t-lite's search on some sentences and returns shorter outputs;
# 2 finds the decoder's output almost always for little more time (docs/performance.md has the figures).
SEARCH_PATIENCE = 2.0
def gnmt_score(ctranslate2_score: float, length: int, alpha: float) -> float:
    """CTranslate2's log_prob / length**alpha as t2t-lite's log_prob / ((5 + length) / 6)**alpha.

    Args:
      length: the hypothesis' length counting its EOS.
    """
    return ctranslate2_score * length**alpha / length_penalty(length, alpha)


class CTranslate2Export:
    """A CTranslate2 export as a t2t_lite.inference.backend.Backend: beam search with any beam size and n-best;
    it neither samples nor scores.

    Args:
      export: the export directory (the numbered version t2t-lite-exporter printed), or it read (read_export).
      device: "cpu" or "cuda".
      compute_type: CTranslate2's compute type; "default" runs in the type the weights were saved in.
      threads: CTranslate2's intra_threads; 0 lets it choose.
    Raises:
      UserError: ctranslate2 or sentencepiece missing, path not a CTranslate2 export, or a model CTranslate2
        cannot load.
    """

    def __init__(self, export: ExportDir | str, device: str = "cpu", compute_type: str = "default",
                 threads: int = 0):
        ctranslate2 = require_ctranslate2()
        export = read_export(export) if isinstance(export, str) else export
        path = export.path
        if export.format != CTRANSLATE2:
            raise UserError(f"{path!r} is a SavedModel, not a CTranslate2 export; open it with Translator.from_export")
        # The run's decode settings as exported; any search setting can change (DecodeRequest.resolve).
        self.engine = export.engine
        self.max_positions = int(export.info["max_positions"])
        # Sources are encoded with one vocabulary and outputs decoded with the other (the same one if shared).
        self.vocabulary = PairCodec(SentencePieceCodec.from_file(export.source_vocab_path),
                                    SentencePieceCodec.from_file(export.vocab_path))
        self.source_pieces = _read_pieces(path, "source", self.vocabulary.source.vocab_size)
        self.pieces = _read_pieces(path, "target", self.vocabulary.target.vocab_size)
        self.piece_ids = {piece: i for i, piece in enumerate(self.pieces)}
        try:
            self.translator = ctranslate2.Translator(path, device=device, compute_type=compute_type,
                                                     intra_threads=threads)
        except (RuntimeError, ValueError) as error:
            raise UserError(f"CTranslate2 cannot load {path!r} on {device} in {compute_type}: {error}") from None

    def hypotheses(self, sentences: list[str], decode: ResolvedDecode, first_line: int = 1,
                   **decoding) -> list[list[Hypothesis]]:
        """Each sentence's decode.nbest outputs, best first; an empty sentence gives one empty Hypothesis.

        Args:
          decode: a DecodeRequest resolved against `engine`.
          first_line: the 1-based line number of sentences[0], for error messages.
          decoding: decode_id_batches' progress and parallel_batches.
        """
        # A source with its EOS must fit the position table (the SavedModel truncates to max_input_length too).
        return decode_lines(self.vocabulary, self.search(decode.hparams), sentences, decode.hparams.batch_size,
                            decode.nbest, first_line, max_length=self.max_positions, **decoding)

    def score(self, sources: list[str], targets: list[str], progress=None):
        raise UserError("an export holds beam search only; score with Translator.from_run on the run it came from")

    def search(self, hp: DecodeHParams) -> DecodeBatch:
        """The DecodeBatch of CTranslate2's search with hp's beam_size, alpha and extra_length."""

        def decode_batch(inputs):
            rows = [[int(i) for i in row if i != PAD_ID] for row in np.asarray(inputs)]  # each EOS-terminated
            hypotheses: list[list[tuple[list[int], float]]] = [[] for _ in rows]
            # CTranslate2 takes one max_decoding_length per call: a call per source length gives
            # every sentence its own, input length (EOS included) + extra_length, as the Decoder does.
            for length, group in itertools.groupby(sorted(range(len(rows)), key=lambda i: len(rows[i])),
                                                   key=lambda i: len(rows[i])):
                group = list(group)
                found = self.translator.translate_batch(
                    [[self.source_pieces[i] for i in rows[row][:-1]] for row in group],  # CTranslate2 appends EOS
                    beam_size=hp.beam_size, num_hypotheses=hp.beam_size, patience=SEARCH_PATIENCE,
                    length_penalty=hp.alpha if hp.beam_size > 1 else 0.0, return_end_token=True,
                    return_scores=True, min_decoding_length=0, max_input_length=0,
                    max_decoding_length=min(length + hp.extra_length, self.max_positions))
                for row, result in zip(group, found):
                    hypotheses[row] = self._ranked(result, hp)
            return _padded(hypotheses, hp.beam_size)

        return decode_batch

    def _ranked(self, result, hp: DecodeHParams) -> list[tuple[list[int], float]]:
        """A TranslationResult's hypotheses as (ids with EOS, t2t-lite's score), best first (stable on ties)."""
        found = [[self.piece_ids[token] for token in tokens] for tokens in result.hypotheses]  # EOS last, unless cut
        ranked = [(ids, gnmt_score(score, len(ids), hp.alpha) if hp.beam_size > 1 else score)
                  for ids, score in zip(found, result.scores)]
        return sorted(ranked, key=lambda hypothesis: -hypothesis[1])


def _padded(hypotheses: list[list[tuple[list[int], float]]], beams: int) -> tuple[np.ndarray, np.ndarray]:
    """Per sentence (ids, score) lists -> (ids int32 [B, K, T] PAD after, scores float32 [B, K], -inf where none)."""
    width = max([len(ids) for found in hypotheses for ids, _ in found] + [1])
    ids = np.full((len(hypotheses), beams, width), PAD_ID, np.int32)
    scores = np.full((len(hypotheses), beams), -np.inf, np.float32)
    for row, found in enumerate(hypotheses):
        for k, (tokens, score) in enumerate(found[:beams]):
            ids[row, k, :len(tokens)] = tokens
            scores[row, k] = score
    return ids, scores


def _read_pieces(path: str, side: str, vocab_size: int) -> list[str]:
    """The export's pieces of `side` ("source" or "target"), piece i for id i: its <side>_vocabulary.json where
    the sides differ, else its shared_vocabulary.json (CTranslate2 writes what its spec was given)."""
    own = os.path.join(path, f"{side}_vocabulary.json")
    pieces = read_json(own if os.path.exists(own) else os.path.join(path, "shared_vocabulary.json"))
    if len(pieces) != vocab_size:
        raise UserError(f"{path!r}: its {side} vocabulary has {len(pieces)} pieces but its SentencePiece model "
                        f"{vocab_size}; export again")
    return pieces
