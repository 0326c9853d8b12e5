"""parsing_ptb_sample: NLTK's WSJ sample split by file number, read from --tmp_dir or downloaded (a local server)."""
import io
import os
import zipfile

import pytest

from t2t_lite.data.trees import TARGET_FORMS, linearize, linearize_with_words, parse_tree_string, read_mrg, strip_tree
from t2t_lite.errors import UserError
from t2t_lite.problems import ptb_sample
from t2t_lite.problems.wsj_parsing import read_mrg_pairs
from t2t_lite.registry import problems
from local_server import offline_fetch, serving
from shared_data import require_shared

MRG = require_shared("ptb_wsj_sample/mrg")  # wsj_0001 ... wsj_0179: the shared copy has no test files
# Two made-up test files (the sample's 0180-0199 are not in the shared copy).
SYNTHETIC = {"wsj_0180.mrg": "( (S (NP-SBJ (DT The) (NN cat)) (VP (VBD sat)) (. .)) )\n",
             "wsj_0199.mrg": "( (S (NP-SBJ (PRP It)) (VP (VBD rained)) (. .)) )\n"
                             "( (S (NP-SBJ (NNS Dogs)) (VP (VBP bark)) (. .)) )\n"}


def trees_in(numbers) -> int:
    """Trees with at least one word in the shared files wsj_<n>.mrg."""
    return sum(1 for n in numbers for tree in read_mrg(MRG / f"wsj_{n:04d}.mrg") if linearize(strip_tree(tree))[0])


def nltk_layout(root) -> str:
    """An NLTK data directory: corpora/treebank/combined/ with the shared files and the synthetic test files."""
    combined = root / "corpora" / "treebank" / "combined"
    combined.mkdir(parents=True)
    for path in MRG.glob("wsj_*.mrg"):
        (combined / path.name).symlink_to(path)
    for name, text in SYNTHETIC.items():
        (combined / name).write_text(text, encoding="utf-8")
    return str(combined)


def test_the_split_is_by_file_number_in_any_of_the_layouts(tmp_path):
    combined = nltk_layout(tmp_path)
    assert ptb_sample.sample_directory(str(tmp_path)) == combined
    assert ptb_sample.sample_directory(combined) == combined  # the bare files
    assert ptb_sample.sample_directory(str(tmp_path / "corpora")) == combined  # NLTK's corpora/ itself
    (tmp_path / "elsewhere").mkdir()
    assert ptb_sample.sample_directory(str(tmp_path / "elsewhere")) is None
    names = {split: [os.path.basename(p) for p in ptb_sample.split_files(combined, split)]
             for split in ("train", "dev", "test")}
    assert names == {"train": [f"wsj_{n:04d}.mrg" for n in range(1, 160)],
                     "dev": [f"wsj_{n:04d}.mrg" for n in range(160, 180)],
                     "test": ["wsj_0180.mrg", "wsj_0199.mrg"]}
    assert ptb_sample.train_dev_digest(combined) == ptb_sample.TRAIN_DEV_SHA256


def treebank_zip(modify: str | None = None) -> bytes:
    """NLTK's treebank.zip as its repository lays it out, from the shared files and the synthetic ones."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("treebank/README", "PENN TREEBANK SAMPLE\n")
        for path in sorted(MRG.glob("wsj_*.mrg")):
            text = path.read_bytes()
            archive.writestr(f"treebank/combined/{path.name}", text + b" " if path.name == modify else text)
        for name, text in SYNTHETIC.items():
            archive.writestr(f"treebank/combined/{name}", text)
    return buffer.getvalue()


@pytest.fixture
def nltk_server(tmp_path):
    """A local HTTP server standing for NLTK's data repository; returns the directory it serves and its URL."""
    served = tmp_path / "served"
    served.mkdir()
    with serving(served) as url:
        yield served, url + "treebank.zip"


def test_datagen_downloads_the_sample_and_prepares_its_three_splits(tmp_path, nltk_server, monkeypatch):
    served, url = nltk_server
    (served / "treebank.zip").write_bytes(treebank_zip())
    monkeypatch.setattr(ptb_sample, "TREEBANK_URL", url)
    tmp_dir = tmp_path / "tmp"
    problem = problems.get("parsing_ptb_sample")(str(tmp_path / "data"))
    config = problem.generate_data(str(tmp_dir), vocab_size=1000, num_shards=1, log=lambda line: None)
    assert len(list((tmp_dir / "treebank" / "combined").glob("*.mrg"))) == 179 + len(SYNTHETIC)
    assert {split: counts["examples"] for split, counts in config["splits"].items()} == {
        "train": trees_in(range(1, 160)), "dev": trees_in(range(160, 180)), "test": 3}
    assert problem.vocab_size == 1000
    first_test = next(iter(problem.dataset("test")))
    assert problem.decode(first_test["inputs"].numpy()) == "The cat sat ."
    assert problem.decode(first_test["targets"].numpy()) == "S NP DT NN /NP VP VBD /VP . /S"


