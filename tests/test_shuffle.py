"""The shuffled layout: the shards a plain-Python reference builds from the data, however often interrupted."""
import collections
import dataclasses
import json
import math
import os
import random
import struct

import numpy as np
import pytest
import tensorflow as tf

from shard_data import NUM_EXAMPLES, NUM_SHARDS, codepoints, expected, histogram, pairs, read
from t2t_lite.data import shuffle
from t2t_lite.data.shards import serialize_example, shard_paths
from t2t_lite.data.shuffle import (
    SCATTER,
    SHUFFLE_SEED,
    ScatterLayout,
    ScatterState,
    bucket_sizes,
    load_state,
    shuffle_buckets,
    state_path,
    write_shuffled_shards,
)
from t2t_lite.errors import UserError

FAIL_AT = 650  # the pair at which the interrupted scatter's text fails


@pytest.fixture
def prefix(tmp_path) -> str:
    return str(tmp_path / "train")


def _write_shuffled(prefix: str, source=None, encode=codepoints, **kwargs) -> int:
    source = source if source is not None else pairs()
    return write_shuffled_shards(lambda: iter(source), encode, prefix, NUM_EXAMPLES, NUM_SHARDS,
                                 log=lambda line: None, **kwargs)


def _shard_bytes(prefix: str) -> dict[str, bytes]:
    return {p: open(p, "rb").read() for p in shard_paths(prefix, NUM_SHARDS)}


def _shard_records(prefix: str) -> list[list[bytes]]:
    return [list(tf.data.TFRecordDataset(p).as_numpy_iterator()) for p in shard_paths(prefix, NUM_SHARDS)]


def _splitmix64(x: int) -> int:
    """splitmix64 in plain Python integers: the reference the numpy version must match."""
    mask = (1 << 64) - 1
    x = (x + 0x9E3779B97F4A7C15) & mask
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & mask
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & mask
    return x ^ (x >> 31)


def _chunks(chunk: int) -> int:
    return max(1, math.ceil(NUM_EXAMPLES / (NUM_SHARDS * chunk)))


def _buckets(source, num_buckets: int, seed: int = SHUFFLE_SEED) -> list[list[bytes]]:
    """Each bucket's records in corpus order, from the data and the hash in plain Python."""
    buckets = [[] for _ in range(num_buckets)]
    for i, (inputs, targets) in enumerate(expected(source)):
        buckets[_splitmix64(i ^ _splitmix64(seed)) % num_buckets].append(serialize_example(inputs, targets))
    return buckets


def _reference_shards(chunk: int, seed: int = SHUFFLE_SEED) -> list[list[bytes]]:
    """The records of each shard as write_shuffled_shards describes them: buckets shuffled, then concatenated."""
    chunks = _chunks(chunk)
    buckets = _buckets(pairs(), NUM_SHARDS * chunks, seed)
    for b, records in enumerate(buckets):
        random.Random(seed * 1_000_003 + b).shuffle(records)
    return [sum(buckets[k * chunks:(k + 1) * chunks], []) for k in range(NUM_SHARDS)]


def test_buckets_match_a_plain_python_hash_and_are_near_uniform():
    indices = [0, 1, 2, 999, 2**32 + 5]
    expected_buckets = [_splitmix64(i ^ _splitmix64(SHUFFLE_SEED)) % 7 for i in indices]
    assert shuffle_buckets(np.array(indices), 7).tolist() == expected_buckets
    sizes = bucket_sizes(70_000, 7)
    assert sizes.sum() == 70_000 and abs(sizes - 10_000).max() < 400  # binomial sd is 95


@pytest.mark.parametrize("chunk", [100, 10_000])
def test_shuffled_shards_hold_every_example_once_out_of_order(prefix, chunk):
    assert _write_shuffled(prefix, chunk=chunk) == NUM_SHARDS
    assert sorted(os.listdir(os.path.dirname(prefix))) == sorted(
        os.path.basename(p) for p in shard_paths(prefix, NUM_SHARDS))  # the scatter files are gone
    assert collections.Counter(read(prefix + "-*")) == collections.Counter(expected(pairs()))
    # Each shard is a random sample in random order: its examples' source indices are not increasing.
    position = {example: i for i, example in enumerate(expected(pairs()))}
    for path in shard_paths(prefix, NUM_SHARDS):
        indices = [position[example] for example in read([path])]
        assert 150 < len(indices) < 350 and indices != sorted(indices)
    assert _shard_records(prefix) == _reference_shards(chunk)


