"""Tests for t2t_lite.metrics.bleu and t2t-lite-bleu: scores equal sacreBLEU's own, known values, clear errors."""
from __future__ import annotations

import math
import subprocess
import sys

import pytest
import sacrebleu
from shared_data import require_shared

from t2t_lite.errors import UserError
from t2t_lite.files import read_lines
from t2t_lite.metrics.chrf_ter import chrf_and_ter
from t2t_lite.metrics.bleu import (bleu_scores, compound_split_bleu, corpus_bleu, paper_tokenize, score_files,
                                   split_compounds)


def drop_every_seventh_word(line: str) -> str:
    """A deterministic, BLEU-lowering edit of a real sentence."""
    return " ".join(word for i, word in enumerate(line.split(), start=1) if i % 7)


@pytest.fixture(scope="module")
def val_de():
    return require_shared("multi30k/raw/val.de")


@pytest.fixture
def perturbed_files(val_de, tmp_path):
    """(translation path, reference path, hypotheses, references) over Multi30k val.de."""
    references = val_de.read_text(encoding="utf-8").splitlines()
    hypotheses = [drop_every_seventh_word(line) for line in references]
    translation = tmp_path / "val.perturbed.de"
    translation.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    return str(translation), str(val_de), hypotheses, references


@pytest.mark.parametrize("tokenize", ["13a", "intl"])
def test_equals_sacrebleu_on_real_files(perturbed_files, tokenize):
    translation, reference, hypotheses, references = perturbed_files
    expected = sacrebleu.corpus_bleu(hypotheses, [references], tokenize=tokenize)
    ours = {"13a": 0, "intl": 1}[tokenize]
    result = score_files(translation, reference)[ours]
    assert result.score == expected.score
    assert list(result.precisions) == expected.precisions
    assert result.brevity_penalty == expected.bp
    assert result.signature == f"nrefs:1|case:mixed|eff:no|tok:{tokenize}|smooth:exp|version:{sacrebleu.__version__}"
    assert 0.0 < result.score < 100.0


def test_identical_files_score_100(val_de):
    # sacreBLEU computes exp(mean of log precisions), so 100 comes back as 100.00000000000004.
    sacre, t2t, chrf, ter = score_files(str(val_de), str(val_de))
    for result in (sacre, t2t):
        assert result.score == pytest.approx(100.0, abs=1e-9)
        assert result.precisions == (100.0, 100.0, 100.0, 100.0)
    assert chrf.score == pytest.approx(100.0) and ter.score == 0.0


def test_hand_computed_case():
    # hyp "the cat sat on mats" (5 words) vs ref "the cat sat on the mat" (6 words):
    #   1-grams: the cat sat on match, mats does not          -> 4/5
    #   2-grams: the-cat cat-sat sat-on match, on-mats not     -> 3/4
    #   3-grams: the-cat-sat cat-sat-on match, sat-on-mats not -> 2/3
    #   4-grams: the-cat-sat-on matches, cat-sat-on-mats not   -> 1/2
    # geometric mean = (4/5 * 3/4 * 2/3 * 1/2) ** (1/4) = (1/5) ** (1/4)
    # BP = exp(1 - r/c) = exp(1 - 6/5); BLEU = 100 * BP * (1/5) ** (1/4) = 54.75
    expected = 100 * math.exp(1 - 6 / 5) * (1 / 5) ** 0.25
    for result in bleu_scores(["the cat sat on mats"], ["the cat sat on the mat"]):
        assert result.score == pytest.approx(expected, rel=1e-9)
        assert result.precisions == pytest.approx((80.0, 75.0, 200 / 3, 50.0))
        assert result.brevity_penalty == pytest.approx(math.exp(-0.2))
    assert round(expected, 2) == 54.75


def test_chrf_and_ter_equal_sacrebleus_own_on_real_files(perturbed_files):
    translation, reference, hypotheses, references = perturbed_files
    chrf, ter = score_files(translation, reference)[2:]
    assert (chrf.name, ter.name) == ("chrF2", "TER")
    assert chrf.score == sacrebleu.corpus_chrf(hypotheses, [references]).score
    assert ter.score == sacrebleu.corpus_ter(hypotheses, [references]).score
    assert 0.0 < ter.score < chrf.score < 100.0


def test_ter_hand_computed_case():
    # "the cat sat on mats" -> "the cat sat on the mat": substitute mats -> the, insert mat; 2 edits / 6 words.
    _, ter = chrf_and_ter(["the cat sat on mats"], ["the cat sat on the mat"])
    assert ter.score == pytest.approx(100 * 2 / 6)
    assert str(ter).startswith("TER = 33.33  nrefs:1|case:lc|tok:tercom|")


def test_intl_splits_unicode_punctuation_that_13a_keeps():
    # 13a splits ASCII punctuation only, so German quotes stay glued to the word;
    # intl (t2t-bleu) splits every Unicode punctuation mark.
    hypothesis, reference = ["er sagte „ja“ dann"], ["er sagte „ ja “ dann"]
    detokenized, tokenized = bleu_scores(hypothesis, reference)
    assert tokenized.score == pytest.approx(100.0, abs=1e-9)
    assert detokenized.score < 50.0