def test_a_download_that_is_not_the_sample_is_refused_and_not_kept(tmp_path, nltk_server, monkeypatch):
    served, url = nltk_server
    (served / "treebank.zip").write_bytes(treebank_zip(modify="wsj_0042.mrg"))
    monkeypatch.setattr(ptb_sample, "TREEBANK_URL", url)
    tmp_dir = tmp_path / "tmp"
    tmp_dir.mkdir()
    problem = problems.get("parsing_ptb_sample")(str(tmp_path / "data"))
    with pytest.raises(UserError, match=r"does not hold NLTK's treebank sample: the SHA-256 of its wsj_0001-wsj_0179"):
        problem.generate_data(str(tmp_dir), log=lambda line: None)
    assert [p.name for p in tmp_dir.rglob("*") if p.is_file()] == []


def test_offline_without_the_files_one_line_says_what_to_put_where(tmp_path, monkeypatch):
    monkeypatch.setattr(ptb_sample, "fetch", offline_fetch)
    problem = problems.get("parsing_ptb_sample")(str(tmp_path / "data"))
    with pytest.raises(UserError) as error:
        problem.generate_data(str(tmp_path / "tmp"), log=lambda line: None)
    message = str(error.value)
    assert "\n" not in message and "wsj_0001.mrg ... wsj_0199.mrg (NLTK's treebank/combined/) in --tmp_dir=" in message
    with pytest.raises(UserError, match="needs --tmp_dir"):
        problem.generate_data(None, log=lambda line: None)


def train_tiny_parser(root, problem_name: str):
    """problem_name prepared offline under root from a slice of the shared files, a tiny parser trained 40 steps.

    Returns:
      (output_dir, data_dir, the slice's directory).
    """
    import t2t_lite

    # A slice of the sample (train wsj_0001-0040, dev 0160-0163): enough to train a little and decode.
    combined = root / "nltk"
    combined.mkdir()
    for number in [*range(1, 41), *range(160, 164)]:
        (combined / f"wsj_{number:04d}.mrg").symlink_to(MRG / f"wsj_{number:04d}.mrg")
    combined = str(combined)
    data_dir, output_dir = str(root / "data"), str(root / "run")
    problem = problems.get(problem_name)(data_dir)
    problem.generate_data(combined, vocab_size=500, num_shards=1, log=lambda line: None)
    t2t_lite.train(problem=problem_name, hparams_set="transformer_wsj_parsing_tiny", output_dir=output_dir,
                   data_dir=data_dir,
                   hparams="d_model=32,d_ff=64,num_encoder_layers=1,num_decoder_layers=1,train.batch_size=2048",
                   train_steps=40, eval_steps=1, save_checkpoints_steps=40, log_every_steps=40,
                   eval_bleu_sentences=0, mixed_precision="none", log=lambda _: None)
    return output_dir, data_dir, combined


@pytest.fixture(scope="module")
def parser_run(tmp_path_factory):
    """A tiny parsing_ptb_sample parser, and 24 dev sentences with their linearised trees."""
    root = tmp_path_factory.mktemp("parser")
    output_dir, _, combined = train_tiny_parser(root, "parsing_ptb_sample")
    pairs = list(read_mrg_pairs(ptb_sample.split_files(combined, "dev")))[:24]
    return root, output_dir, [words for words, _ in pairs], [tree for _, tree in pairs]


def linearised(translator, sentences) -> list[str]:
    """The best output of each sentence as the model wrote it (translate gives a parser's as trees)."""
    return [hyps[0].text if hyps else "" for hyps in translator.hypotheses(sentences)]


def well_formed_share(problem, outputs, references, sources) -> str:
    return next(line for line in problem.score(outputs, references, sources) if line.startswith("Well-formed"))


def test_a_trained_parser_decodes_only_trees_with_constrained_decoding_and_its_savedmodel_too(parser_run):
    from t2t_lite import Translator
    from t2t_lite.export.exporter import ExportRequest, export_run
    from t2t_lite.run import RunRequest

    root, output_dir, words, trees = parser_run
    # float32 on every CPU: the SavedModel's portable step products would round bfloat16 differently.
    settings = dict(beam_size=2, extra_length=12, batch_size=8, mixed_precision="none")
    free = Translator.from_run(output_dir, **settings)
    problem = free._backend.run.problem
    assert well_formed_share(problem, linearised(free, words), trees, words) != "Well-formed before repair  = 100.00 %"
    constrained = Translator.from_run(output_dir, constrained_decoding=True, **settings)
    outputs = linearised(constrained, words)
    assert well_formed_share(problem, outputs, trees, words) == "Well-formed before repair  = 100.00 %"

    run = RunRequest(output_dir=output_dir, constrained_decoding=True, **settings)
    version = export_run(ExportRequest(run=run, export_dir=str(root / "export")))
    assert linearised(Translator.from_export(version), words) == outputs
    with pytest.raises(UserError, match="--constrained_decoding is for runs and SavedModels"):
        export_run(ExportRequest(run=run, export_dir=str(root / "ct2"), export_format="ctranslate2"))


