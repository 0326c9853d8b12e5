"""The train split's shards in a seeded random order, written in two resumable passes.

The shards hold the corpus in a random order, so any stretch of training
examples mixes the corpus's parts (WMT's Europarl, CommonCrawl, News
Commentary, ...) in their shares, while memory holds one bucket of about
`chunk` examples however large the corpus (`write_shuffled_shards`). What the
first pass has committed to disk is a `ScatterState`, saved as
`<prefix>.scatter/state.json`, so a killed run's rerun goes on from there.
"""
import dataclasses
import itertools
import json
import math
import os
import random
import shutil
import struct
import types
from collections.abc import Callable, Iterable, Iterator, Mapping

import numpy as np

from t2t_lite.data.shard_writer import (ENCODE_BATCH, Encoder, KeyedPair, LengthHistogram, PairSource, Progress,
                                        add_length, encoded_examples, sorted_histogram, write_shard)
from t2t_lite.data.shards import shard_paths
from t2t_lite.errors import UserError
from t2t_lite.files import atomic_write_text, read_json

SHUFFLE_SEED = 2017
# Most examples one shuffle bucket is expected to hold; datagen holds one bucket in memory
# at a time (WMT examples serialize to about 150 bytes, so some 15-30 MB).
SHUFFLE_CHUNK = 100_000
SCATTER = ".scatter"  # suffix of the directory holding a split's buckets until its shards are written
_FLUSH_BYTES = 1 << 16  # a bucket's pending records are appended to its file past this size


@dataclasses.dataclass(frozen=True)
class ScatterLayout:
    """What decides the bucket of every example; a scatter begun with another layout starts over."""

    num_examples: int
    num_shards: int
    chunks: int  # buckets per shard: shard k is buckets k * chunks, ..., (k + 1) * chunks - 1
    seed: int

    @property
    def num_buckets(self) -> int:
        return self.num_shards * self.chunks

    def buckets(self, shard: int) -> slice:
        """The buckets of one shard, in the order the shard holds them (a slice of [num_buckets] arrays)."""
        return slice(shard * self.chunks, (shard + 1) * self.chunks)


@dataclasses.dataclass(frozen=True)
class ScatterState:
    """What the scatter pass has committed to its bucket files; each commit makes a new one.

    Saved as state.json with the keys it has always had ("layout", "todo",
    "next", "bytes", "counts", "lengths", "complete"), so a scatter that an
    earlier t2t-lite began is resumed too.
    """

    layout: ScatterLayout
    todo: tuple[int, ...]  # the shards whose buckets this scatter fills
    next_index: int  # every wanted pair before this index is in its bucket file
    bucket_bytes: tuple[int, ...]  # [num_buckets] committed size of each bucket file; bytes past it are dropped
    bucket_counts: tuple[int, ...]  # [num_buckets] records committed to each bucket file
    # The committed examples' length histogram; None for a scatter begun by a t2t-lite that kept none.
    lengths: Mapping[str, int] | None
    complete: bool  # every pair is scattered: the shuffle pass may begin

    def __post_init__(self):
        # A read-only copy, so that no state changes after it is made, not even through its histogram.
        if self.lengths is not None:
            object.__setattr__(self, "lengths", types.MappingProxyType(dict(self.lengths)))

    @classmethod
    def start(cls, layout: ScatterLayout, todo: list[int]) -> "ScatterState":
        """The state of a scatter that has written nothing yet."""
        empty = (0,) * layout.num_buckets
        return cls(layout, tuple(todo), 0, empty, empty, {}, False)

    def resumes(self, layout: ScatterLayout, todo: list[int]) -> bool:
        """Whether this scatter can go on for `layout`: the same layout, covering every shard in `todo`."""
        return self.layout == layout and set(todo) <= set(self.todo)

    def to_json(self) -> dict:
        return {"layout": dataclasses.asdict(self.layout), "todo": list(self.todo), "next": self.next_index,
                "bytes": list(self.bucket_bytes), "counts": list(self.bucket_counts),
                "lengths": None if self.lengths is None else dict(self.lengths), "complete": self.complete}

    @classmethod
    def from_json(cls, data: dict) -> "ScatterState":
        """Raises KeyError or TypeError when `data` is not a saved state."""
        # "lengths" is absent from the states of a t2t-lite that kept no histogram.
        return cls(ScatterLayout(**data["layout"]), tuple(data["todo"]), data["next"], tuple(data["bytes"]),
                   tuple(data["counts"]), data.get("lengths"), data["complete"])


