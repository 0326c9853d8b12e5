"""Translation problems on real data: Multi30k, the WMT En-De sample, Europarl Fr-En."""
import collections
import gzip
import json
import os
import shutil

import numpy as np
import pytest

import t2t_lite.problems  # noqa: F401  (registers the problems)
from t2t_lite.data.problem import EOS_ID, PAD_ID
from t2t_lite.data.datagen_options import DatagenOptions
from t2t_lite.data.text_problem import CONFIG_FILE, LENGTHS
from t2t_lite.errors import UserError
from t2t_lite.files import iter_lines
from t2t_lite.problems.translate import (
    TranslateFiles,
    WmtEnde,
    WmtEnfr,
    read_parallel_files,
    tfds_wmt14_pairs,
)
from t2t_lite.registry import problems
from shared_data import require_shared

QUIET = {"log": lambda line: None}


def _files(*relpaths: str) -> str:
    return ",".join(str(require_shared(p)) for p in relpaths)


def _head(directory, count: int, *relpaths: str) -> str:
    """The first `count` lines of each shared file, written into directory: a corpus that encodes in seconds."""
    paths = []
    for relpath in relpaths:
        with open(require_shared(relpath), encoding="utf-8", newline="\n") as f:
            lines = [f.readline() for _ in range(count)]
        paths.append(directory / os.path.basename(relpath))
        paths[-1].write_text("".join(lines), encoding="utf-8", newline="\n")
    return ",".join(map(str, paths))


def _raw_pairs(files: str) -> list[tuple[str, str]]:
    """The files' line pairs, read independently of the code under test."""
    src, tgt = files.split(",")
    with open(src, encoding="utf-8", newline="\n") as a, open(tgt, encoding="utf-8", newline="\n") as b:
        return [(x.removesuffix("\n"), y.removesuffix("\n")) for x, y in zip(a, b)]


def _decoded_pairs(problem, split: str) -> list[tuple[str, str]]:
    """Every example of a split, decoded, checking each sequence ends with its only EOS."""
    pairs = []
    for batch in problem.dataset(split).padded_batch(1024):
        for name in ("inputs", "targets"):
            ids = batch[name].numpy()
            lengths = (ids != PAD_ID).sum(axis=1)
            assert (ids[range(len(ids)), lengths - 1] == EOS_ID).all()
            assert ((ids == EOS_ID).sum(axis=1) == 1).all()
        texts = [problem.vocabulary.tf_decode(batch[name]).numpy() for name in ("inputs", "targets")]
        pairs.extend((a.decode("utf-8"), b.decode("utf-8")) for a, b in zip(*texts))
    return pairs


@pytest.fixture(scope="module")
def multi30k(tmp_path_factory):
    # 3,000 of the 29,000 training pairs: byte fallback keeps the round trip exact with a vocabulary of fewer pairs.
    files = {"train_files": _head(tmp_path_factory.mktemp("multi30k_raw"), 3000,
                                  "multi30k/raw/train.en", "multi30k/raw/train.de"),
             "dev_files": _files("multi30k/raw/val.en", "multi30k/raw/val.de")}
    data_dir = str(tmp_path_factory.mktemp("multi30k"))
    config = TranslateFiles(data_dir).generate_data(None, vocab_size=1000, num_shards=3, **files, **QUIET)
    return data_dir, files, config


def test_translate_files_round_trips_multi30k(multi30k):
    data_dir, files, config = multi30k
    problem = TranslateFiles(data_dir)
    for split in ("train", "dev"):
        expected = _raw_pairs(files[f"{split}_files"])
        assert config["splits"][split]["examples"] == len(expected)
        assert collections.Counter(_decoded_pairs(problem, split)) == collections.Counter(expected)
    assert len(expected) == 1014


def test_trainer_needs_only_the_data_dir(multi30k):
    data_dir, files, _ = multi30k
    problem = problems.get("translate_files")(data_dir)
    assert problem.splits == ("train", "dev")
    assert problem.vocab_size == 1000
    assert problem.decode(problem.encode("Zwei Hunde spielen.") + [EOS_ID, 7, PAD_ID]) == "Zwei Hunde spielen."
    assert problem.config["options"]["train_files"] == files["train_files"]


