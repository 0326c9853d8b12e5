"""Pairs, a stand-in tokenizer and independent expectations shared by the shard tests."""
import collections

import tensorflow as tf

from t2t_lite.data.shards import read_records

NUM_EXAMPLES, NUM_SHARDS = 1003, 4


def pairs() -> list[tuple[str, str]]:
    # Varied lengths, non-ASCII, and a pair that repeats (a multiset, not a set, must survive).
    result = [(f"source {i} " + "ä" * (i % 7), f"Ziel {i} " + "€" * (i % 5)) for i in range(NUM_EXAMPLES - 1)]
    return result + [result[0]]


def codepoints(texts: tf.Tensor) -> tf.RaggedTensor:
    """A stand-in tokenizer whose output Python can recompute independently: Unicode code points."""
    return tf.strings.unicode_decode(texts, "UTF-8")


def expected(some_pairs) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The ids `codepoints` gives each pair, computed in Python."""
    return [(tuple(map(ord, src)), tuple(map(ord, tgt))) for src, tgt in some_pairs]


def histogram(some_pairs) -> dict[str, int]:
    """The length histogram of codepoints-encoded pairs, counted independently of the writers."""
    counts = collections.Counter(max(len(src), len(tgt)) for src, tgt in some_pairs)
    return {str(length): counts[length] for length in sorted(counts)}


def read(files) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The (inputs, targets) ids of the shards, as read_records gives them."""
    return [(tuple(ex["inputs"].tolist()), tuple(ex["targets"].tolist()))
            for ex in read_records(files).as_numpy_iterator()]
