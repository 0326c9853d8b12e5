"""Sharded TFRecords: written ids read back exactly; reruns skip; interrupted runs complete once."""
import collections
import itertools
import json
import os

import numpy as np
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


def _histogram(pairs) -> dict[str, int]:
    """The length histogram of _codepoints-encoded pairs, counted independently of records."""
    counts = collections.Counter(max(len(src), len(tgt)) for src, tgt in pairs)
    return {str(length): counts[length] for length in sorted(counts)}


def _read(files) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    return [(tuple(ex["inputs"].tolist()), tuple(ex["targets"].tolist()))
            for ex in records.read_records(files).as_numpy_iterator()]


def _write(prefix: str, pairs=None, num_examples: int = NUM_EXAMPLES, **kwargs) -> int:
    source = pairs if pairs is not None else _pairs()
    return records.write_shards(lambda: iter(source), _codepoints, prefix, num_examples, NUM_SHARDS,
                                log=lambda line: None, **kwargs)


@pytest.fixture
def prefix(tmp_path) -> str:
    return str(tmp_path / "train")


def test_read_back_equals_source_ids(prefix):
    lengths = []
    assert _write(prefix, on_lengths=lengths.append) == NUM_SHARDS
    assert lengths == [_histogram(_pairs())]
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

    lengths = []
    assert _write(prefix, on_lengths=lengths.append) == 2
    assert lengths == []  # this run encoded two of the four shards: no histogram of the split
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


# The train split's shuffled layout (write_shuffled_shards).

def _write_shuffled(prefix: str, pairs=None, encode=_codepoints, **kwargs) -> int:
    source = pairs if pairs is not None else _pairs()
    return records.write_shuffled_shards(lambda: iter(source), encode, prefix, NUM_EXAMPLES, NUM_SHARDS,
                                         log=lambda line: None, **kwargs)


def _shard_bytes(prefix: str) -> dict[str, bytes]:
    return {p: open(p, "rb").read() for p in records.shard_paths(prefix, NUM_SHARDS)}


def _splitmix64(x: int) -> int:
    """splitmix64 in plain Python integers: the reference the numpy version must match."""
    mask = (1 << 64) - 1
    x = (x + 0x9E3779B97F4A7C15) & mask
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & mask
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & mask
    return x ^ (x >> 31)


def test_buckets_match_a_plain_python_hash_and_are_near_uniform():
    indices = [0, 1, 2, 999, 2**32 + 5]
    expected = [_splitmix64(i ^ _splitmix64(records.SHUFFLE_SEED)) % 7 for i in indices]
    assert records.shuffle_buckets(np.array(indices), 7).tolist() == expected
    sizes = records.bucket_sizes(70_000, 7)
    assert sizes.sum() == 70_000 and abs(sizes - 10_000).max() < 400  # binomial sd is 95


@pytest.mark.parametrize("chunk", [100, 10_000])
def test_shuffled_shards_hold_every_example_once_out_of_order(prefix, chunk):
    assert _write_shuffled(prefix, chunk=chunk) == NUM_SHARDS
    assert sorted(os.listdir(os.path.dirname(prefix))) == sorted(
        os.path.basename(p) for p in records.shard_paths(prefix, NUM_SHARDS))  # the scatter files are gone
    assert collections.Counter(_read(prefix + "-*")) == collections.Counter(_expected(_pairs()))
    # Each shard is a random sample in random order: its examples' source indices are not increasing.
    position = {example: i for i, example in enumerate(_expected(_pairs()))}
    for path in records.shard_paths(prefix, NUM_SHARDS):
        indices = [position[example] for example in _read([path])]
        assert 150 < len(indices) < 350 and indices != sorted(indices)


def test_shuffled_shards_are_the_same_on_every_run(tmp_path):
    first, second = str(tmp_path / "a" / "train"), str(tmp_path / "b" / "train")
    for prefix in (first, second):
        os.makedirs(os.path.dirname(prefix))
        _write_shuffled(prefix, chunk=100)
    assert list(_shard_bytes(first).values()) == list(_shard_bytes(second).values())
    other = str(tmp_path / "seed" / "train")
    os.makedirs(os.path.dirname(other))
    _write_shuffled(other, chunk=100, seed=records.SHUFFLE_SEED + 1)
    assert list(_shard_bytes(other).values()) != list(_shard_bytes(first).values())


def test_scatter_interrupted_between_commits_resumes_to_the_same_bytes(tmp_path, monkeypatch):
    reference = str(tmp_path / "reference" / "train")
    os.makedirs(os.path.dirname(reference))
    reference_lengths = []
    _write_shuffled(reference, chunk=100, on_lengths=reference_lengths.append)
    assert reference_lengths == [_histogram(_pairs())]
    # Commit every 100 examples and flush buckets often, so the failure leaves bytes past the last commit.
    monkeypatch.setattr(records, "_commit_every", lambda n: 100)
    monkeypatch.setattr(records, "_FLUSH_BYTES", 64)
    prefix = str(tmp_path / "killed" / "train")
    os.makedirs(os.path.dirname(prefix))

    def failing_pairs():
        for i, pair in enumerate(_pairs()):
            if i == 650:
                raise OSError("disk went away")
            yield pair

    with pytest.raises(Exception, match="disk went away"):
        records.write_shuffled_shards(failing_pairs, _codepoints, prefix, NUM_EXAMPLES, NUM_SHARDS,
                                      log=lambda line: None, chunk=100)
    assert not any(os.path.exists(p) for p in records.shard_paths(prefix, NUM_SHARDS))
    with open(os.path.join(prefix + records.SCATTER, "state.json")) as f:
        committed = json.load(f)["next"]
    assert 0 < committed <= 650

    # The histogram committed with the scatter goes on from the commit, counting no example twice.
    lengths = []
    assert _write_shuffled(prefix, chunk=100, on_lengths=lengths.append) == NUM_SHARDS
    assert lengths == reference_lengths
    assert list(_shard_bytes(prefix).values()) == list(_shard_bytes(reference).values())
    assert not os.path.exists(prefix + records.SCATTER)


def test_rerun_rebuilds_a_lost_shard_identically_tokenizing_only_its_examples(prefix):
    _write_shuffled(prefix, chunk=100)
    before = _shard_bytes(prefix)
    lost = records.shard_paths(prefix, NUM_SHARDS)[2]
    os.remove(lost)
    tokenized = tf.Variable(0, dtype=tf.int64)

    def counting(texts):  # runs inside tf.data: counts through a variable
        with tf.control_dependencies([tokenized.assign_add(tf.size(texts, out_type=tf.int64))]):
            return _codepoints(tf.identity(texts))

    lengths = []
    assert _write_shuffled(prefix, encode=counting, chunk=100, on_lengths=lengths.append) == 1
    assert _shard_bytes(prefix) == before
    assert lengths == []  # this run saw a quarter of the examples: no histogram of the split
    # Only the lost shard's examples (about a quarter) were tokenized again, once per side.
    shard_size = len(_read([lost]))
    assert int(tokenized.numpy()) == 2 * shard_size and shard_size < NUM_EXAMPLES // 2


def test_shuffled_text_longer_or_shorter_than_counted_is_an_error(prefix):
    with pytest.raises(UserError, match="more than the 1003 pairs"):
        _write_shuffled(prefix, pairs=_pairs() + [("extra", "pair")])
    with pytest.raises(UserError, match="ended after"):
        _write_shuffled(prefix, pairs=_pairs()[:700])
    assert not any(os.path.exists(p) for p in records.shard_paths(prefix, NUM_SHARDS))