def _record_lengths(problem, split: str) -> list[int]:
    """max(len(inputs), len(targets)) of every record of a split, EOS included, read back from the shards."""
    lengths = []
    for batch in problem.dataset(split).padded_batch(1024).as_numpy_iterator():
        lengths.extend(np.maximum((batch["inputs"] != PAD_ID).sum(axis=1), (batch["targets"] != PAD_ID).sum(axis=1)))
    return lengths


def test_recorded_count_longer_than_matches_independent_counts(multi30k, tmp_path):
    import sentencepiece as spm

    data_dir, files, config = multi30k
    problem = TranslateFiles(data_dir)
    processor = spm.SentencePieceProcessor(model_proto=problem.vocabulary.model)
    pairs = _raw_pairs(files["dev_files"])
    from_text = [max(len(processor.encode(a)), len(processor.encode(b))) + 1 for a, b in pairs]  # + EOS
    assert 0 < sum(n > 24 for n in from_text) < len(pairs)
    # An earlier t2t-lite's data_dir: the same config without the histograms, counted by reading the records.
    old = tmp_path / "old"
    shutil.copytree(data_dir, old)
    old_config = json.loads((old / CONFIG_FILE).read_text())
    for split in ("train", "dev"):
        assert split in config["splits"] and LENGTHS in config["splits"][split]
        del old_config["splits"][split][LENGTHS]
    (old / CONFIG_FILE).write_text(json.dumps(old_config))
    for split in ("train", "dev"):
        from_records = _record_lengths(problem, split)
        counts = config["splits"][split]
        assert sum(counts[LENGTHS].values()) == len(from_records) == counts["examples"]
        if split == "dev":
            assert sorted(from_records) == sorted(from_text)
        for max_length in (16, 24, 256):
            expected = sum(n > max_length for n in from_records)
            assert problem.count_longer_than(split, max_length) == expected, (split, max_length)
            if split == "dev":  # reading the records is the slow path this replaces; dev is enough to check it
                assert TranslateFiles(str(old)).count_longer_than(split, max_length) == expected, max_length


def test_rerun_with_same_options_does_nothing(multi30k):
    data_dir, files, config = multi30k
    stamps = {f: os.stat(os.path.join(data_dir, f)).st_mtime_ns for f in os.listdir(data_dir)}
    again = TranslateFiles(data_dir).generate_data(None, vocab_size=1000, num_shards=3, **files, **QUIET)
    assert again == config
    assert {f: os.stat(os.path.join(data_dir, f)).st_mtime_ns for f in os.listdir(data_dir)} == stamps


def test_rerun_with_other_options_is_refused(multi30k):
    data_dir, files, _ = multi30k
    with pytest.raises(UserError, match=r"vocab_size=1000 \(now 2000\)"):
        TranslateFiles(data_dir).generate_data(None, vocab_size=2000, num_shards=3, **files, **QUIET)


def test_missing_shard_is_reported_then_regenerated_identically(multi30k, tmp_path):
    data_dir, files, _ = multi30k
    copy = str(tmp_path / "copy")
    shutil.copytree(data_dir, copy)
    shard = os.path.join(copy, "train-00001-of-00003.tfrecord")
    os.remove(shard)
    with pytest.raises(UserError, match="1 of the 3 train shards .* missing; rerun t2t-lite-datagen"):
        TranslateFiles(copy).dataset("train")
    TranslateFiles(copy).generate_data(None, vocab_size=1000, num_shards=3, **files, **QUIET)
    with open(shard, "rb") as a, open(os.path.join(data_dir, os.path.basename(shard)), "rb") as b:
        assert a.read() == b.read()


def test_data_dir_without_config_says_run_datagen(tmp_path):
    with pytest.raises(UserError, match="run t2t-lite-datagen `problem`=translate_files `data_dir`="):
        TranslateFiles(str(tmp_path)).dataset("train")


def test_data_dir_of_another_problem_is_refused(multi30k):
    with pytest.raises(UserError, match="holds problem 'translate_files', not 'wmt_ende'"):
        _ = WmtEnde(multi30k[0]).vocab_size


