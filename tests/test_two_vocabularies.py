"""A vocabulary per side (datagen's `source_vocab_*`/`target_vocab_*`), through every path: the data, the model,
training, the decoder, the scorer, the Translator, warm starts and ensembles, the SavedModel and CTranslate2.

The pair is made here: Latin-letter words and their Greek-letter transliterations, so the two sides share no
piece and their vocabularies differ in size (SOURCE_SIZE, TARGET_SIZE).
"""
import hashlib
import json
import os
import random

import numpy as np
import pytest
import sentencepiece as spm

import t2t_lite
import t2t_lite.problems  # noqa: F401  (registers the problems)
from t2t_lite.decoding.request import DecodeRequest
from t2t_lite.errors import UserError
from t2t_lite.inference.translator import Translator
from t2t_lite.registry import problems
from t2t_lite.run import RunRequest, name_partners, open_run

from cli_helpers import run_tool

SOURCE_SIZE, TARGET_SIZE = 300, 330
TWO = ("share_embeddings=false,num_encoder_layers=1,num_decoder_layers=1,d_model=32,d_ff=64,num_heads=4,"
       "dropout=0,attention_dropout=0,relu_dropout=0,train.batch_size=1024,average_last_checkpoints=0")
GREEK = dict(zip("abcdefghijklmnopqrstuvwxyz", "αβψδεφγηιξκλμνοπθρστυωςχυζ"))
STEPS = 150


def corpus(count: int, seed: int) -> tuple[list[str], list[str]]:
    """count pairs of 2 to 6 Latin pseudo-words and the same words in Greek letters."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghiklmnoprstu") for _ in range(rng.randint(2, 6))) for _ in range(60)]
    sources = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 6))) for _ in range(count)]
    return sources, ["".join(GREEK.get(c, c) for c in line) for line in sources]


def write_pair(directory, name, pairs) -> str:
    sources, targets = pairs
    for language, lines in (("la", sources), ("el", targets)):
        (directory / f"{name}.{language}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return f"{directory}/{name}.la,{directory}/{name}.el"


def prepare(data_dir, **options):
    problem = problems.get("translate_files")(str(data_dir))
    problem.generate_data(None, num_shards=1, log=lambda line: None, **options)
    return problem


def train(output_dir, data_dir, steps=STEPS, overrides=TWO, **options):
    return t2t_lite.train(problem="translate_files", hparams_set="transformer_tiny", output_dir=str(output_dir),
                          data_dir=str(data_dir), hparams=overrides, train_steps=steps, eval_steps=1,
                          save_checkpoints_steps=steps, log_every_steps=steps, eval_bleu_sentences=0,
                          mixed_precision="none", memory_probe=False, log=lambda _: None, **options)


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """Data with two vocabularies and a tiny run trained on it; the dev sentences, and a decoder request."""
    root = tmp_path_factory.mktemp("two")
    raw = root / "raw"
    raw.mkdir()
    files = {"train_files": write_pair(raw, "train", corpus(3000, 1)), "dev_files": write_pair(raw, "dev", corpus(30, 2))}
    problem = prepare(root / "data", source_vocab_size=SOURCE_SIZE, target_vocab_size=TARGET_SIZE, **files)
    train(root / "run", root / "data")
    request = RunRequest(output_dir=str(root / "run"), decode=DecodeRequest(mixed_precision="none", beam_size=3))
    sentences = (raw / "dev.la").read_text(encoding="utf-8").splitlines()[:12] + [""]
    return {"root": root, "raw": raw, "files": files, "problem": problem, "data_dir": root / "data",
            "run": root / "run", "request": request, "sentences": sentences,
            "translator": Translator.from_request(request)}


def test_datagen_writes_a_vocabulary_per_side_and_encodes_each_side_with_its_own(two):
    data_dir, config = two["data_dir"], two["problem"].config
    models = {side: (data_dir / name).read_bytes() for side, name in (("source", "source_vocab.model"),
                                                                       ("target", "vocab.model"))}
    assert config["source_vocab"]["sha256"] == hashlib.sha256(models["source"]).hexdigest()
    assert config["vocab"]["sha256"] == hashlib.sha256(models["target"]).hexdigest()
    assert (config["source_vocab"]["size"], config["vocab"]["size"]) == (SOURCE_SIZE, TARGET_SIZE)
    processors = {side: spm.SentencePieceProcessor(model_proto=model) for side, model in models.items()}
    assert [processors[side].get_piece_size() for side in ("source", "target")] == [SOURCE_SIZE, TARGET_SIZE]
    # Dev keeps file order: example i is dev line i, each side in its own model's ids.
    sources = (two["raw"] / "dev.la").read_text(encoding="utf-8").splitlines()
    targets = (two["raw"] / "dev.el").read_text(encoding="utf-8").splitlines()
    for i, example in enumerate(two["problem"].dataset("dev").take(5)):
        assert example["inputs"].numpy().tolist() == processors["source"].encode(sources[i]) + [1]
        assert example["targets"].numpy().tolist() == processors["target"].encode(targets[i]) + [1]
    assert two["problem"].decode(processors["target"].encode(targets[0])) == targets[0]
    assert two["problem"].source_codec.decode(processors["source"].encode(sources[0])) == sources[0]


def test_the_model_embeds_each_side_with_its_own_vocabulary(two):
    run = open_run(two["request"])
    model = run.model
    assert (model.source_vocab_size, model.vocab_size) == (SOURCE_SIZE, TARGET_SIZE)
    assert tuple(model.source_embedding.embeddings.shape) == (SOURCE_SIZE, 32)
    assert tuple(model.target_embedding.embeddings.shape) == (TARGET_SIZE, 32)
    assert run.spec.vocabulary_sha256 == two["problem"].vocabulary_fingerprint()
    assert two["problem"].config["source_vocab"]["sha256"] in run.spec.vocabulary_sha256


def test_outputs_are_target_text_and_depend_on_the_source(two):
    hypotheses = two["translator"].hypotheses(two["sentences"])
    texts = [found[0].text for found in hypotheses]
    assert texts[-1] == ""
    assert len(set(texts[:-1])) > 3  # input-dependent
    assert all(not set(text) & set("abcdefghiklmnoprstu") for text in texts)  # Greek letters only


def test_scorer_scores_each_beam_output_as_the_beam_search_did(two):
    """The scorer encodes targets with the target vocabulary: the score of (source, best output) is the search's."""
    sentences = two["sentences"][:-1]
    found = [hyps[0] for hyps in two["translator"].hypotheses(sentences)]
    scored = two["translator"].score(sentences, [h.text for h in found])
    np.testing.assert_allclose([s.score for s in scored], [h.score for h in found], atol=1e-5)


