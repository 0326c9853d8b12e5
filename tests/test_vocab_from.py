"""New data with an old vocabulary (datagen's `vocab_from`), and runs that record their vocabulary's sha256, so
that fine-tuning on new text keeps the ids the model learned, and another vocabulary is refused."""
import hashlib
import json
import shutil
from pathlib import Path

import pytest

import t2t_lite
import t2t_lite.problems  # noqa: F401  (registers the problems)
from t2t_lite.errors import UserError
from t2t_lite.registry import problems

from cli_helpers import run_tool
from trained_runs import MULTI30K_TINY, MULTI30K_VOCAB_SIZE, multi30k_lines


def in_domain_text(root, first=2000, count=300):
    """Multi30k pairs the shared run never saw, as train and dev files: the 'new domain' to fine-tune on."""
    raw = root / "raw"
    raw.mkdir(parents=True)
    for split, (start, size) in (("train", (first, count)), ("val", (first + count, 40))):
        for language in ("en", "de"):
            lines = multi30k_lines("train", language, start + size).splitlines(keepends=True)[start:]
            (raw / f"{split}.{language}").write_text("".join(lines), encoding="utf-8")
    return {"train_files": f"{raw}/train.en,{raw}/train.de", "dev_files": f"{raw}/val.en,{raw}/val.de"}


def prepared(data_dir, **options):
    problem = problems.get("translate_files")(str(data_dir))
    problem.generate_data(None, num_shards=1, log=lambda line: None, **options)
    return problem


def vocab_bytes(data_dir) -> bytes:
    return (data_dir / "vocab.model").read_bytes()


def fake_saved_model(root, run_dir):
    """A directory laid out as t2t-lite-exporter writes a SavedModel version (export_format.py): the vocabulary
    and hparams.json with an "export" entry in assets/, beside saved_model.pb."""
    spec = json.loads((Path(run_dir) / "hparams.json").read_text())
    assets = root / "export" / "1" / "assets"
    assets.mkdir(parents=True)
    (root / "export" / "1" / "saved_model.pb").write_bytes(b"")
    (assets / "hparams.json").write_text(json.dumps({**spec, "export": {}}))
    shutil.copy(Path(spec["data_dir"]) / "vocab.model", assets / "vocab.model")
    return root / "export" / "1"


def test_new_data_takes_the_vocabulary_of_a_data_dir_a_run_or_an_export_byte_for_byte(multi30k_run, tmp_path):
    source_data = Path(multi30k_run["data_dir"])
    files = in_domain_text(tmp_path)
    sources = {"data_dir": source_data, "run": multi30k_run["output_dir"],
               "export": fake_saved_model(tmp_path, multi30k_run["output_dir"])}
    for name, source in sources.items():
        problem = prepared(tmp_path / name, vocab_from=str(source), **files)
        assert vocab_bytes(tmp_path / name) == vocab_bytes(source_data), name
        assert problem.config["vocab"]["sha256"] == hashlib.sha256(vocab_bytes(source_data)).hexdigest()
        assert problem.config["options"]["vocab_from"] == str(Path(source).resolve())
        assert problem.vocab_size == MULTI30K_VOCAB_SIZE
    # The new shards are the new text in the old ids: each source line as the source's own problem encodes it.
    old, new = problems.get("translate_files")(str(source_data)), problems.get("translate_files")(str(tmp_path / "run"))
    written = sorted(tuple(example["inputs"].numpy()) for example in new.dataset("train"))
    lines = (tmp_path / "raw" / "train.en").read_text(encoding="utf-8").splitlines()
    assert written == sorted(tuple([*old.encode(line), 1]) for line in lines)


