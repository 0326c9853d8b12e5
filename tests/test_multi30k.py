"""translate_multi30k: the release files read offline from --tmp_dir, or downloaded from a local server."""
import gzip
import hashlib

import numpy as np
import pytest
import tensorflow as tf

import t2t_lite
from t2t_lite.data.ids import EOS_ID, PAD_ID, strip_ids
from t2t_lite.errors import UserError
from t2t_lite.files import iter_lines
from t2t_lite.models import build_model
from t2t_lite.problems import multi30k
from t2t_lite.registry import problems
from t2t_lite.run_dir import RunDir, load_spec
from t2t_lite.inference.translator import Translator
from local_server import offline_fetch, serving
from shared_data import require_shared
from trained_runs import MULTI30K_TINY

RAW = require_shared("multi30k/raw")
FILES = [f"{split}.{language}" for split in multi30k.SPLIT_NAMES.values() for language in ("en", "de")]


def test_the_pinned_checksums_are_those_of_the_release_text():
    for name, digest in multi30k.TEXT_SHA256.items():
        assert hashlib.sha256((RAW / name).read_bytes()).hexdigest() == digest, name


def first_lines(name: str, count: int) -> str:
    return "".join(line + "\n" for _, line in zip(range(count), iter_lines(str(RAW / name))))


def test_offline_datagen_reads_gzipped_or_plain_files_then_trains_and_decodes(tmp_path):
    # Files a user put in --tmp_dir (a few lines of each, so the test is quick): train gzipped, val and test not.
    tmp_dir = tmp_path / "tmp"
    tmp_dir.mkdir()
    for name in FILES:
        text = first_lines(name, 300 if name.startswith("train") else 40)
        if name.startswith("train"):
            (tmp_dir / f"{name}.gz").write_bytes(gzip.compress(text.encode("utf-8")))
        else:
            (tmp_dir / name).write_text(text, encoding="utf-8")
    data_dir = str(tmp_path / "data")
    problem = problems.get("translate_multi30k")(data_dir)
    config = problem.generate_data(str(tmp_dir), vocab_size=600, num_shards=1, log=lambda line: None)
    assert {split: counts["examples"] for split, counts in config["splits"].items()} == {
        "train": 300, "dev": 40, "test": 40}
    # The dev split is val, and it is English -> German: its first pair, tokenized and back.
    first = next(iter(problem.dataset("dev")))
    assert problem.decode(first["inputs"].numpy()) == first_lines("val.en", 1).strip()
    assert problem.decode(first["targets"].numpy()) == first_lines("val.de", 1).strip()
    run = str(tmp_path / "run")
    trained = t2t_lite.train(problem="translate_multi30k", hparams_set="transformer_tiny", output_dir=run, data_dir=data_dir,
                   hparams=MULTI30K_TINY, train_steps=1, eval_steps=1, save_checkpoints_steps=1, log_every_steps=1,
                   eval_bleu_sentences=0, mixed_precision="none", log=lambda _: None)
    assert trained.step == 1 and trained.spec.problem == "translate_multi30k"
    # Decoded: each output is what the trained checkpoint says for its own sentence, token by token (greedy,
    # from a full pass per token of the model restored here), in the run's own vocabulary, with its log-probability.
    sentences = ["A man rides a bike.", "Two dogs play in the snow.", "A girl in a red dress sings."]
    translator = Translator.from_run(run, beam_size=1, extra_length=3, mixed_precision="none")
    hypotheses = [hyps[0] for hyps in translator.hypotheses(sentences)]
    model = build_model(load_spec(RunDir(run)).hparams)
    tf.train.Checkpoint(model=model).restore(tf.train.latest_checkpoint(run)).expect_partial()
    for sentence, hypothesis in zip(sentences, hypotheses):
        ids, log_prob = greedy(model, problem.encode(sentence) + [EOS_ID], extra_length=3)
        assert hypothesis.ids == tuple(strip_ids(ids)) and hypothesis.text == problem.decode(ids)
        np.testing.assert_allclose(hypothesis.score, log_prob, rtol=1e-4, atol=1e-4)
    outputs = [hypothesis.text for hypothesis in hypotheses]
    assert translator.translate(sentences) == outputs
    # What a 1-step model says differs by sentence, and is not all empty: an empty or constant decode would show.
    assert any(outputs) and len(set(outputs)) > 1
    assert all(problem.decode(problem.encode(output)) == output for output in outputs)


