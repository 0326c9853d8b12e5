"""A parser's outputs as trees users read: Translator.translate over a run, a SavedModel and a CTranslate2 export,
t2t-lite-decoder --output_trees, and gold trees as treebanks have them for --decode_reference."""
import io

import numpy as np
import pytest

from t2t_lite.data.target_forms import TARGET_FORMS, linearize_with_words
from t2t_lite.decoding.request import DecodeRequest
from t2t_lite.data.trees import PTB_PHRASE_LABELS, parse_tree_string, read_mrg, strip_tree
from t2t_lite.errors import UserError
from t2t_lite.problems import ptb_sample
from shared_data import require_shared
from tiny_parsers import linearised, train_tiny_parser

require_shared("ptb_wsj_sample/mrg")


@pytest.fixture(scope="module")
def words_parser_run(words_parser, tmp_path_factory):
    """The tiny parsing_ptb_sample_words parser, a directory for its exports, and 12 dev sentences with their
    gold bracketed trees."""
    root = tmp_path_factory.mktemp("words_parser")
    output_dir, data_dir, combined = words_parser
    gold = [tree for path in ptb_sample.split_files(combined, "dev") for tree in read_mrg(path)][:12]
    return root, output_dir, data_dir, gold


def is_tree_over(text: str, words: list[str]) -> bool:
    """Whether text is one bracketed tree (no TOP) whose leaves are exactly `words`."""
    tree = parse_tree_string(text)
    return tree.label != "TOP" and tree.words() == words


def test_a_parser_translates_into_trees_with_the_words_from_a_run_a_savedmodel_and_a_ctranslate2_export(
        words_parser_run):
    from t2t_lite import Translator
    from t2t_lite.export.exporter import ExportRequest, export_run
    from t2t_lite.run import RunRequest

    root, output_dir, _, gold = words_parser_run
    sentences = [" ".join(strip_tree(tree).words()) for tree in gold] + [""]
    settings = dict(beam_size=2, extra_length=12, batch_size=8, mixed_precision="none", constrained_decoding=True)
    run = Translator.from_run(output_dir, **settings)
    trees = run.translate(sentences, input_tokenized=True)
    assert trees[-1] == ""
    for sentence, tree, output in zip(sentences, trees, linearised(run, sentences)):
        if sentence:
            assert is_tree_over(tree, sentence.split())
            # The tree is the model's output, its words (copied exactly but for the first) the sentence's.
            shape = TARGET_FORMS["words"].shape
            assert shape(linearize_with_words(parse_tree_string(tree))[1]) == shape(output.split())
            assert [t for t in output.split() if shape([t]) == ["XX"]][1:] == sentence.split()[1:]
    version = export_run(ExportRequest(run=RunRequest(output_dir=output_dir, decode=DecodeRequest(**settings)),
                                       export_dir=str(root / "export")))
    assert Translator.from_export(version).translate(sentences, input_tokenized=True) == trees

    free = dict(settings, constrained_decoding=None)
    ct2 = export_run(ExportRequest(run=RunRequest(output_dir=output_dir, decode=DecodeRequest(**free)),
                                   export_dir=str(root / "ct2"),
                                   export_format="ctranslate2"))
    ct2_translator = Translator.from_export(ct2)
    ct2_trees = ct2_translator.translate(sentences, input_tokenized=True)
    assert ct2_trees == ct2_translator.as_trees(sentences, linearised(ct2_translator, sentences))
    # Searching freely, an output may be a repair: under TOP when it is more than one phrase.
    assert all(parse_tree_string(tree).words() == s.split() for s, tree in zip(sentences, ct2_trees) if s)