def test_vocab_from_with_vocab_size_or_another_vocab_from_on_rerun_is_refused_in_one_line(multi30k_run, tmp_path):
    files = in_domain_text(tmp_path)
    with pytest.raises(UserError, match=r"^`vocab_from` gives the vocabulary and its size; drop `vocab_size`$"):
        prepared(tmp_path / "data", vocab_from=multi30k_run["data_dir"], vocab_size=600, **files)
    assert not (tmp_path / "data").exists()
    prepared(tmp_path / "data", vocab_from=multi30k_run["data_dir"], **files)
    prepared(tmp_path / "data", vocab_from=multi30k_run["output_dir"] + "/../data", **files)  # the same, rerun
    with pytest.raises(UserError, match="was generated with other options: vocab_from="):
        prepared(tmp_path / "data", vocab_from=multi30k_run["output_dir"], **files)
    with pytest.raises(UserError, match=r"is neither prepared data \(problem_config.json\), a run directory"):
        prepared(tmp_path / "other", vocab_from=str(tmp_path / "raw"), **files)


def test_the_datagen_command_refuses_vocab_from_beside_vocab_size(multi30k_run, tmp_path):
    files = in_domain_text(tmp_path)
    result = run_tool("datagen", "--problem=translate_files", f"--data_dir={tmp_path / 'data'}",
                      f"--train_files={files['train_files']}", f"--dev_files={files['dev_files']}",
                      f"--vocab_from={multi30k_run['output_dir']}", "--vocab_size=600")
    assert result.returncode == 2
    assert result.error == "--vocab_from gives the vocabulary and its size; drop --vocab_size"
    assert not (tmp_path / "data").exists()


def fine_tune(data_dir, output_dir, source):
    return t2t_lite.train(problem="translate_files", hparams_set="transformer_tiny", output_dir=str(output_dir),
                          data_dir=str(data_dir), hparams=MULTI30K_TINY, train_steps=1, eval_steps=1,
                          save_checkpoints_steps=1, eval_bleu_sentences=0, mixed_precision="none",
                          memory_probe=False, warm_start_from=str(source), log=lambda _: None)


def test_a_run_records_its_vocabulary_so_a_moved_source_is_still_checked(multi30k_run, tmp_path):
    files = in_domain_text(tmp_path)
    recorded = json.loads((Path(multi30k_run["output_dir"]) / "hparams.json").read_text())["vocabulary_sha256"]
    assert recorded == hashlib.sha256(vocab_bytes(Path(multi30k_run["data_dir"]))).hexdigest()
    # The source run, its data_dir moved away: only what it recorded can tell its vocabulary.
    moved = tmp_path / "source"
    shutil.copytree(multi30k_run["output_dir"], moved)
    spec = json.loads((moved / "hparams.json").read_text())
    spec["data_dir"] = str(tmp_path / "gone")
    (moved / "hparams.json").write_text(json.dumps(spec))
    same = prepared(tmp_path / "same", vocab_from=multi30k_run["data_dir"], **files)
    tuned = fine_tune(tmp_path / "same", tmp_path / "tuned", moved)
    assert tuned.spec.vocabulary_sha256 == recorded == same.vocabulary_fingerprint()
    other = prepared(tmp_path / "other", vocab_size=MULTI30K_VOCAB_SIZE, **files)  # its own vocabulary, same size
    assert other.vocab_size == MULTI30K_VOCAB_SIZE and other.vocabulary_fingerprint() != recorded
    with pytest.raises(UserError, match=r"^cannot warm start from .*: its vocabulary is not this run's \(in .*other\)"):
        fine_tune(tmp_path / "other", tmp_path / "refused", moved)
    assert not list((tmp_path / "refused").glob("ckpt-*"))


def users_sentencepiece(path, lines, **settings):
    """A SentencePiece model trained as a user would with spm's defaults: UNK 0, BOS 1, EOS 2, no PAD."""
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, minloglevel=2,
                                   **{"vocab_size": 300, **settings})
    path.write_bytes(model.getvalue())
    return spm.SentencePieceProcessor(model_file=str(path))


