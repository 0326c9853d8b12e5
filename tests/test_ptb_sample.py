"""parsing_ptb_sample: NLTK's WSJ sample split by file number, read from --tmp_dir or downloaded (a local server)."""
import io
import os
import zipfile

import pytest

from t2t_lite.data.trees import linearize, read_mrg, strip_tree
from t2t_lite.errors import UserError
from t2t_lite.problems import ptb_sample
from t2t_lite.problems.wsj_parsing import read_mrg_pairs
from t2t_lite.registry import problems
from local_server import offline_fetch, serving
from shared_data import require_shared
from tiny_parsers import linearised, train_tiny_parser

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
    assert "\n" not in message and "wsj_0001.mrg ... wsj_0199.mrg (NLTK's treebank/combined/) in `tmp_dir`=" in message
    with pytest.raises(UserError, match="needs `tmp_dir`"):
        problem.generate_data(None, log=lambda line: None)


@pytest.fixture(scope="module")
def parser_run(tmp_path_factory):
    """A tiny parsing_ptb_sample parser, and 24 dev sentences with their linearised trees."""
    root = tmp_path_factory.mktemp("parser")
    output_dir, _, combined = train_tiny_parser(root, "parsing_ptb_sample")
    pairs = list(read_mrg_pairs(ptb_sample.split_files(combined, "dev")))[:24]
    return root, output_dir, [words for words, _ in pairs], [tree for _, tree in pairs]


def well_formed_share(problem, outputs, references, sources) -> str:
    return next(line for line in problem.score(outputs, references, sources) if line.startswith("Well-formed"))


def test_a_trained_parser_decodes_only_trees_with_constrained_decoding_and_its_savedmodel_too(parser_run):
    from t2t_lite import Translator
    from t2t_lite.export.exporter import ExportRequest, export_run
    from t2t_lite.decoding.request import DecodeRequest
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

    run = RunRequest(output_dir=output_dir, decode=DecodeRequest(constrained_decoding=True, **settings))
    version = export_run(ExportRequest(run=run, export_dir=str(root / "export")))
    assert linearised(Translator.from_export(version), words) == outputs
    with pytest.raises(UserError, match="`constrained_decoding` is for runs and SavedModels"):
        export_run(ExportRequest(run=run, export_dir=str(root / "ct2"), export_format="ctranslate2"))

