"""Sharded TFRecords: written ids read back exactly; reruns skip; interrupted runs complete once."""
import collections
import itertools
import os

import pytest
import tensorflow as tf

from t2t_lite.data import records
from t2t_lite.errors import UserError

NUM_EXAMPLES, NUM_SHARDS = 1003, 4


def _pairs() -> list[tuple[str, str]]:
    # Varied lengths, non-ASCII, and a pair that repeats (a multiset, not a set, must survive).
    pairs = [(f"source {i} " + "ä" * (i % 7), f"Ziel {i} " + "€" * (i % 5)) for i in range(NUM_EXAMPLES - 1)]
    return pairs + [pairs[0]]


def _codepoints(texts: tf.Tensor) -> tf.RaggedTensor:
    """A stand-in tokenizer whose output Python can recompute independently: Unicode code points."""
    return tf.strings.unicode_decode(texts, "UTF-8")


def _expected(pairs) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    return [(tuple(map(ord, src)), tuple(map(ord, tgt))) for src, tgt in pairs]


def _read(files) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    return [(tuple(ex["inputs"].tolist()), tuple(ex["targets"].tolist()))
            for ex in records.read_records(files).as_numpy_iterator()]


def _write(prefix: str, pairs=None, num_examples: int = NUM_EXAMPLES) -> int:
    source = pairs if pairs is not None else _pairs()
    return records.write_shards(lambda: iter(source), _codepoints, prefix, num_examples, NUM_SHARDS,
                                log=lambda line: None)


@pytest.fixture
def prefix(tmp_path) -> str:
    return str(tmp_path / "train")


def test_read_back_equals_source_ids(prefix):
    assert _write(prefix) == NUM_SHARDS
    paths = records.shard_paths(prefix, NUM_SHARDS)
    assert sorted(os.listdir(os.path.dirname(prefix))) == sorted(map(os.path.basename, paths))
    # Each shard alone holds the next contiguous run of the source, in order.
    in_order = [example for path in paths for example in _read([path])]
    assert in_order == _expected(_pairs())
    # Read together (interleaved), every example comes back exactly once.
    assert collections.Counter(_read(prefix + "-*")) == collections.Counter(_expected(_pairs()))


def test_read_back_is_int32(prefix):
    _write(prefix)
    spec = records.read_records(prefix + "-*").element_spec
    assert spec["inputs"].dtype == tf.int32 and spec["targets"].dtype == tf.int32


def test_rerun_skips_finished_shards_without_reading(prefix):
    _write(prefix)
    stamps = {p: os.stat(p).st_mtime_ns for p in records.shard_paths(prefix, NUM_SHARDS)}

    def must_not_be_read():
        raise AssertionError("a complete split was read again")

    assert records.write_shards(must_not_be_read, _codepoints, prefix, NUM_EXAMPLES, NUM_SHARDS) == 0
    assert {p: os.stat(p).st_mtime_ns for p in stamps} == stamps


def test_interrupted_run_completes_without_duplicates(prefix):
    _write(prefix)
    paths = records.shard_paths(prefix, NUM_SHARDS)
    kept = os.stat(paths[0]).st_mtime_ns
    # What a killed run leaves: one shard half-written (stale .incomplete), one never started.
    os.replace(paths[1], paths[1] + records.INCOMPLETE)
    with open(paths[1] + records.INCOMPLETE, "r+b") as f:
        f.truncate(100)
    os.remove(paths[3])
    # The pattern matches the stale file too, but it is never read as data: shards 0 and 2 hold 250 + 251.
    assert len(_read(prefix + "-*")) == 501

    assert _write(prefix) == 2
    assert os.stat(paths[0]).st_mtime_ns == kept
    assert not [f for f in os.listdir(os.path.dirname(prefix)) if f.endswith(records.INCOMPLETE)]
    assert collections.Counter(_read(prefix + "-*")) == collections.Counter(_expected(_pairs()))


def test_short_source_fails_cleanly_and_rerun_completes(prefix):
    truncated = _pairs()[:700]  # the text ends inside shard 2 (shards of 250, 251, 251, 251)
    with pytest.raises(UserError, match="ended after"):
        _write(prefix, truncated)
    names = sorted(os.listdir(os.path.dirname(prefix)))
    assert names == sorted(map(os.path.basename, records.shard_paths(prefix, NUM_SHARDS)[:2]))
    _write(prefix)
    assert collections.Counter(_read(prefix + "-*")) == collections.Counter(_expected(_pairs()))


def test_long_source_is_an_error(prefix):
    with pytest.raises(UserError, match="more than the 1000 pairs"):
        _write(prefix, num_examples=1000)


def test_more_shards_than_examples_writes_empty_shards(prefix):
    pairs = _pairs()[:2]
    records.write_shards(lambda: iter(pairs), _codepoints, prefix, 2, NUM_SHARDS, log=lambda line: None)
    assert all(os.path.exists(p) for p in records.shard_paths(prefix, NUM_SHARDS))
    assert collections.Counter(_read(prefix + "-*")) == collections.Counter(_expected(pairs))


def test_serialized_examples_are_byte_stable():
    record = records.serialize_example([5, 6], [7, 1])
    features = tf.train.Example.FromString(record).features.feature
    assert list(features["inputs"].int64_list.value) == [5, 6]
    assert list(features["targets"].int64_list.value) == [7, 1]
    # Sorted keys whatever this process's hash seed, so a rerun reproduces a shard byte for byte.
    assert record.index(b"inputs") < record.index(b"targets")


def test_shard_bounds_cover_every_example_once():
    for n, k in [(0, 3), (1, 3), (10, 3), (1003, 4), (29000, 7)]:
        bounds = records.shard_bounds(n, k)
        assert len(bounds) == k and bounds[0][0] == 0 and bounds[-1][1] == n
        assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
        assert max(b - a for a, b in bounds) - min(b - a for a, b in bounds) <= 1


def test_progress_lines_report_rate(prefix):
    lines = []
    pairs = _pairs()
    records.write_shards(lambda: iter(pairs), _codepoints, prefix, NUM_EXAMPLES, NUM_SHARDS, log=lines.append)
    assert len(lines) == NUM_SHARDS
    assert all("examples/s" in line for line in lines)
    assert lines[-1].startswith(f"train: {NUM_EXAMPLES:,}/{NUM_EXAMPLES:,} examples")


def test_no_files_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no TFRecord files"):
        records.read_records(str(tmp_path / "nothing-*"))