def test_shuffled_shards_are_the_same_on_every_run(tmp_path):
    first, second = str(tmp_path / "a" / "train"), str(tmp_path / "b" / "train")
    for prefix in (first, second):
        os.makedirs(os.path.dirname(prefix))
        _write_shuffled(prefix, chunk=100)
    assert list(_shard_bytes(first).values()) == list(_shard_bytes(second).values())
    other = str(tmp_path / "seed" / "train")
    os.makedirs(os.path.dirname(other))
    _write_shuffled(other, chunk=100, seed=SHUFFLE_SEED + 1)
    assert list(_shard_bytes(other).values()) != list(_shard_bytes(first).values())
    assert _shard_records(other) == _reference_shards(100, seed=SHUFFLE_SEED + 1)


@pytest.fixture
def interrupted(tmp_path, monkeypatch) -> str:
    """The prefix of a shuffled write (chunk 100) whose text failed at pair FAIL_AT, past a commit."""
    # Commit every 100 examples and flush buckets often, so the failure leaves bytes past the last commit.
    monkeypatch.setattr(shuffle, "_commit_every", lambda n: 100)
    monkeypatch.setattr(shuffle, "_FLUSH_BYTES", 64)
    prefix = str(tmp_path / "killed" / "train")
    os.makedirs(os.path.dirname(prefix))

    def failing_pairs():
        for i, pair in enumerate(pairs()):
            if i == FAIL_AT:
                raise OSError("disk went away")
            yield pair

    with pytest.raises(Exception, match="disk went away"):
        write_shuffled_shards(failing_pairs, codepoints, prefix, NUM_EXAMPLES, NUM_SHARDS,
                              log=lambda line: None, chunk=100)
    assert not any(os.path.exists(p) for p in shard_paths(prefix, NUM_SHARDS))
    return prefix


def test_scatter_interrupted_between_commits_resumes_to_the_same_bytes(tmp_path, interrupted):
    reference = str(tmp_path / "reference" / "train")
    os.makedirs(os.path.dirname(reference))
    reference_lengths = []
    _write_shuffled(reference, chunk=100, on_lengths=reference_lengths.append)
    assert reference_lengths == [histogram(pairs())]
    assert 0 < load_state(interrupted + SCATTER).next_index <= FAIL_AT

    # The histogram committed with the scatter goes on from the commit, counting no example twice.
    lengths = []
    assert _write_shuffled(interrupted, chunk=100, on_lengths=lengths.append) == NUM_SHARDS
    assert lengths == reference_lengths
    assert list(_shard_bytes(interrupted).values()) == list(_shard_bytes(reference).values())
    assert _shard_records(interrupted) == _reference_shards(100)
    assert not os.path.exists(interrupted + SCATTER)


def test_committed_state_matches_the_data_and_the_bucket_files(interrupted):
    directory = interrupted + SCATTER
    state = load_state(directory)
    layout = ScatterLayout(NUM_EXAMPLES, NUM_SHARDS, chunks=_chunks(100), seed=SHUFFLE_SEED)
    assert state.layout == layout and state.todo == tuple(range(NUM_SHARDS)) and not state.complete
    assert 0 < state.next_index <= FAIL_AT
    # What the state says the buckets hold is exactly the pairs before next_index, in corpus order.
    committed = _buckets(pairs()[:state.next_index], layout.num_buckets)
    assert state.bucket_counts == tuple(len(records) for records in committed)
    assert state.lengths == histogram(pairs()[:state.next_index])
    framed = [b"".join(struct.pack("<I", len(r)) + r for r in records) for records in committed]
    assert state.bucket_bytes == tuple(len(data) for data in framed)
    past_commit = 0
    for bucket, data in enumerate(framed):
        with open(os.path.join(directory, f"bucket-{bucket:05d}"), "rb") as f:
            on_disk = f.read()
        assert on_disk[:len(data)] == data
        past_commit += len(on_disk) - len(data)
    assert past_commit > 0  # the failure came after records past the commit were written: a resume drops them


def test_state_file_holds_the_keys_earlier_versions_wrote_and_round_trips(interrupted):
    with open(state_path(interrupted + SCATTER), encoding="utf-8") as f:
        raw = json.load(f)
    assert list(raw) == ["layout", "todo", "next", "bytes", "counts", "lengths", "complete"]
    assert raw["layout"] == {"num_examples": NUM_EXAMPLES, "num_shards": NUM_SHARDS, "chunks": _chunks(100),
                             "seed": SHUFFLE_SEED}
    state = ScatterState.from_json(raw)
    assert (state.todo, state.next_index, state.bucket_bytes, state.bucket_counts, state.lengths, state.complete) == (
        tuple(raw["todo"]), raw["next"], tuple(raw["bytes"]), tuple(raw["counts"]), raw["lengths"], False)
    assert ScatterState.from_json(json.loads(json.dumps(state.to_json()))) == state