def test_the_decoder_writes_trees_and_scores_gold_trees_as_users_have_them(words_parser_run, tmp_path):
    from t2t_lite import Translator
    from t2t_lite.bin.lines import DecodeFileRequest, decode_file
    from t2t_lite.problems.wsj_parsing import score_linearized
    from t2t_lite.run import RunRequest

    _, output_dir, _, gold = words_parser_run
    sentences = [" ".join(strip_tree(tree).words()) for tree in gold]
    (tmp_path / "words").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    # The gold trees as the .mrg files have them (traces, function tags), one per line.
    (tmp_path / "gold").write_text("\n".join(" ".join(str(tree).split()) for tree in gold) + "\n", encoding="utf-8")
    settings = dict(beam_size=2, extra_length=12, mixed_precision="none")
    report = io.StringIO()
    decode_file(DecodeFileRequest(RunRequest(output_dir, decode=DecodeRequest(**settings)), decode_from_file=str(tmp_path / "words"),
                                  decode_to_file=str(tmp_path / "trees"), decode_reference=str(tmp_path / "gold"),
                                  output_trees=True, input_tokenized=True), out=report)
    translator = Translator.from_run(output_dir, **settings)
    written = (tmp_path / "trees").read_text(encoding="utf-8").splitlines()
    assert written == translator.translate(sentences, input_tokenized=True)
    outputs = linearised(translator, sentences)
    counts, _ = score_linearized(outputs, [str(strip_tree(tree)) for tree in gold], sentences,
                                 TARGET_FORMS["words"])
    assert f"Bracketing FMeasure       = {counts.f1:6.2f}" in report.getvalue().splitlines()
    # The same F1 from the linearised references: the "words" form keeps what EVALB scores.
    references = [" ".join(linearize_with_words(strip_tree(tree))[1]) for tree in gold]
    assert score_linearized(outputs, references, sentences, TARGET_FORMS["words"])[0] == counts


def test_a_pointer_parser_knows_its_vocabularys_words_and_brackets_and_its_savedmodel_parses_as_the_run(
        words_parser_run, tmp_path):
    from t2t_lite import Translator
    from t2t_lite.data.pieces import SentencePieceCodec
    from t2t_lite.export.exporter import ExportRequest, export_run
    from t2t_lite.parsing.open_phrases import CLOSE
    from t2t_lite.registry import problems
    from t2t_lite.run import RunRequest, open_run

    # Trained on the words parser's data: the same problem and slice, prepared once.
    output_dir, data_dir, combined = train_tiny_parser(tmp_path, "parsing_ptb_sample_words",
                                                       "decoder_features=word_pointer+open_phrases",
                                                       data_dir=words_parser_run[2])
    run = open_run(RunRequest(output_dir=output_dir))
    problem = problems.get("parsing_ptb_sample_words")(data_dir)
    starts = run.models[0].word_starts.numpy()
    expected = problem.word_start_ids()
    assert sorted(np.flatnonzero(starts)) == sorted(expected) and len(expected) > 20
    # Each label's two opening pieces share its own code, its closing piece closes, and nothing else counts.
    code = dict(zip(SentencePieceCodec(problem.vocabulary.model).pieces, run.models[0].phrase_code.numpy()))
    for label in PTB_PHRASE_LABELS:
        assert code["(" + label] == code["▁(" + label] > 0 and code["▁)" + label] == CLOSE, label
    assert len({code["(" + label] for label in PTB_PHRASE_LABELS}) == len(PTB_PHRASE_LABELS)
    assert sum(value != 0 for value in code.values()) == 3 * len(PTB_PHRASE_LABELS)
    sentences = [" ".join(strip_tree(tree).words()) for path in ptb_sample.split_files(combined, "dev")
                 for tree in read_mrg(path)][:8] + [""]
    # Constrained: the pointer's count of words beside the constraint's own (one export: a SavedModel is slow to write).
    settings = dict(beam_size=2, extra_length=12, batch_size=8, mixed_precision="none", constrained_decoding=True)
    trees = Translator.from_run(output_dir, **settings).translate(sentences)
    version = export_run(ExportRequest(run=RunRequest(output_dir=output_dir, decode=DecodeRequest(**settings)),
                                       export_dir=str(tmp_path / "export")))
    assert Translator.from_export(version).translate(sentences) == trees
    with pytest.raises(UserError, match="decoder_features word_pointer\+open_phrases cannot be exported for CTranslate2"):
        free = DecodeRequest(**dict(settings, constrained_decoding=None))
        export_run(ExportRequest(run=RunRequest(output_dir=output_dir, decode=free), export_dir=str(tmp_path / "ct2"),
                                 export_format="ctranslate2"))


def test_output_trees_is_refused_for_a_problem_that_does_not_parse(reverse_run, tmp_path):
    from t2t_lite.bin.lines import DecodeFileRequest, decode_file
    from t2t_lite.run import RunRequest

    (tmp_path / "in").write_text("1 2 3\n", encoding="utf-8")
    request = DecodeFileRequest(RunRequest(output_dir=reverse_run), decode_from_file=str(tmp_path / "in"),
                                decode_to_file=str(tmp_path / "out"), output_trees=True)
    with pytest.raises(UserError, match="--output_trees is for parsing problems"):
        decode_file(request)
    assert not (tmp_path / "out").exists()
