"""The one inference interface: what a Translator decodes through, a run's Decoder or an export.

Three implement it (inference/__init__.py). Each decodes text with
decoding.batching.decode_lines (encode_lines, then decode_id_batches), so an
empty line, the input order and the n-best lists are the same in all three.
Another engine wraps itself as one of these (an id-batch engine needs only
IdBatchBackend) and goes into `Translator(backend)`.
"""
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from t2t_lite.decoding.request import Engine, ResolvedDecode

if TYPE_CHECKING:  # kept out of an import: a CTranslate2 deployment has no TensorFlow, which these need
    from t2t_lite.decoding.batching import Hypothesis
    from t2t_lite.decoding.scoring import PairScore


class Backend(Protocol):
    """Decodes and scores lists of sentences for a Translator (which checks its arguments' types first)."""

    # What it decodes with and can change: the Translator resolves every DecodeRequest against it, so a
    # backend checks no decode setting itself.
    engine: Engine

    def hypotheses(self, sentences: list[str], decode: ResolvedDecode, first_line: int = 1,
                   **decoding) -> "list[list[Hypothesis]]":
        """Each sentence's decode.nbest outputs, best first; an empty sentence gives one empty Hypothesis.

        Args:
          decode: a DecodeRequest resolved against `engine`, decoded with as it is.
          first_line: the 1-based line number of sentences[0], for error messages.
          decoding: decode_id_batches' progress and parallel_batches.
        """

    def score(self, sources: list[str], targets: list[str],
              progress: Callable[[str], None] | None) -> "list[PairScore | None]":
        """The log-probability of each target given its source (None for a pair with an empty side), or a
        UserError where the backend cannot score."""
