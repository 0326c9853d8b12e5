"""chrF2 and TER through sacreBLEU, each with its signature: the scores WMT reports beside BLEU.

chrF2 (Popovic 2015) is a character n-gram F-score, kinder than BLEU to
morphology; TER (Snover et al. 2006) is the edits per reference word needed to
turn the output into the reference (lower is better). Both use sacreBLEU's
defaults so that figures compare with other toolkits'.
"""
import dataclasses
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class MetricResult:
    """One corpus score and its sacreBLEU signature.

    Attributes:
      name: "chrF2" or "TER".
      score: in percent; higher is better for chrF2, lower for TER.
      signature: e.g. "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0".
    """

    name: str
    score: float
    signature: str

    def __str__(self) -> str:
        return f"{self.name} = {self.score:.2f}  {self.signature}"


def chrf_and_ter(hypotheses: Sequence[str], references: Sequence[str]) -> tuple[MetricResult, MetricResult]:
    """(chrF2, TER) of line-aligned hypotheses against one reference each.

    Raises:
      ValueError: the sequences are empty or differ in length.
    """
    from sacrebleu.metrics import CHRF, TER

    check_aligned(hypotheses, references, "chrF and TER need")
    return tuple(MetricResult(name, metric.corpus_score(list(hypotheses), [list(references)]).score,
                              str(metric.get_signature())) for name, metric in (("chrF2", CHRF()), ("TER", TER())))


def check_aligned(hypotheses: Sequence[str], references: Sequence[str], metric_needs: str) -> None:
    """A ValueError unless there are hypotheses and one reference for each; `metric_needs` begins the message's
    advice, e.g. "BLEU needs" (one reference line per hypothesis line)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references; "
                         f"{metric_needs} one reference line per hypothesis line")
    if not hypotheses:
        raise ValueError("no sentences to score")
