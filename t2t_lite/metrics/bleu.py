"""Corpus BLEU through sacreBLEU, in the two conventions worth reporting, each with its signature.

* Detokenized sacreBLEU: the 13a tokenizer, cased; the score comparable across
  papers (Post 2018).
* Tokenized BLEU as tensor2tensor's `t2t-bleu` computes it
  (`bleu_hook.bleu_wrapper`): text split on Unicode punctuation and symbols,
  which sacreBLEU ports as tokenize="intl"; cased, like t2t-bleu's "BLEU_cased"
  (t2t-bleu also prints an uncased score, which we do not).

* The paper's convention (`compound_split_bleu`): t2t's `get_ende_bleu.sh`,
  i.e. Moses' tokenizer.perl on both sides, hyphenated compounds split as
  "a ##AT##-##AT## b", then multi-bleu.perl (cased, no smoothing). The
  paper's 27.3 / 28.4 (En-De) and 38.1 / 41.8 (En-Fr; 41.0 in its early versions) are in this
  convention, as are GNMT's and ConvS2S's.

On Google's released base checkpoint the first two are 27.5 and 28.3 on
newstest2014 En-De (docs/reproduce_wmt14.md). Scores are never reported
without a label and a signature, so that they are never compared across
conventions by mistake.
"""
import dataclasses
import re
from collections.abc import Sequence

from t2t_lite.errors import UserError
from t2t_lite.files import read_lines
from t2t_lite.metrics.chrf_ter import check_aligned, chrf_and_ter

# sacreBLEU tokenizer -> how a score made with it is labelled.
TOKENIZERS = {"13a": "sacreBLEU 13a, detokenized", "intl": "t2t-bleu intl, tokenized"}


@dataclasses.dataclass(frozen=True)
class BleuResult:
    """One corpus BLEU score and the convention that produced it.

    Attributes:
      label: the convention in words, e.g. "sacreBLEU 13a, detokenized".
      score: BLEU in percent, 0 to 100.
      signature: sacreBLEU's signature, e.g.
        "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0".
      precisions: modified n-gram precisions in percent, n = 1..4.
      brevity_penalty: BP = min(1, exp(1 - ref_len / hyp_len)).
    """

    label: str
    score: float
    signature: str
    precisions: tuple[float, ...]
    brevity_penalty: float

    def __str__(self) -> str:
        return f"BLEU ({self.label}) = {self.score:.2f}  {self.signature}"


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str], tokenize: str = "13a") -> BleuResult:
    """Corpus BLEU of line-aligned hypotheses against one reference each, cased, exponential smoothing.

    Args:
      hypotheses: one detokenized sentence per entry.
      references: as many sentences, in the same order.
      tokenize: a key of TOKENIZERS: "13a" (sacreBLEU) or "intl" (t2t-bleu).
    Returns:
      BleuResult.
    Raises:
      ValueError: the sequences are empty or differ in length, or tokenize is unknown.
    """
    from sacrebleu.metrics import BLEU

    if tokenize not in TOKENIZERS:
        raise ValueError(f"tokenize must be one of {sorted(TOKENIZERS)}, got {tokenize!r}")
    check_aligned(hypotheses, references, "BLEU needs")
    # force: tokenized BLEU is meant for any text, so sacreBLEU's
    # "looks tokenized" warning only makes sense for the detokenized score.
    return _scored(BLEU(tokenize=tokenize, force=tokenize == "intl"), hypotheses, references, TOKENIZERS[tokenize])


COMPOUND_SPLIT_LABEL = "paper: Moses-tokenized, compound-split"
# get_ende_bleu.sh's `perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g'`: non-overlapping, so "a-b-c" -> "a ##AT##-##AT## b-c".
_COMPOUND = re.compile(r"(\S)-(\S)")


def split_compounds(tokenized: str) -> str:
    """A Moses-tokenized line with each hyphen between two non-spaces split off as ##AT##-##AT##."""
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", tokenized)


def paper_tokenize(lines: Sequence[str], language: str) -> list[str]:
    """Each line through tokenizer.perl -l language (its default escaping of & < > " ' included), then split_compounds.

    sacremoses is the Python port of Moses' tokenizer that fairseq and Hugging Face use.
    """
    from sacremoses import MosesTokenizer

    tokenizer = MosesTokenizer(lang=language)
    return [split_compounds(tokenizer.tokenize(line, return_str=True)) for line in lines]