def test_compound_splitting_follows_get_ende_bleu_sh():
    # perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g': matches do not overlap, and a free-standing "-" stays.
    assert split_compounds("rich-text format") == "rich ##AT##-##AT## text format"
    assert split_compounds("a-b-c - d") == "a ##AT##-##AT## b-c - d"
    # tokenizer.perl -l de: punctuation split off, "Mio." a German non-breaking prefix, & escaped.
    assert paper_tokenize(['Das "rich-text" Format, 3 Mio. Euro & mehr.'], "de") == [
        "Das &quot; rich ##AT##-##AT## text &quot; Format , 3 Mio. Euro &amp; mehr ."]


def test_compound_split_bleu_hand_computed_case():
    # Tokenized and split, both sides have 8 tokens and differ in one:
    #   hyp: Das ist ein rich ##AT##-##AT## text Format .
    #   ref: Das ist ein rich ##AT##-##AT## text Dokument .
    # 1-grams 7/8, 2-grams 5/7, 3-grams 4/6, 4-grams 3/5 (each n-gram touching "Format" misses);
    # BP = 1; BLEU = 100 * (7*5*4*3 / (8*7*6*5)) ** (1/4) = 100 * (1/4) ** (1/4) = 70.71.
    result = compound_split_bleu(["Das ist ein rich-text Format."], ["Das ist ein rich-text Dokument."])
    assert result.score == pytest.approx(100 * 0.25**0.25, rel=1e-9)
    assert result.precisions == pytest.approx((100 * 7 / 8, 100 * 5 / 7, 100 * 4 / 6, 100 * 3 / 5))
    assert result.brevity_penalty == 1.0
    assert "compound-split" in str(result) and "tok:none|smooth:none" in result.signature
    # Unsplit, "rich-text" is one token: 5/6, 3/5, 2/4, 1/3 and a lower score; the split is what the paper scored.
    unsplit = 100 * (5 * 3 * 2 * 1 / (6 * 5 * 4 * 3)) ** 0.25
    assert result.score > unsplit + 10


def test_line_count_mismatch_names_both_counts(tmp_path):
    with pytest.raises(ValueError, match="1 hypotheses but 2 references"):
        corpus_bleu(["a b"], ["a b", "c d"])
    translation, reference = tmp_path / "hyp", tmp_path / "ref"
    translation.write_text("a\nb\nc\n", encoding="utf-8")
    reference.write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"has 3 lines but reference .* has 2"):
        score_files(str(translation), str(reference))


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("fine\nalso fine\nGrüße\n".encode("latin-1"))
    with pytest.raises(UserError, match=rf"{path}: line 3 is not valid UTF-8"):
        read_lines(str(path))


def test_read_lines_endings(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_bytes(b"a\r\n\nb\xe2\x80\xa8c\nlast")
    # CRLF counts as LF, an empty line stays, U+2028 is not a line break, no final newline needed.
    assert read_lines(str(path)) == ["a", "", "b\u2028c", "last"]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "t2t_lite.bin.bleu", *args], capture_output=True, text=True,
                          check=False, timeout=60)


def test_cli_prints_every_score_with_its_signature(tmp_path):
    translation, reference = tmp_path / "hyp", tmp_path / "ref"
    translation.write_text("the cat sat on mats\n", encoding="utf-8")
    reference.write_text("the cat sat on the mat\n", encoding="utf-8")
    done = run_cli(f"--translation={translation}", f"--reference={reference}")
    assert done.returncode == 0, done.stderr
    version = sacrebleu.__version__
    assert done.stdout.splitlines() == [
        f"BLEU (sacreBLEU 13a, detokenized) = 54.75  nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{version}",
        f"BLEU (t2t-bleu intl, tokenized) = 54.75  nrefs:1|case:mixed|eff:no|tok:intl|smooth:exp|version:{version}",
        f"chrF2 = 65.98  nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:{version}",
        f"TER = 33.33  nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:{version}",
    ]


def test_cli_prints_the_papers_convention_when_asked(tmp_path):
    translation, reference = tmp_path / "hyp", tmp_path / "ref"
    translation.write_text("Das ist ein rich-text Format.\n", encoding="utf-8")
    reference.write_text("Das ist ein rich-text Dokument.\n", encoding="utf-8")
    done = run_cli(f"--translation={translation}", f"--reference={reference}", "--paper_bleu_language=de")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 5
    assert lines[2].startswith("BLEU (paper: Moses-tokenized, compound-split, de) = 70.71  nrefs:1|case:mixed|")


@pytest.mark.parametrize("problem", ["missing", "invalid_utf8"])
def test_cli_bad_file_is_one_line_and_nonzero_exit(tmp_path, problem):
    reference = tmp_path / "ref"
    reference.write_text("a b c\n", encoding="utf-8")
    translation = tmp_path / "hyp"
    if problem == "invalid_utf8":
        translation.write_bytes(b"a \xff c\n")
    done = run_cli(f"--translation={translation}", f"--reference={reference}")
    assert done.returncode != 0
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("t2t-lite-bleu: error: ") and str(translation) in done.stderr
