"""The train split's order mixes the corpus's parts: any window of consecutive examples holds each in its share.

A WMT-like corpus is parts concatenated (Europarl 42%, CommonCrawl 53%, News
Commentary 5% of En-De). Training shuffles within a 10,000-example buffer, 0.2%
of 4.5M pairs; if the records hold the parts in file order, a buffer sees one
or two parts at a time. Here a 20,000-pair corpus of three labelled parts in
those shares goes through the real datagen, and every window of 2,000
consecutive examples in the order training reads them (problem.dataset("train"),
before its shuffle buffer) must hold each part close to its share.
"""
import random

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.problems.translate import TranslateFiles

PARTS = {"europarl": 8_400, "crawl": 10_600, "news": 1_000}  # 42%, 53%, 5%
WINDOW = 2_000
WORDS = [f"w{k}" for k in range(300)]


def _write_corpus(tmp_path) -> dict[str, str]:
    rng = random.Random(7)
    files = {}
    for split, scale in (("train", 1), ("dev", 0.01)):
        sources, targets = [], []
        for part, size in PARTS.items():
            for _ in range(int(size * scale)):
                words = " ".join(rng.choices(WORDS, k=rng.randint(2, 6)))
                sources.append(f"{part} {words}")
                targets.append(f"{part.upper()} {words}")
        for side, lines in (("src", sources), ("tgt", targets)):
            (tmp_path / f"{split}.{side}").write_text("\n".join(lines) + "\n")
        files[f"{split}_files"] = f"{tmp_path / f'{split}.src'},{tmp_path / f'{split}.tgt'}"
    return files


@pytest.fixture(scope="module")
def train_labels(tmp_path_factory) -> np.ndarray:
    """The part of each training example, in the order problem.dataset("train") yields them."""
    tmp = tmp_path_factory.mktemp("parts")
    files = _write_corpus(tmp)
    problem = TranslateFiles(str(tmp / "data"))
    problem.generate_data(None, log=lambda line: None, vocab_size=400, num_shards=10, max_length_ratio=0,
                          drop_copies=False, drop_duplicates=False, **files)  # every part kept, cleaning aside
    names = list(PARTS)
    labels = []
    for batch in problem.dataset("train").padded_batch(1_000).as_numpy_iterator():
        for text in problem.vocabulary.tf_decode(tf.constant(batch["inputs"])).numpy():
            labels.append(names.index(text.decode("utf-8").split(" ", 1)[0]))
    return np.array(labels)


def test_every_part_is_read_exactly_once(train_labels):
    assert np.bincount(train_labels, minlength=len(PARTS)).tolist() == list(PARTS.values())


def test_every_window_holds_each_part_near_its_share(train_labels):
    total = sum(PARTS.values())
    # counts[i, p]: examples of part p among the first i read.
    counts = np.vstack([np.zeros(len(PARTS), int), np.cumsum(np.eye(len(PARTS), dtype=int)[train_labels], axis=0)])
    in_window = counts[WINDOW:] - counts[:-WINDOW]  # [windows, parts]
    for p, (part, size) in enumerate(PARTS.items()):
        share = size / total
        expected = WINDOW * share
        # A window of a random order is hypergeometric; 5 standard deviations holds every
        # window of a random order, while one missing the 5% part is 10 away.
        sd = np.sqrt(WINDOW * share * (1 - share) * (total - WINDOW) / (total - 1))
        worst = int(np.argmax(np.abs(in_window[:, p] - expected)))
        assert abs(in_window[worst, p] - expected) <= 5 * sd, (
            f"{part}: {in_window[worst, p]} of the {WINDOW} examples from position {worst}, "
            f"expected {expected:.0f} ± {5 * sd:.0f}")