@pytest.fixture(scope="module")
def words_parser_run(tmp_path_factory):
    """A tiny parsing_ptb_sample_words parser, and 12 dev sentences with their gold bracketed trees."""
    root = tmp_path_factory.mktemp("words_parser")
    output_dir, data_dir, combined = train_tiny_parser(root, "parsing_ptb_sample_words")
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
    trees = run.translate(sentences)
    assert trees[-1] == ""
    for sentence, tree, output in zip(sentences, trees, linearised(run, sentences)):
        if sentence:
            assert is_tree_over(tree, sentence.split())
            # The tree is the model's output, its words (copied exactly but for the first) the sentence's.
            shape = TARGET_FORMS["words"].shape
            assert shape(linearize_with_words(parse_tree_string(tree))[1]) == shape(output.split())
            assert [t for t in output.split() if shape([t]) == ["XX"]][1:] == sentence.split()[1:]
    version = export_run(ExportRequest(run=RunRequest(output_dir=output_dir, **settings),
                                       export_dir=str(root / "export")))
    assert Translator.from_export(version).translate(sentences) == trees

    free = dict(settings, constrained_decoding=None)
    ct2 = export_run(ExportRequest(run=RunRequest(output_dir=output_dir, **free), export_dir=str(root / "ct2"),
                                   export_format="ctranslate2"))
    ct2_translator = Translator.from_export(ct2)
    ct2_trees = ct2_translator.translate(sentences)
    assert ct2_trees == ct2_translator.as_trees(sentences, linearised(ct2_translator, sentences))
    # Searching freely, an output may be a repair: under TOP when it is more than one phrase.
    assert all(parse_tree_string(tree).words() == s.split() for s, tree in zip(sentences, ct2_trees) if s)


def test_the_decoder_writes_trees_and_scores_gold_trees_as_users_have_them(words_parser_run, tmp_path):
    from t2t_lite import Translator
    from t2t_lite.lines import DecodeFileRequest, decode_file
    from t2t_lite.problems.wsj_parsing import score_linearized
    from t2t_lite.run import RunRequest

    _, output_dir, _, gold = words_parser_run
    sentences = [" ".join(strip_tree(tree).words()) for tree in gold]
    (tmp_path / "words").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    # The gold trees as the .mrg files have them (traces, function tags), one per line.
    (tmp_path / "gold").write_text("\n".join(" ".join(str(tree).split()) for tree in gold) + "\n", encoding="utf-8")
    settings = dict(output_dir=output_dir, beam_size=2, extra_length=12, mixed_precision="none")
    report = io.StringIO()
    decode_file(DecodeFileRequest(RunRequest(**settings), decode_from_file=str(tmp_path / "words"),
                                  decode_to_file=str(tmp_path / "trees"), decode_reference=str(tmp_path / "gold"),
                                  output_trees=True), out=report)
    translator = Translator.from_run(**settings)
    assert (tmp_path / "trees").read_text(encoding="utf-8").splitlines() == translator.translate(sentences)
    outputs = linearised(translator, sentences)
    counts, _ = score_linearized(outputs, [str(strip_tree(tree)) for tree in gold], sentences,
                                 TARGET_FORMS["words"])
    assert f"Bracketing FMeasure       = {counts.f1:6.2f}" in report.getvalue().splitlines()
    # The same F1 from the linearised references: the "words" form keeps what EVALB scores.
    references = [" ".join(linearize_with_words(strip_tree(tree))[1]) for tree in gold]
    assert score_linearized(outputs, references, sentences, TARGET_FORMS["words"])[0] == counts


def test_output_trees_is_refused_for_a_problem_that_does_not_parse(reverse_run, tmp_path):
    from t2t_lite.lines import DecodeFileRequest, decode_file
    from t2t_lite.run import RunRequest

    (tmp_path / "in").write_text("1 2 3\n", encoding="utf-8")
    request = DecodeFileRequest(RunRequest(output_dir=reverse_run), decode_from_file=str(tmp_path / "in"),
                                decode_to_file=str(tmp_path / "out"), output_trees=True)
    with pytest.raises(UserError, match="--output_trees is for parsing problems"):
        decode_file(request)
    assert not (tmp_path / "out").exists()
