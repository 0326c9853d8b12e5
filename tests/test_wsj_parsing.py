"""wsj_parsing: datagen on the PTB sample, bracket scoring of linearised trees, the paper's hparams set."""
import collections
import dataclasses
import os
import random

import pytest

import t2t_lite.hparams  # noqa: F401  (registers the sets)
import t2t_lite.problems  # noqa: F401  (registers the problems)
from t2t_lite.config import apply_overrides
from t2t_lite.data.problem import EOS_ID, PAD_ID
from t2t_lite.data.trees import delinearize, linearize, read_mrg, strip_tree
from t2t_lite.errors import UserError
from t2t_lite.metrics.parse_f1 import BracketCounts, score_corpus, score_trees
from t2t_lite.models import build_model
from t2t_lite.problems.wsj_parsing import (
    LDC_SECTIONS,
    PUNCTUATION_TAGS,
    WsjParsing,
    ldc_split_files,
    score_linearized,
)
from t2t_lite.registry import hparams_sets, problems
from t2t_lite.run_dir import RunDir, RunSpec, save_spec
from cli_helpers import run_tool
from shared_data import require_shared

QUIET = {"log": lambda line: None}
CAT_WORDS = "The cat sat ."
CAT_TARGETS = "S NP DT NN /NP VP VBD /VP . /S"


def _sample_files(first: int, last: int) -> list[str]:
    """wsj_<first>.mrg ... wsj_<last>.mrg of the shared sample."""
    mrg_dir = require_shared("ptb_wsj_sample/mrg")
    return [str(mrg_dir / f"wsj_{n:04d}.mrg") for n in range(first, last + 1)]


def _expected_pairs(paths: list[str]) -> list[tuple[str, str]]:
    """(words, linearised tree) of every tree in the files that has a word."""
    pairs = []
    for path in paths:
        for tree in read_mrg(path):
            words, tokens = linearize(strip_tree(tree))
            if words:
                pairs.append((" ".join(words), " ".join(tokens)))
    return pairs


def _decoded_pairs(problem: WsjParsing, split: str) -> list[tuple[str, str]]:
    """Every example of a split decoded back to text, in dataset order."""
    pairs = []
    for batch in problem.dataset(split).padded_batch(512):
        texts = [problem.vocabulary.tf_decode(batch[name]).numpy() for name in ("inputs", "targets")]
        pairs.extend((a.decode("utf-8"), b.decode("utf-8")) for a, b in zip(*texts))
    return pairs


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """The sample prepared as the brief splits it: files 0001-0159 train, 0160-0179 dev."""
    mrg_dir = require_shared("ptb_wsj_sample/mrg")
    files = {"train_files": f"{mrg_dir}/wsj_00??.mrg,{mrg_dir}/wsj_01[0-5]?.mrg",  # globs
             "dev_files": ",".join(_sample_files(160, 179))}  # an explicit list
    data_dir = str(tmp_path_factory.mktemp("wsj"))
    config = WsjParsing(data_dir).generate_data(None, vocab_size=1000, num_shards=2, **files, **QUIET)
    return problems.get("wsj_parsing")(data_dir), config


def test_examples_decode_to_the_words_and_linearised_trees(sample):
    problem, config = sample
    for split, (first, last) in (("train", (1, 159)), ("dev", (160, 179))):
        expected = _expected_pairs(_sample_files(first, last))
        assert config["splits"][split]["examples"] == len(expected)
        assert collections.Counter(_decoded_pairs(problem, split)) == collections.Counter(expected)
    assert problem.splits == ("train", "dev")
    assert problem.vocab_size == 1000


def test_every_example_ends_with_its_only_eos(sample):
    problem, _ = sample
    for example in problem.dataset("dev").take(50):
        for ids in (example["inputs"].numpy().tolist(), example["targets"].numpy().tolist()):
            assert ids[-1] == EOS_ID and ids.count(EOS_ID) == 1 and PAD_ID not in ids


def test_closing_brackets_and_punctuation_tags_are_single_pieces(sample):
    problem, _ = sample
    closes = ["/" + label for label in ("NP", "VP", "S", "SBAR", "WHADJP", "UCP", "LST")]
    for tag in closes + list(PUNCTUATION_TAGS):
        assert len(problem.encode(" " + tag)) == 1, tag
    # Alphabetic labels are whole pieces by frequency: almost every target token is one piece.
    targets = [target for _, target in _expected_pairs(_sample_files(160, 179))]
    pieces = sum(len(problem.encode(target)) for target in targets)
    assert pieces / sum(len(target.split()) for target in targets) < 1.01


def test_score_of_gold_against_gold_is_100(sample):
    problem, _ = sample
    sources, targets = zip(*_decoded_pairs(problem, "dev"))
    report = problem.score(list(targets), list(targets), list(sources))
    assert "Bracketing FMeasure       = 100.00" in report
    assert "Number of Error sentence  =      0" in report
    assert "Number of Skip  sentence  =      0" in report
    assert "Malformed outputs repaired = 0" in report
    assert "Well-formed before repair  = 100.00 %" in report and "Exact tree match           = 100.00 %" in report


