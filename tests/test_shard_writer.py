"""The in-order shard writer: written ids read back exactly; reruns skip; interrupted runs complete once."""
import collections
import itertools
import os

import pytest

from shard_data import NUM_EXAMPLES, NUM_SHARDS, codepoints, expected, histogram, pairs, read
from t2t_lite.data.shard_writer import shard_bounds, write_shards
from t2t_lite.data.shards import INCOMPLETE, shard_paths
from t2t_lite.errors import UserError


def _write(prefix: str, source=None, num_examples: int = NUM_EXAMPLES, **kwargs) -> int:
    source = source if source is not None else pairs()
    return write_shards(lambda: iter(source), codepoints, prefix, num_examples, NUM_SHARDS,
                        log=lambda line: None, **kwargs)


@pytest.fixture
def prefix(tmp_path) -> str:
    return str(tmp_path / "train")


def test_read_back_equals_source_ids(prefix):
    lengths = []
    assert _write(prefix, on_lengths=lengths.append) == NUM_SHARDS
    assert lengths == [histogram(pairs())]
    paths = shard_paths(prefix, NUM_SHARDS)
    assert sorted(os.listdir(os.path.dirname(prefix))) == sorted(map(os.path.basename, paths))
    # Each shard alone holds the next contiguous run of the source, in order.
    in_order = [example for path in paths for example in read([path])]
    assert in_order == expected(pairs())
    # Read together (interleaved), every example comes back exactly once.
    assert collections.Counter(read(prefix + "-*")) == collections.Counter(expected(pairs()))


def test_rerun_skips_finished_shards_without_reading(prefix):
    _write(prefix)
    stamps = {p: os.stat(p).st_mtime_ns for p in shard_paths(prefix, NUM_SHARDS)}

    def must_not_be_read():
        raise AssertionError("a complete split was read again")

    assert write_shards(must_not_be_read, codepoints, prefix, NUM_EXAMPLES, NUM_SHARDS) == 0
    assert {p: os.stat(p).st_mtime_ns for p in stamps} == stamps


def test_interrupted_run_completes_without_duplicates(prefix):
    _write(prefix)
    paths = shard_paths(prefix, NUM_SHARDS)
    kept = os.stat(paths[0]).st_mtime_ns
    # What a killed run leaves: one shard half-written (stale .incomplete), one never started.
    os.replace(paths[1], paths[1] + INCOMPLETE)
    with open(paths[1] + INCOMPLETE, "r+b") as f:
        f.truncate(100)
    os.remove(paths[3])
    # The pattern matches the stale file too, but it is never read as data: shards 0 and 2 hold 250 + 251.
    assert len(read(prefix + "-*")) == 501

    lengths = []
    assert _write(prefix, on_lengths=lengths.append) == 2
    assert lengths == []  # this run encoded two of the four shards: no histogram of the split
    assert os.stat(paths[0]).st_mtime_ns == kept
    assert not [f for f in os.listdir(os.path.dirname(prefix)) if f.endswith(INCOMPLETE)]
    assert collections.Counter(read(prefix + "-*")) == collections.Counter(expected(pairs()))


def test_short_source_fails_cleanly_and_rerun_completes(prefix):
    truncated = pairs()[:700]  # the text ends inside shard 2 (shards of 250, 251, 251, 251)
    with pytest.raises(UserError, match="ended after"):
        _write(prefix, truncated)
    names = sorted(os.listdir(os.path.dirname(prefix)))
    assert names == sorted(map(os.path.basename, shard_paths(prefix, NUM_SHARDS)[:2]))
    _write(prefix)
    assert collections.Counter(read(prefix + "-*")) == collections.Counter(expected(pairs()))


def test_long_source_is_an_error(prefix):
    with pytest.raises(UserError, match="more than the 1000 pairs"):
        _write(prefix, num_examples=1000)


def test_more_shards_than_examples_writes_empty_shards(prefix):
    two = pairs()[:2]
    write_shards(lambda: iter(two), codepoints, prefix, 2, NUM_SHARDS, log=lambda line: None)
    assert all(os.path.exists(p) for p in shard_paths(prefix, NUM_SHARDS))
    assert collections.Counter(read(prefix + "-*")) == collections.Counter(expected(two))


def test_shard_bounds_cover_every_example_once():
    for n, k in [(0, 3), (1, 3), (10, 3), (1003, 4), (29000, 7)]:
        bounds = shard_bounds(n, k)
        assert len(bounds) == k and bounds[0][0] == 0 and bounds[-1][1] == n
        assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
        assert max(b - a for a, b in bounds) - min(b - a for a, b in bounds) <= 1


def test_progress_lines_report_rate(prefix):
    lines = []
    source = pairs()
    write_shards(lambda: iter(source), codepoints, prefix, NUM_EXAMPLES, NUM_SHARDS, log=lines.append)
    assert len(lines) == NUM_SHARDS
    assert all("examples/s" in line for line in lines)
    assert lines[-1].startswith(f"train: {NUM_EXAMPLES:,}/{NUM_EXAMPLES:,} examples")