def write_shuffled_shards(pairs: PairSource, encode: Encoder, prefix: str, num_examples: int,
                          num_shards: int, log=None, seed: int = SHUFFLE_SEED, chunk: int = SHUFFLE_CHUNK,
                          on_lengths: Callable[[LengthHistogram], None] | None = None) -> int:
    """Tokenizes and writes the shards of one split that do not exist yet, in a seeded random order.

    Example i goes to bucket `shuffle_buckets(i)`, a hash of (seed, i), among
    num_shards * C buckets, C = ceil(num_examples / (num_shards * chunk));
    shard k is buckets kC, ..., kC + C - 1, each shuffled in memory and
    written one after the other. Every bucket is a uniform random sample of
    the corpus in random order, so every stretch of every shard mixes the
    corpus's parts in their shares. Two passes:
    1. scatter: encode the pairs of the missing shards in corpus order and
       append each record to its bucket file in `<prefix>.scatter/`. Every
       `_commit_every(num_examples)` examples it saves a `ScatterState`: how far
       it got, the bucket files' sizes and the length histogram so far. A killed
       run's rerun truncates the buckets to those sizes and goes on from there,
       reading but not tokenizing the pairs before it. The buckets take as much
       disk as the split's shards until those are written.
    2. shuffle: per missing shard, read its buckets one at a time, shuffle
       each (seeded by its number), write the shard as `.incomplete` and
       rename it; then delete its buckets.
    The output depends only on the pairs, the encoder, num_shards, seed and
    chunk: a rerun after a kill at any point writes the same bytes.

    Args and return value: as `shard_writer.write_shards`, plus
      seed: seed of the order.
      chunk: most examples a bucket is expected to hold.
    `on_lengths` is called between the passes (before any shard is written), if
    the scatter covered every shard of the split.
    """
    paths = shard_paths(prefix, num_shards)
    directory = prefix + SCATTER
    todo = [k for k in range(num_shards) if not os.path.exists(paths[k])]
    if not todo:
        shutil.rmtree(directory, ignore_errors=True)  # a run killed just before its clean-up
        return 0
    layout = ScatterLayout(num_examples, num_shards, max(1, math.ceil(num_examples / (num_shards * chunk))), seed)
    sizes = bucket_sizes(num_examples, layout.num_buckets, seed)
    name = os.path.basename(prefix)
    state = _scatter(pairs, encode, directory, layout, todo, sizes, name, log)
    if on_lengths is not None and state.lengths is not None and state.todo == tuple(range(num_shards)):
        on_lengths(sorted_histogram(state.lengths))
    total = sum(int(sizes[layout.buckets(k)].sum()) for k in todo)
    progress = Progress(name, total, log, what="examples shuffled into shards")
    for k in todo:
        buckets = range(layout.num_buckets)[layout.buckets(k)]
        records = itertools.chain.from_iterable(_shuffled_bucket(directory, b, seed) for b in buckets)
        write_shard(paths[k], records, int(sizes[layout.buckets(k)].sum()), progress)
        for b in buckets:
            os.remove(_bucket_path(directory, b))
    shutil.rmtree(directory, ignore_errors=True)
    return len(todo)


def shuffle_buckets(indices: np.ndarray, num_buckets: int, seed: int = SHUFFLE_SEED) -> np.ndarray:
    """The bucket of each example index: splitmix64 of (seed, index), modulo num_buckets.

    A fixed integer hash rather than a random generator, so the assignment is
    the same in every version of numpy and Python, and one index's bucket needs
    no state.

    Args:
      indices: int [N], example indices (>= 0).
    Returns:
      int64 [N] in [0, num_buckets).
    """
    with np.errstate(over="ignore"):
        x = np.asarray(indices, np.uint64) ^ _splitmix64(np.array([seed], np.uint64))
        return (_splitmix64(x) % np.uint64(num_buckets)).astype(np.int64)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    # uint64 arithmetic wraps modulo 2**64, which the mix relies on.
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def bucket_sizes(num_examples: int, num_buckets: int, seed: int = SHUFFLE_SEED) -> np.ndarray:
    """int64 [num_buckets]: how many of the examples 0..num_examples-1 each bucket receives."""
    sizes = np.zeros(num_buckets, np.int64)
    for start in range(0, num_examples, 1 << 20):  # a block at a time: memory stays flat
        indices = np.arange(start, min(start + (1 << 20), num_examples))
        sizes += np.bincount(shuffle_buckets(indices, num_buckets, seed), minlength=num_buckets)
    return sizes