def _corrupt(tokens: list[str], rng: random.Random) -> list[str]:
    """A prediction gone wrong: a token dropped, a label swapped, or the tail cut off."""
    i = rng.randrange(len(tokens))
    kind = rng.choice(["drop", "swap", "cut"])
    if kind == "drop":
        return tokens[:i] + tokens[i + 1:]
    if kind == "swap":
        return tokens[:i] + ["NP"] + tokens[i + 1:]
    return tokens[:i]


def test_score_of_corrupted_predictions_is_score_corpus_of_their_repaired_trees(sample):
    problem, _ = sample
    dev_files = _sample_files(160, 179)
    gold = [strip_tree(tree) for path in dev_files for tree in read_mrg(path)]
    sources, references = zip(*_expected_pairs(dev_files))
    assert len(gold) == len(sources)
    rng = random.Random(0)
    outputs = [" ".join(_corrupt(r.split(), rng)) if n % 2 else r for n, r in enumerate(references)]
    predicted = [delinearize(s.split(), o.split()) for s, o in zip(sources, outputs)]
    expected = score_corpus(gold, predicted)

    counts, repaired = score_linearized(outputs, references, sources)
    assert counts == expected
    assert expected.f1 < 100
    assert 0 < repaired <= len(outputs) // 2
    report = problem.score(outputs, list(references), list(sources))
    assert f"Bracketing FMeasure       = {expected.f1:6.2f}" in report
    assert f"Malformed outputs repaired = {repaired}" in report


def test_hand_computed_score_and_repair_count():
    # Missing "/NP": NP stays open to the end, so it spans all 3 scored words (the
    # final "." is not scored). Gold: S(0,3), NP(0,2), VP(2,3); predicted: S(0,3),
    # NP(0,3), VP(2,3) -> 2 of 3 brackets match.
    broken = "S NP DT NN VP VBD /VP . /S"
    counts, repaired = score_linearized([broken, CAT_TARGETS], [CAT_TARGETS] * 2, [CAT_WORDS] * 2)
    assert counts == BracketCounts(matched=5, gold=6, predicted=6, sentences=2)
    assert repaired == 1
    only_broken = score_trees(delinearize(CAT_WORDS.split(), CAT_TARGETS.split()),
                              delinearize(CAT_WORDS.split(), broken.split()))
    assert (only_broken.matched, only_broken.gold, only_broken.predicted) == (2, 3, 3)


def test_score_rejects_unmatched_lines_and_references_that_are_not_trees():
    with pytest.raises(UserError, match="2 outputs, 1 references and 1 source"):
        score_linearized([CAT_TARGETS] * 2, [CAT_TARGETS], [CAT_WORDS])
    with pytest.raises(UserError, match="reference line 1 is neither a bracketed tree nor a linearised tree over "
                                        "the 3 words"):
        score_linearized([CAT_TARGETS], [CAT_TARGETS], ["The cat sat"])
    with pytest.raises(UserError, match="reference line 1's tree has the words 'The cat', source line 1 'The cat sat'"):
        score_linearized([CAT_TARGETS], ["(S (NP (DT The) (NN cat)))"], ["The cat sat"])
    with pytest.raises(UserError, match="reference line 1 is not a bracketed tree"):
        score_linearized([CAT_TARGETS], ["(S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)))"], [CAT_WORDS])


def test_ldc_layout_maps_sections_to_splits(tmp_path):
    for section in range(25):
        (tmp_path / f"{section:02d}").mkdir()
    files = ldc_split_files(str(tmp_path))
    assert files["train_files"].split(",") == [str(tmp_path / f"{s:02d}") for s in range(2, 22)]
    assert files["dev_files"] == str(tmp_path / "22")
    assert files["test_files"] == str(tmp_path / "23")
    assert LDC_SECTIONS["dev"] == (22,) and LDC_SECTIONS["test"] == (23,)
    (tmp_path / "23").rmdir()
    with pytest.raises(UserError, match="23 missing"):
        ldc_split_files(str(tmp_path))


def test_datagen_reads_the_ldc_layout_from_tmp_dir(tmp_path):
    """Sections 02-21 get two sample files each, 22 and 23 five each; the others stay empty."""
    placed = {section: _sample_files(2 * section - 3, 2 * section - 2) for section in range(2, 22)}
    placed[22], placed[23] = _sample_files(160, 164), _sample_files(170, 174)
    ptb_dir = tmp_path / "wsj"
    for section in range(25):
        directory = ptb_dir / f"{section:02d}"
        directory.mkdir(parents=True)
        for path in placed.get(section, []):
            (directory / os.path.basename(path)).symlink_to(path)
    data_dir = tmp_path / "data"
    config = WsjParsing(str(data_dir)).generate_data(str(ptb_dir), vocab_size=400, num_shards=1, **QUIET)
    assert config["options"]["dev_files"] == str(ptb_dir / "22")
    for split, paths in (("train", _sample_files(1, 40)), ("dev", placed[22]), ("test", placed[23])):
        assert config["splits"][split]["examples"] == len(_expected_pairs(paths))