def greedy(model, source_ids: list[int], extra_length: int) -> tuple[list[int], float]:
    """model's most likely next token, again and again, until EOS or len(source_ids) + extra_length tokens (the
    Decoder's limit, EOS counted), each from one teacher-forced full pass without a cache.

    Returns:
      The tokens before EOS (PAD too, if the model chose it), and the sum of every chosen token's
      log-probability, EOS's included: a greedy search's score.
    """
    ids, log_prob = [], 0.0
    while len(ids) < len(source_ids) + extra_length:
        logits = model({"inputs": np.array([source_ids], np.int32), "targets": np.array([ids + [PAD_ID]], np.int32)})
        log_probs = tf.nn.log_softmax(logits[0, -1]).numpy()  # [V]; logits [1, len(ids) + 1, V]
        token = int(np.argmax(log_probs))
        log_prob += float(log_probs[token])
        if token == EOS_ID:
            break
        ids.append(token)
    return ids, log_prob


def test_missing_files_offline_name_the_files_and_where_to_put_them(tmp_path, monkeypatch):
    monkeypatch.setattr(multi30k, "fetch", offline_fetch)
    problem = problems.get("translate_multi30k")(str(tmp_path / "data"))
    with pytest.raises(UserError) as error:
        problem.generate_data(str(tmp_path / "tmp"), log=lambda line: None)
    message = str(error.value)
    assert "\n" not in message and f"`tmp_dir`={tmp_path / 'tmp'}" in message
    assert "train.{en,de,fr}, val.{en,de,fr}, test_2016_flickr.{en,de,fr} (gzipped or not)" in message
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())
    with pytest.raises(UserError, match="needs `tmp_dir`"):
        problem.generate_data(None, log=lambda line: None)


@pytest.fixture
def release_server(tmp_path):
    """A local HTTP server with the release's .gz files (val and test; train is not needed here)."""
    served = tmp_path / "served"
    served.mkdir()
    for name in FILES[2:]:
        (served / f"{name}.gz").write_bytes(gzip.compress((RAW / name).read_bytes()))
    with serving(served) as url:
        yield served, url


def test_a_missing_file_is_downloaded_checked_and_kept(tmp_path, release_server, monkeypatch):
    _, url = release_server
    monkeypatch.setattr(multi30k, "RELEASE_URL", url)
    tmp_dir = tmp_path / "tmp"
    problem = problems.get("translate_multi30k")(str(tmp_path / "data"))
    source = problem.default_source("dev", str(tmp_dir))
    assert sorted(p.name for p in tmp_dir.iterdir()) == ["val.de.gz", "val.en.gz"]
    pairs = list(source())
    assert len(pairs) == 1014
    assert pairs[0] == (next(iter_lines(str(RAW / "val.en"))), next(iter_lines(str(RAW / "val.de"))))


def test_a_download_whose_text_is_not_the_releases_is_refused_and_not_kept(tmp_path, release_server, monkeypatch):
    served, url = release_server
    text = (RAW / "val.de").read_bytes().replace(b"Ein", b"Eine", 1)
    (served / "val.de.gz").write_bytes(gzip.compress(text))
    monkeypatch.setattr(multi30k, "RELEASE_URL", url)
    tmp_dir = tmp_path / "tmp"
    tmp_dir.mkdir()
    with pytest.raises(UserError, match=r"is not Multi30k's val.de: its text's SHA-256 is [0-9a-f]{64}, expected"):
        multi30k.download("val.de", str(tmp_dir))
    assert list(tmp_dir.iterdir()) == []
    with pytest.raises(UserError, match=r"cannot download .*/test_2017_flickr.en.gz \(HTTP Error 404"):
        multi30k.download("test_2017_flickr.en", str(tmp_dir))
    assert list(tmp_dir.iterdir()) == []