def test_a_users_sentencepiece_model_is_rewritten_with_pad_0_and_eos_1_and_is_the_vocabulary(tmp_path):
    import sentencepiece as spm

    files = in_domain_text(tmp_path)
    lines = (tmp_path / "raw" / "train.en").read_text(encoding="utf-8").splitlines()
    # spm's default ids, with byte fallback and no normalisation: a model that round-trips.
    original = users_sentencepiece(tmp_path / "user.model", lines, byte_fallback=True,
                                   normalization_rule_name="identity", vocab_size=600)
    assert (original.unk_id(), original.bos_id(), original.eos_id(), original.pad_id()) == (0, 1, 2, -1)
    said = []
    problem = problems.get("translate_files")(str(tmp_path / "data"))
    problem.generate_data(None, num_shards=1, vocab_file=str(tmp_path / "user.model"), log=said.append, **files)
    adopted = spm.SentencePieceProcessor(model_proto=vocab_bytes(tmp_path / "data"))
    assert (adopted.pad_id(), adopted.eos_id()) == (0, 1) and adopted.id_to_piece(1) == "</s>"
    assert adopted.vocab_size() == original.vocab_size() + 1 == problem.vocab_size  # PAD added
    assert problem.config["vocab"]["sha256"] == hashlib.sha256(vocab_bytes(tmp_path / "data")).hexdigest()
    assert problem.config["vocab"]["model_type"] == "unigram"  # spm's default, not translate_files' bpe
    for line in lines[:50]:  # the graph's tokenizer gives the same pieces, under other ids; the text comes back
        assert [adopted.id_to_piece(i) for i in problem.encode(line)] == original.encode(line, out_type=str)
        assert problem.decode([*problem.encode(line), 1]) == line
    assert any("ids do not apply" in line for line in said)
    assert [line for line in said if line.startswith("warning: ")] == [
        "warning: the vocabulary removes extra whitespace: runs of spaces come back as one"]


def test_a_model_that_does_not_round_trip_is_adopted_with_a_line_naming_why(tmp_path):
    files = in_domain_text(tmp_path)
    lines = (tmp_path / "raw" / "train.en").read_text(encoding="utf-8").splitlines()
    users_sentencepiece(tmp_path / "user.model", lines)  # spm's defaults: NFKC, no byte fallback
    said = []
    problems.get("translate_files")(str(tmp_path / "data")).generate_data(
        None, num_shards=1, vocab_file=str(tmp_path / "user.model"), log=said.append, **files)
    warnings = [line for line in said if line.startswith("warning: ")]
    assert any("normalises text (nmt_nfkc)" in line for line in warnings)
    assert any("no byte fallback" in line for line in warnings)
    # tf-text gives <unk> for a character Python's sentencepiece keeps, in some sentence: counted and shown.
    assert any(line.startswith("warning: of ") and "otherwise by the graph's tokenizer" in line for line in warnings)


def test_vocab_file_is_refused_beside_vocab_size_or_vocab_from_or_when_not_a_model(multi30k_run, tmp_path):
    files = in_domain_text(tmp_path)
    (tmp_path / "junk.model").write_bytes(b"not a model")
    with pytest.raises(UserError, match=r"^`vocab_file` gives the vocabulary and its size; drop `vocab_size`$"):
        prepared(tmp_path / "a", vocab_file=str(tmp_path / "junk.model"), vocab_size=300, **files)
    with pytest.raises(UserError, match=r"^`vocab_from` and `vocab_file` each give the vocabulary; pass one of them$"):
        prepared(tmp_path / "b", vocab_file=str(tmp_path / "junk.model"), vocab_from=multi30k_run["data_dir"], **files)
    with pytest.raises(UserError, match=r"junk.model is not a SentencePiece model"):
        prepared(tmp_path / "c", vocab_file=str(tmp_path / "junk.model"), **files)
    assert not any((tmp_path / name).exists() for name in "abc")
