"""wmt_ende and wmt_enfr through tensorflow-datasets, without a network.

Two halves of the path a user without --train_files takes: the real wmt14_translate
builder runs download_and_prepare until its first fetch (faked to fail as an
unreachable host does), and the problem reports that in one line; then, with
tfds.testing.mock_data serving known WMT lines as the builder's splits, datagen
writes (English, German/French) pairs in that direction into every split.
"""
import collections

import pytest
import requests
import tensorflow as tf
import tensorflow_datasets as tfds
from tensorflow_datasets.core.download import downloader

from t2t_lite.data.problem import PAD_ID
from t2t_lite.errors import UserError
from t2t_lite.problems.translate import WmtEnde, WmtEnfr
from shared_data import require_shared

QUIET = {"log": lambda line: None}
PROBLEMS = [(WmtEnde, "de"), (WmtEnfr, "fr")]
# Which newstest2013 lines stand in for each tensorflow-datasets split.
TFDS_LINES = {"train": range(0, 300), "validation": range(300, 360), "test": range(360, 400)}
OUR_SPLIT = {"train": "train", "validation": "dev", "test": "test"}


def _newstest2013(language: str) -> list[str]:
    with open(require_shared(f"newstest2013/newstest2013.{language}"), encoding="utf-8", newline="\n") as f:
        return [line.removesuffix("\n") for line in f]


@pytest.mark.parametrize("problem_class, language", PROBLEMS)
def test_unreachable_download_is_one_line_about_the_network(tmp_path, monkeypatch, problem_class, language):
    fetched = []

    def unreachable(url, **kwargs):
        fetched.append(url)
        raise requests.exceptions.ConnectionError(
            f"HTTPConnectionPool(host='www.statmt.org', port=80): Max retries exceeded with url: {url}\n"
            "(Caused by NameResolutionError: Failed to resolve 'www.statmt.org')")

    # The fetch under the download manager: everything above it (builder, checksums, download
    # manager, the builder's _split_generators) runs for real.
    monkeypatch.setattr(downloader, "_open_url", unreachable)
    data_dir = tmp_path / "data"
    with pytest.raises(UserError) as raised:
        problem_class(str(data_dir)).generate_data(str(tmp_path / "tfds"), **QUIET)
    message = str(raised.value)
    assert fetched and all(url.startswith(("http://", "https://", "ftp://")) for url in fetched)
    assert message.startswith(f"cannot reach the download servers of wmt14_translate/{language}-en (ConnectionError: ")
    assert message.endswith("; offline, pass `train_files`=SRC,TGT `dev_files`=SRC,TGT")
    assert "\n" not in message
    # The original error stays chained for T2T_LITE_DEBUG=1's traceback.
    assert isinstance(raised.value.__cause__, requests.exceptions.ConnectionError)
    assert not data_dir.exists()


def test_a_missing_module_is_named_not_called_offline(tmp_path, monkeypatch):
    def missing(self, *args, **kwargs):
        raise ModuleNotFoundError("No module named 'importlib_resources'", name="importlib_resources")

    monkeypatch.setattr(tfds.core.DatasetBuilder, "download_and_prepare", missing)
    with pytest.raises(UserError) as raised:
        WmtEnde(str(tmp_path / "data")).generate_data(str(tmp_path / "tfds"), **QUIET)
    message = str(raised.value)
    assert "a module it needs is missing (ModuleNotFoundError: No module named 'importlib_resources')" in message
    assert "pip install importlib_resources" in message
    assert "cannot reach" not in message and "offline" not in message


def test_any_other_failure_is_reported_as_itself(tmp_path, monkeypatch):
    def full_disk(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tfds.core.DatasetBuilder, "download_and_prepare", full_disk)
    with pytest.raises(UserError) as raised:
        WmtEnfr(str(tmp_path / "data")).generate_data(str(tmp_path / "tfds"), **QUIET)
    assert str(raised.value) == ("tensorflow-datasets failed to prepare wmt14_translate/fr-en: OSError: [Errno 28] "
                                 "No space left on device (T2T_LITE_DEBUG=1 shows the traceback)")


def _decoded(problem, split: str) -> list[tuple[str, str]]:
    pairs = []
    for batch in problem.dataset(split).padded_batch(512):
        assert (batch["inputs"].numpy() != PAD_ID).any()
        texts = [problem.vocabulary.tf_decode(batch[name]).numpy() for name in ("inputs", "targets")]
        pairs.extend((a.decode("utf-8"), b.decode("utf-8")) for a, b in zip(*texts))
    return pairs


@pytest.mark.parametrize("problem_class, language", PROBLEMS)
def test_tfds_examples_become_english_to_foreign_pairs_in_every_split(tmp_path, problem_class, language):
    english, foreign = _newstest2013("en"), _newstest2013(language)
    served = []

    def as_dataset(self, split, **kwargs):
        split = str(split)
        served.append((self.name, self.builder_config.name, split))
        lines = TFDS_LINES[split]
        # tensorflow-datasets' Translation feature: one string per language, keyed by its code.
        return tf.data.Dataset.from_tensor_slices({"en": [english[i] for i in lines],
                                                   language: [foreign[i] for i in lines]})

    with tfds.testing.mock_data(as_dataset_fn=as_dataset):
        problem = problem_class(str(tmp_path / "data"))
        # Cleaning off: every mock line must come through (tests/test_corpus_cleaning.py tests the rules).
        config = problem.generate_data(str(tmp_path / "tfds"), vocab_size=800, num_shards=2, max_length_ratio=0,
                                       drop_copies=False, drop_duplicates=False, **QUIET)
    assert {(name, pair) for name, pair, _ in served} == {("wmt14_translate", f"{language}-en")}
    assert {split for _, _, split in served} == set(TFDS_LINES)
    for tfds_split, lines in TFDS_LINES.items():
        split = OUR_SPLIT[tfds_split]
        expected = [(english[i], foreign[i]) for i in lines if english[i].strip() and foreign[i].strip()]
        assert config["splits"][split]["examples"] == len(expected)
        assert collections.Counter(_decoded(problem, split)) == collections.Counter(expected)