def _commit_every(num_examples: int) -> int:
    """Examples between two commits of the scatter pass: about 20 per run, between 1,000 and 100,000."""
    return min(100_000, max(1_000, num_examples // 20))


def _bucket_path(directory: str, bucket: int) -> str:
    return os.path.join(directory, f"bucket-{bucket:05d}")


def state_path(directory: str) -> str:
    """Where a scatter directory keeps its ScatterState."""
    return os.path.join(directory, "state.json")


def load_state(directory: str) -> ScatterState | None:
    """The ScatterState saved in a scatter directory; None when there is none (or it is unreadable)."""
    try:
        return ScatterState.from_json(read_json(state_path(directory)))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _save_state(directory: str, state: ScatterState) -> None:
    atomic_write_text(state_path(directory), json.dumps(state.to_json()) + "\n")


class _BucketFiles:
    """Appends length-prefixed records to the bucket files, buffered per bucket, and counts what each holds.

    On construction it drops what a killed run appended to `buckets` (those the scatter fills) after its last
    commit.
    """

    def __init__(self, directory: str, state: ScatterState, buckets: Iterable[int]):
        self.directory = directory
        self.bytes, self.counts = list(state.bucket_bytes), list(state.bucket_counts)
        self._pending: dict[int, bytearray] = {}
        for bucket in buckets:
            with open(_bucket_path(directory, bucket), "ab") as f:
                f.truncate(self.bytes[bucket])

    def append(self, bucket: int, record: bytes) -> None:
        pending = self._pending.setdefault(bucket, bytearray())
        pending += struct.pack("<I", len(record)) + record
        self.counts[bucket] += 1
        if len(pending) >= _FLUSH_BYTES:
            self._flush(bucket)

    def commit(self, state: ScatterState, next_index: int, lengths: LengthHistogram | None,
               complete: bool = False) -> ScatterState:
        """Writes every pending record, then saves and returns the state that says so."""
        for bucket in list(self._pending):
            self._flush(bucket)
        state = dataclasses.replace(state, next_index=next_index, bucket_bytes=tuple(self.bytes),
                                    bucket_counts=tuple(self.counts), lengths=lengths, complete=complete)
        _save_state(self.directory, state)
        return state

    def _flush(self, bucket: int) -> None:
        pending = self._pending.pop(bucket)
        with open(_bucket_path(self.directory, bucket), "ab") as f:
            f.write(pending)
        self.bytes[bucket] += len(pending)


def _scatter(pairs: PairSource, encode: Encoder, directory: str, layout: ScatterLayout, todo: list[int],
             sizes: np.ndarray, name: str, log) -> ScatterState:
    """Pass 1 of write_shuffled_shards: fills (or finishes filling) the bucket files of the shards in `todo`."""
    state = load_state(directory)
    if state is None or not state.resumes(layout, todo):
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        state = ScatterState.start(layout, todo)
        _save_state(directory, state)
    if state.complete:
        return state
    wanted = np.zeros(layout.num_buckets, bool)  # [num_buckets]
    for k in state.todo:
        wanted[layout.buckets(k)] = True
    files = _BucketFiles(directory, state, np.flatnonzero(wanted).tolist())
    expected = int(sizes[wanted].sum())
    progress = Progress(name, expected, log, every=math.inf, done=int(np.asarray(state.bucket_counts)[wanted].sum()),
                        what="examples encoded")
    lengths = None if state.lengths is None else dict(state.lengths)
    indexed_pairs = itertools.islice(enumerate(pairs()), state.next_index, None)
    every = _commit_every(layout.num_examples)
    for encoded, example in enumerate(encoded_examples(_wanted_pairs(indexed_pairs, wanted, layout), encode), 1):
        index, bucket = example.key
        if index >= layout.num_examples:
            raise UserError(f"{name} text has more than the {layout.num_examples} pairs counted "
                            "before writing; did the input files change during datagen?")
        files.append(bucket, example.record)
        if lengths is not None:
            add_length(lengths, example.length)
        progress.done += 1
        if encoded % every == 0:
            state = files.commit(state, index + 1, lengths)
            progress.report()
    if progress.done != expected:
        raise UserError(f"{name}: the text ended after {progress.done} of the {expected} pairs "
                        "counted before writing; did the input files change?")
    state = files.commit(state, layout.num_examples, lengths, complete=True)
    progress.report()
    return state


def _wanted_pairs(indexed_pairs: Iterator[tuple[int, tuple[str, str]]], wanted: np.ndarray,
                  layout: ScatterLayout) -> Iterator[KeyedPair]:
    """((index, bucket), pair) of the pairs whose bucket is wanted, and of any beyond num_examples,
    which are passed on so the scatter can report that the text changed.
    """
    while block := list(itertools.islice(indexed_pairs, ENCODE_BATCH)):
        indices = np.array([i for i, _ in block], np.int64)
        buckets = shuffle_buckets(indices, layout.num_buckets, layout.seed)
        keep = wanted[buckets] | (indices >= layout.num_examples)
        for (index, pair), bucket in zip(itertools.compress(block, keep), buckets[keep].tolist()):
            yield (index, bucket), pair


def _shuffled_bucket(directory: str, bucket: int, seed: int) -> list[bytes]:
    """The records of one bucket file, in an order seeded by (seed, bucket)."""
    with open(_bucket_path(directory, bucket), "rb") as f:
        data = f.read()
    records, position = [], 0
    while position < len(data):
        (length,) = struct.unpack_from("<I", data, position)
        records.append(data[position + 4:position + 4 + length])
        position += 4 + length
    # random.Random(int) and shuffle have given the same order in every Python 3 release.
    random.Random(seed * 1_000_003 + bucket).shuffle(records)
    return records