def test_scatter_begun_without_a_histogram_resumes_without_reporting_one(interrupted):
    # What a t2t-lite that kept no length histogram left: the same state without "lengths".
    path = state_path(interrupted + SCATTER)
    with open(path, encoding="utf-8") as f:
        raw = json.load(f)
    del raw["lengths"]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(raw, f)
    assert load_state(interrupted + SCATTER).lengths is None

    lengths = []
    assert _write_shuffled(interrupted, chunk=100, on_lengths=lengths.append) == NUM_SHARDS
    assert lengths == []  # the examples before the commit were never counted
    assert _shard_records(interrupted) == _reference_shards(100)


def test_scatter_of_another_layout_starts_over(interrupted):
    lengths = []
    assert _write_shuffled(interrupted, chunk=50, on_lengths=lengths.append) == NUM_SHARDS
    assert lengths == [histogram(pairs())]  # counted from the first pair, not from the other layout's commit
    assert _shard_records(interrupted) == _reference_shards(50)


def test_a_state_resumes_only_its_layout_and_a_superset_of_the_shards():
    layout = ScatterLayout(NUM_EXAMPLES, NUM_SHARDS, chunks=3, seed=SHUFFLE_SEED)
    state = ScatterState.start(layout, [1, 2])
    assert state.bucket_bytes == state.bucket_counts == (0,) * 12
    assert (state.next_index, state.lengths, state.complete) == (0, {}, False)
    assert state.resumes(layout, [2]) and state.resumes(layout, [1, 2])
    assert not state.resumes(layout, [0, 1])
    assert not state.resumes(dataclasses.replace(layout, seed=SHUFFLE_SEED + 1), [2])
    # Each commit makes a new state (dataclasses.replace); none changes, not even through its histogram.
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.next_index = 5
    with pytest.raises(TypeError):
        state.lengths["9"] = 1


def test_rerun_rebuilds_a_lost_shard_identically_tokenizing_only_its_examples(prefix):
    _write_shuffled(prefix, chunk=100)
    before = _shard_bytes(prefix)
    lost = shard_paths(prefix, NUM_SHARDS)[2]
    os.remove(lost)
    tokenized = tf.Variable(0, dtype=tf.int64)

    def counting(texts):  # runs inside tf.data: counts through a variable
        with tf.control_dependencies([tokenized.assign_add(tf.size(texts, out_type=tf.int64))]):
            return codepoints(tf.identity(texts))

    lengths = []
    assert _write_shuffled(prefix, encode=counting, chunk=100, on_lengths=lengths.append) == 1
    assert _shard_bytes(prefix) == before
    assert lengths == []  # this run saw a quarter of the examples: no histogram of the split
    # Only the lost shard's examples (about a quarter) were tokenized again, once per side.
    shard_size = len(read([lost]))
    assert int(tokenized.numpy()) == 2 * shard_size and shard_size < NUM_EXAMPLES // 2


def test_shuffled_text_longer_or_shorter_than_counted_is_an_error(prefix):
    with pytest.raises(UserError, match="more than the 1003 pairs"):
        _write_shuffled(prefix, source=pairs() + [("extra", "pair")])
    with pytest.raises(UserError, match="ended after"):
        _write_shuffled(prefix, source=pairs()[:700])
    assert not any(os.path.exists(p) for p in shard_paths(prefix, NUM_SHARDS))


def test_the_shuffle_reports_its_progress_by_the_shards_name(prefix):
    lines = []
    write_shuffled_shards(lambda: iter(pairs()), codepoints, prefix, NUM_EXAMPLES, NUM_SHARDS, log=lines.append)
    total = f"{NUM_EXAMPLES:,}/{NUM_EXAMPLES:,}"
    encoded = [line for line in lines if "examples encoded" in line]
    assert encoded and encoded[-1].startswith(f"train: {total} examples encoded, ")
    shuffled = [line for line in lines if "examples shuffled into shards" in line]
    assert [line.rsplit(" (", 1)[1] for line in shuffled] == [f"{os.path.basename(p)} done)"
                                                               for p in shard_paths(prefix, NUM_SHARDS)]
    assert all(line.startswith("train: ") for line in shuffled)
    assert shuffled[-1].startswith(f"train: {total} examples shuffled into shards, ")
    assert len(lines) == len(encoded) + len(shuffled)