@pytest.mark.parametrize("files, message", [
    ("{mrg}/wsj_9*.mrg", "`train_files`: no .mrg file at .*wsj_9"),
    ("{bad}", "cannot read .*bad.mrg: 2 unclosed"),
])
def test_bad_inputs_fail_with_one_line_and_write_nothing(tmp_path, files, message):
    bad = tmp_path / "bad.mrg"
    bad.write_text("( (S (NP (DT The)) (VP (VBD sat))\n")
    files = files.format(mrg=require_shared("ptb_wsj_sample/mrg"), bad=bad)
    data_dir = tmp_path / "data"
    with pytest.raises(UserError, match=message):
        WsjParsing(str(data_dir)).generate_data(None, train_files=files, dev_files=str(bad), **QUIET)
    assert not data_dir.exists()


def test_without_files_or_tmp_dir_the_message_says_what_to_pass(tmp_path):
    with pytest.raises(UserError, match="needs `tmp_dir`=<the LDC wsj directory"):
        WsjParsing(str(tmp_path / "data")).generate_data(None, **QUIET)


def test_paper_set_sizes_and_decode_defaults():
    hp = hparams_sets.get("transformer_wsj_parsing")()
    assert (hp.decode.beam_size, hp.decode.alpha, hp.decode.extra_length) == (21, 0.3, 300)
    assert (hp.model.num_encoder_layers, hp.model.num_decoder_layers, hp.model.d_model) == (4, 4, 1024)
    # Unchanged from base (paper 6.3): d_ff 2048, 8 heads, post-norm, shared embeddings.
    assert (hp.model.d_ff, hp.model.num_heads, hp.model.norm_position, hp.model.share_embeddings) == (
        2048, 8, "post", True)
    tiny = hparams_sets.get("transformer_wsj_parsing_tiny")()
    assert tiny.decode == hp.decode


def test_decoder_uses_the_sets_decode_defaults_and_prints_bracket_scores(sample, tmp_path):
    """The decoder's own flags leave beam and alpha to the set (21, 0.3), and parsing is scored in brackets.

    What is decoded does not matter here, so the run is the set at 1+1 layers of width 32, saved
    untrained (training it a step proved nothing more and cost most of the test's time).
    """
    import tensorflow as tf

    problem, _ = sample
    output_dir, words, gold = tmp_path / "run", tmp_path / "words.txt", tmp_path / "gold.txt"
    output_dir.mkdir()
    overrides = "d_model=32,d_ff=64,num_heads=4,num_encoder_layers=1,num_decoder_layers=1"
    hparams = apply_overrides(hparams_sets.get("transformer_wsj_parsing_tiny")(),
                              f"{overrides},vocab_size={problem.vocab_size}")
    save_spec(RunDir(str(output_dir)), RunSpec("wsj_parsing", "transformer_wsj_parsing_tiny", overrides, hparams))
    tf.train.Checkpoint(model=build_model(hparams)).save(str(output_dir / "ckpt"))
    words.write_text(CAT_WORDS + "\n")
    gold.write_text(CAT_TARGETS + "\n")
    result = run_tool("decoder", f"--output_dir={output_dir}", f"--data_dir={problem.data_dir}",
                      f"--decode_from_file={words}", f"--decode_reference={gold}")
    assert result.returncode == 0, result.stderr
    assert "(beam 21, alpha 0.3)" in result.stderr
    assert "Number of sentence        =      1" in result.stdout


def test_paper_set_builds_4_layers_of_width_1024():
    hp = hparams_sets.get("transformer_wsj_parsing")()
    model = build_model(dataclasses.replace(hp, model=dataclasses.replace(hp.model, vocab_size=64)))
    assert len(model.encoder_layers) == len(model.decoder_layers) == 4
    assert model.target_embedding.embeddings.shape == (64, 1024)



def test_the_report_gives_the_well_formed_and_exact_shares():
    # One exact, one well-formed with a wrong tag (not exact), two malformed (an unclosed NP, a cut tail).
    outputs = [CAT_TARGETS, "S NP DT JJ /NP VP VBD /VP . /S", "S NP DT NN VP VBD /VP . /S", "S NP DT"]
    report = WsjParsing().score(outputs, [CAT_TARGETS] * 4, [CAT_WORDS] * 4)
    assert "Malformed outputs repaired = 2" in report
    assert "Well-formed before repair  =  50.00 %" in report
    assert "Exact tree match           =  25.00 %" in report