def test_a_saved_model_takes_source_text_and_gives_the_decoders_lines(two, tmp_path):
    from t2t_lite.export.exporter import ExportRequest, export_run

    path = export_run(ExportRequest(str(tmp_path / "export"), run=two["request"]), log=lambda _: None)
    assets = set(os.listdir(os.path.join(path, "assets")))
    assert {"vocab.model", "source_vocab.model"} <= assets
    ours = [h[0].text for h in two["translator"].hypotheses(two["sentences"])]
    assert [h[0].text for h in Translator.from_export(path).hypotheses(two["sentences"])] == ours

    import tensorflow as tf

    served = tf.saved_model.load(path).signatures["serving_default"](inputs=tf.constant(two["sentences"]))
    assert [text.decode("utf-8") for text in served["outputs"].numpy()] == ours


def test_a_ctranslate2_export_keeps_both_vocabularies_and_gives_the_decoders_float32_lines(two, tmp_path):
    pytest.importorskip("ctranslate2")
    from t2t_lite.export import ctranslate2_export

    path = ctranslate2_export.export_ctranslate2(open_run(two["request"]), str(tmp_path / "ct2"), "two")
    names = set(os.listdir(path))
    assert {"source_vocabulary.json", "target_vocabulary.json", "source_vocab.model", "vocab.model"} <= names
    assert len(json.loads((tmp_path / "ct2" / "two" / os.path.basename(path) / "source_vocabulary.json")
                          .read_text())) == SOURCE_SIZE
    ours = two["translator"].hypotheses(two["sentences"])
    theirs = Translator.from_export(path).hypotheses(two["sentences"])
    assert [h[0].text for h in theirs] == [h[0].text for h in ours]
    assert [h[0].ids for h in theirs] == [h[0].ids for h in ours]


def test_an_ensemble_of_the_run_twice_decodes_as_the_run(two):
    run = str(two["run"])
    ensemble = Translator.from_request(RunRequest(checkpoint_path=f"{run},{run}", decode=two["request"].decode))
    ours = two["translator"].hypotheses(two["sentences"])
    theirs = ensemble.hypotheses(two["sentences"])
    assert [h[0].text for h in theirs] == [h[0].text for h in ours]
    np.testing.assert_allclose([h[0].score for h in theirs], [h[0].score for h in ours], atol=1e-5)