def test_replaced_vocabulary_is_refused(multi30k, wmt_ende, tmp_path):
    copy = str(tmp_path / "copy")
    shutil.copytree(multi30k[0], copy)
    shutil.copy(os.path.join(wmt_ende[0], "vocab.model"), os.path.join(copy, "vocab.model"))
    with pytest.raises(UserError, match="is not the vocabulary the data .* was written with"):
        TranslateFiles(copy).encode("Hund")


@pytest.fixture(scope="module")
def wmt_ende(tmp_path_factory):
    # newstest2012 stands in for the newstest2014 path a user supplies.
    # 3,000 of the sample's 10,000 training pairs, 300 of newstest2012's 3,003.
    raw = tmp_path_factory.mktemp("wmt_ende_raw")
    files = {"train_files": _head(raw, 3000, "wmt_ende_train_sample10k/src-train.txt",
                                  "wmt_ende_train_sample10k/tgt-train.txt"),
             "dev_files": _files("newstest2013/newstest2013.en", "newstest2013/newstest2013.de"),
             "test_files": _head(raw, 300, "newstest2012/newstest2012.en", "newstest2012/newstest2012.de")}
    data_dir = str(tmp_path_factory.mktemp("wmt_ende"))
    config = WmtEnde(data_dir).generate_data(None, vocab_size=2000, num_shards=2, **files, **QUIET)
    return data_dir, files, config


def test_wmt_ende_on_local_files(wmt_ende):
    data_dir, files, config = wmt_ende
    problem = WmtEnde(data_dir)
    assert problem.splits == ("train", "dev", "test")
    assert config["vocab"]["model_type"] == "bpe" and problem.vocab_size == 2000
    # Train is cleaned by default (tests/test_corpus_cleaning.py): what it keeps of its 3000 pairs.
    cleaning = config["splits"]["train"]["cleaning"]
    assert cleaning["read"] == 3000 and cleaning["kept"] == 3000 - sum(cleaning["dropped"].values())
    assert {s: c["examples"] for s, c in config["splits"].items()} == {"train": cleaning["kept"], "dev": 3000,
                                                                        "test": 300}
    # newstest2013 German carries non-breaking spaces: they survive too.
    dev = _decoded_pairs(problem, "dev")
    assert sum("\u00a0" in tgt for _, tgt in dev) == 11
    assert collections.Counter(dev) == collections.Counter(_raw_pairs(files["dev_files"]))


def test_wmt_enfr_skips_and_counts_pairs_with_an_empty_side(tmp_path):
    # The first 4,000 of the sample's 20,000 pairs, 13 of them with an empty side.
    raw_dir = tmp_path / "raw"
    raw_dir.mkdir()
    files = {"train_files": _head(raw_dir, 4000, "europarl_fr_en_sample20k/europarl-v7.fr-en.sample20k.en",
                                  "europarl_fr_en_sample20k/europarl-v7.fr-en.sample20k.fr"),
             "dev_files": _head(raw_dir, 500, "newstest2013/newstest2013.en", "newstest2013/newstest2013.fr")}
    problem = WmtEnfr(str(tmp_path / "data"))
    no_cleaning = {"max_length_ratio": 0, "drop_copies": False, "drop_duplicates": False}
    config = problem.generate_data(None, vocab_size=1000, num_shards=2, max_vocab_sentences=1500, **files,
                                   **no_cleaning, **QUIET)
    raw = _raw_pairs(files["train_files"])
    usable = [(a, b) for a, b in raw if a.strip() and b.strip()]
    assert len(raw) - len(usable) == 13
    assert sum(config["splits"]["train"].pop(LENGTHS).values()) == len(usable)
    assert config["splits"]["train"].pop("cleaning")["dropped"] == {"length_ratio": 0, "copies": 0, "duplicates": 0}
    assert config["splits"]["train"] == {"examples": len(usable), "skipped_empty": 13, "num_shards": 2}
    assert config["vocab"]["model_type"] == "unigram"
    assert collections.Counter(_decoded_pairs(problem, "train")) == collections.Counter(usable)


