"""The one inference interface: what a Translator decodes through, a run's Decoder or an export.

Three implement it: translator.RunBackend (a run's Decoder: beam search,
sampling, ensembles and scoring), translator.IdBatchBackend over a
SavedModel's decode_ids signature (export/saved_model_backend.py: its exported
search, fixed) and export.ctranslate2_backend.CTranslate2Export (beam search
with any beam size, alpha and extra_length). Each encodes text with
decoding.batching.encode_lines and decodes with decode_id_batches, so an
empty line, the input order and the n-best lists are the same in all three.
Another engine wraps itself as one of these (an id-batch engine needs only
IdBatchBackend) and goes into `Translator(backend)`.
"""
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # kept out of an import: a CTranslate2 deployment has no TensorFlow, which these need
    from t2t_lite.decoding.batching import Hypothesis
    from t2t_lite.decoding.sampling import SamplingSettings
    from t2t_lite.decoding.scoring import PairScore


class Backend(Protocol):
    """Decodes and scores lists of sentences for a Translator (which checks its arguments' types first)."""

    def hypotheses(self, sentences: list[str], beam_size: int | None, nbest: int,
                   sampling: "SamplingSettings | None", first_line: int = 1,
                   **decoding) -> "list[list[Hypothesis]]":
        """Each sentence's nbest outputs, best first; an empty sentence gives one empty Hypothesis.

        Args:
          beam_size: None keeps the backend's own; one it cannot search with is a UserError.
          nbest: 1 <= nbest <= the beam size (1 when sampling), else a UserError.
          sampling: decoding.sampling.SamplingSettings to sample instead of searching; a UserError where the
            backend cannot.
          first_line: the 1-based line number of sentences[0], for error messages.
          decoding: decode_id_batches' progress and parallel_batches.
        """

    def score(self, sources: list[str], targets: list[str],
              progress: Callable[[str], None] | None) -> "list[PairScore | None]":
        """The log-probability of each target given its source (None for a pair with an empty side), or a
        UserError where the backend cannot score."""