def test_fine_tuning_keeps_both_vocabularies_and_other_ones_are_refused(two, tmp_path):
    new = {"train_files": write_pair(tmp_path, "new", corpus(400, 3)), "dev_files": two["files"]["dev_files"]}
    # vocab_from of a place with two vocabularies copies both.
    copied = prepare(tmp_path / "copied", vocab_from=str(two["run"]), **new)
    for name in ("source_vocab.model", "vocab.model"):
        assert (tmp_path / "copied" / name).read_bytes() == (two["data_dir"] / name).read_bytes()
    tuned = train(tmp_path / "tuned", tmp_path / "copied", steps=2, warm_start_from=str(two["run"]))
    assert tuned.spec.vocabulary_sha256 == two["problem"].vocabulary_fingerprint()
    # The same sizes from other text: other pieces, refused by warm start and by an ensemble.
    other = prepare(tmp_path / "other", source_vocab_size=SOURCE_SIZE, target_vocab_size=TARGET_SIZE,
                    max_vocab_sentences=200, **new)
    assert other.vocabulary_fingerprint() != two["problem"].vocabulary_fingerprint()
    with pytest.raises(UserError, match="its vocabulary is not this run's"):
        train(tmp_path / "refused", tmp_path / "other", steps=2, warm_start_from=str(two["run"]))
    train(tmp_path / "stranger", tmp_path / "other", steps=2)
    with pytest.raises(UserError, match="another vocabulary"):
        name_partners(str(two["run"]), [str(tmp_path / "stranger")])
    # One side copied from the run, the other trained anew.
    mixed = prepare(tmp_path / "mixed", source_vocab_from=str(two["run"]), target_vocab_size=TARGET_SIZE + 10, **new)
    assert (tmp_path / "mixed" / "source_vocab.model").read_bytes() == (two["data_dir"] / "source_vocab.model").read_bytes()
    assert (mixed.source_vocab_size, mixed.vocab_size) == (SOURCE_SIZE, TARGET_SIZE + 10)


def test_a_side_adopts_a_sentencepiece_model_trained_elsewhere(two, tmp_path):
    import io

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus(500, 4)[1]), model_writer=model, vocab_size=320,
                                   byte_fallback=True, minloglevel=2)  # SentencePiece's ids: UNK 0, BOS 1, EOS 2
    (tmp_path / "greek.model").write_bytes(model.getvalue())
    problem = prepare(tmp_path / "data", target_vocab_file=str(tmp_path / "greek.model"),
                      source_vocab_size=SOURCE_SIZE, **two["files"])
    assert problem.separate_vocabularies and problem.source_vocab_size == SOURCE_SIZE
    target = spm.SentencePieceProcessor(model_proto=(tmp_path / "data" / "vocab.model").read_bytes())
    assert (target.id_to_piece(0), target.id_to_piece(1)) == ("<pad>", "</s>")
    line = corpus(1, 5)[1][0]
    assert problem.decode(problem.target_codec.encode(line)) == line


@pytest.mark.parametrize("options, named", [
    ({"vocab_size": 300, "source_vocab_size": 300}, "drop `vocab_size`"),
    ({"source_vocab_size": 300, "source_vocab_file": "x.model"}, "drop `source_vocab_size`"),
    ({"source_vocab_file": "x.model", "source_vocab_from": "y"}, "pass one of them"),
    ({"vocab_file": "x.model", "target_vocab_size": 300}, "drop `vocab_file`"),
])
def test_contradicting_vocabulary_options_are_refused_in_one_line(two, tmp_path, options, named):
    with pytest.raises(UserError, match=named):
        prepare(tmp_path / "data", **two["files"], **options)
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("overrides, named", [("", "share_embeddings=false"),
                                              (f"{TWO},decoder_features=word_pointer", "word_pointer")])
def test_what_one_vocabulary_needs_is_refused_with_two(two, tmp_path, overrides, named):
    with pytest.raises(UserError, match=named):
        train(tmp_path / "run", two["data_dir"], steps=1, overrides=overrides)
    assert not (tmp_path / "run" / "hparams.json").exists()


def test_the_commands_take_both_sizes(two, tmp_path):
    files = two["files"]
    result = run_tool("datagen", "--problem=translate_files", f"--data_dir={tmp_path / 'data'}",
                      f"--train_files={files['train_files']}", f"--dev_files={files['dev_files']}", "--num_shards=1",
                      f"--source_vocab_size={SOURCE_SIZE}", f"--target_vocab_size={TARGET_SIZE + 5}")
    assert result.returncode == 0, result.stderr
    assert f"source vocabulary {SOURCE_SIZE} pieces, target vocabulary {TARGET_SIZE + 5}" in result.stdout
    result = run_tool("datagen", "--problem=translate_files", f"--data_dir={tmp_path / 'refused'}",
                      f"--train_files={files['train_files']}", f"--dev_files={files['dev_files']}",
                      "--vocab_size=300", "--source_vocab_size=300")
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1].count("drop --vocab_size") == 1