def compound_split_bleu(hypotheses: Sequence[str], references: Sequence[str], language: str = "de") -> BleuResult:
    """Corpus BLEU in the paper's convention (t2t's get_ende_bleu.sh): both sides Moses-tokenized and
    compound-split, scored as multi-bleu.perl does (cased, whitespace tokens, no smoothing).

    Args:
      hypotheses, references: line-aligned detokenized sentences.
      language: the target language, for the Moses tokenizer's rules (get_ende_bleu.sh uses "de").
    Raises:
      ValueError: the sequences are empty or differ in length.
    """
    from sacrebleu.metrics import BLEU

    check_aligned(hypotheses, references, "BLEU needs")
    return _scored(BLEU(tokenize="none", smooth_method="none", force=True), paper_tokenize(hypotheses, language),
                   paper_tokenize(references, language), f"{COMPOUND_SPLIT_LABEL}, {language}",
                   f"|moses:{language}|compound:atat")


def _scored(metric, hypotheses: Sequence[str], references: Sequence[str], label: str,
            signature_suffix: str = "") -> BleuResult:
    """The BleuResult of sacreBLEU's BLEU `metric` over the sentences, its signature followed by signature_suffix."""
    score = metric.corpus_score(list(hypotheses), [list(references)])
    return BleuResult(label=label, score=score.score, signature=f"{metric.get_signature()}{signature_suffix}",
                      precisions=tuple(score.precisions), brevity_penalty=score.bp)


def bleu_scores(hypotheses: Sequence[str], references: Sequence[str]) -> tuple[BleuResult, BleuResult]:
    """Both conventions for the same output.

    Returns:
      (detokenized sacreBLEU 13a, tokenized t2t-bleu intl).
    """
    return corpus_bleu(hypotheses, references, "13a"), corpus_bleu(hypotheses, references, "intl")


def text_report(hypotheses: Sequence[str], references: Sequence[str]) -> list[str]:
    """The report of text outputs against references: BLEU in both conventions, chrF2 and TER, each with its
    signature (a problem's scored as text, and a text export's without its problem)."""
    return [str(result) for result in bleu_scores(hypotheses, references) + chrf_and_ter(hypotheses, references)]


def problem_report(problem, outputs: list[str], references: list[str], sources: list[str]) -> list[str]:
    """The report lines of outputs against references as `problem` scores them (Problem.score): text_report for
    a problem scored as text."""
    report = problem.score(outputs, references, sources)
    return text_report(outputs, references) if report is None else report


def problem_dev_metric(problem, outputs: list[str], references: list[str], sources: list[str]) -> tuple[str, float]:
    """(name, value) of `problem`'s dev metric (Problem.dev_metric): detokenized sacreBLEU unless it has its own."""
    own = problem.dev_metric(outputs, references, sources)
    return ("BLEU", corpus_bleu(outputs, references).score) if own is None else own


def score_files(translation_path: str, reference_path: str, paper_language: str | None = None) -> tuple:
    """The BLEU conventions, then chrF2 and TER, for a translation file against a line-aligned reference file.

    Args:
      translation_path: hypotheses, one sentence per line, UTF-8.
      reference_path: references, one sentence per line, UTF-8.
      paper_language: if set, also the paper's compound-split BLEU, Moses-tokenized for this target language.
    Returns:
      (detokenized sacreBLEU 13a, tokenized t2t-bleu intl[, compound-split], chrF2, TER): things that print as
      one line each, with their signatures.
    Raises:
      UserError: a file is unreadable, empty or not UTF-8, or the line counts differ.
    """
    hypotheses, references = read_lines(translation_path), read_lines(reference_path)
    if len(hypotheses) != len(references):
        raise UserError(f"translation {translation_path} has {len(hypotheses)} lines but reference "
                        f"{reference_path} has {len(references)}; they must be line-aligned")
    if not hypotheses:
        raise UserError(f"translation {translation_path} is empty: no sentences to score")
    results = bleu_scores(hypotheses, references)
    if paper_language:
        results += (compound_split_bleu(hypotheses, references, paper_language),)
    return results + chrf_and_ter(hypotheses, references)