def test_wmt_without_local_files_reads_tensorflow_datasets(tmp_path):
    problem = WmtEnde(str(tmp_path))
    for split, tfds_split in (("train", "train"), ("dev", "validation"), ("test", "test")):
        source = problem.pair_source(split, DatagenOptions(), "/tfds")
        assert (source.func, source.args) == (tfds_wmt14_pairs, ("de", tfds_split, "/tfds"))
    assert WmtEnfr(str(tmp_path)).pair_source("dev", DatagenOptions(), None).args == ("fr", "validation", None)


def test_local_train_files_need_dev_files_and_make_test_optional(tmp_path):
    local = DatagenOptions(train_files="a.en,a.de")
    assert WmtEnde(str(tmp_path)).pair_source("test", local, None) is None
    with pytest.raises(UserError, match="wmt_ende with `train_files` also needs `dev_files`=SRC,TGT"):
        WmtEnde(str(tmp_path)).pair_source("dev", local, None)
    with pytest.raises(UserError, match="translate_files needs `train_files`=SRC,TGT"):
        TranslateFiles(str(tmp_path)).generate_data(None, **QUIET)


def test_bad_options_are_user_errors(tmp_path):
    problem = TranslateFiles(str(tmp_path / "data"))
    with pytest.raises(UserError, match="two comma-separated files"):
        problem.generate_data(None, train_files="only_one.txt", dev_files="a,b", **QUIET)
    with pytest.raises(UserError, match="unknown datagen options \\['vocab'\\]"):
        problem.generate_data(None, vocab=10, **QUIET)
    with pytest.raises(UserError, match="`num_shards` must be at least 1"):
        problem.generate_data(None, train_files="a,b", dev_files="a,b", num_shards=0, **QUIET)
    assert not os.path.exists(tmp_path / "data")


def test_iter_lines_handles_gzip_crlf_and_byte_order_mark(tmp_path):
    lines = _raw_pairs(_files("multi30k/raw/val.de", "multi30k/raw/val.en"))[:50]
    text = "".join(de + "\n" for de, _ in lines).encode("utf-8")
    with gzip.open(tmp_path / "val.de.gz", "wb") as f:
        f.write(text)
    assert list(iter_lines(str(tmp_path / "val.de.gz"))) == [de for de, _ in lines]
    (tmp_path / "dos.txt").write_bytes(b"\xef\xbb\xbfeins\r\nzwei\r\n\r\ndrei")
    assert list(iter_lines(str(tmp_path / "dos.txt"))) == ["eins", "zwei", "", "drei"]


def test_read_errors_name_the_file_and_line(tmp_path):
    (tmp_path / "bad.txt").write_bytes(b"ok\nfine\nbroken \xff here\n")
    with pytest.raises(UserError, match=r"bad.txt: line 3 is not valid UTF-8 \(bytes b'\\xff' at byte 8"):
        list(iter_lines(str(tmp_path / "bad.txt")))
    with pytest.raises(UserError, match="cannot read .*missing.txt: No such file"):
        list(iter_lines(str(tmp_path / "missing.txt")))
    (tmp_path / "cut.gz").write_bytes(gzip.compress(b"a\n" * 1000)[:30])
    with pytest.raises(UserError, match="cannot read .*cut.gz"):
        list(iter_lines(str(tmp_path / "cut.gz")))


def test_parallel_files_of_different_lengths_name_both_counts(tmp_path):
    (tmp_path / "a.en").write_text("1\n2\n3\n4\n5\n")
    (tmp_path / "a.de").write_text("1\n2\n3\n")
    with pytest.raises(UserError, match=r"a.en has 5 lines, .*a.de has 3"):
        list(read_parallel_files(str(tmp_path / "a.en"), str(tmp_path / "a.de")))
    with pytest.raises(UserError, match=r"a.de has 3 lines, .*a.en has 5"):
        list(read_parallel_files(str(tmp_path / "a.de"), str(tmp_path / "a.en")))


def test_registered_names_match():
    for name in ("translate_files", "wmt_ende", "wmt_enfr"):
        assert problems.get(name).name == name
