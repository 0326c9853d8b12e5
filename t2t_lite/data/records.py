"""Sharded TFRecords of {"inputs", "targets"} id sequences: streaming, restartable writes.

Two layouts:
- `write_shards` (dev, test): example i of n goes to the shard whose
  contiguous range holds it (`shard_bounds`), in corpus order, so evaluation
  output stays line-aligned with the reference.
- `write_shuffled_shards` (train): the shards hold the corpus in a seeded
  random order, so any stretch of training examples mixes the corpus's parts
  (WMT's Europarl, CommonCrawl, News Commentary, ...) in their shares. See
  that function for how memory stays flat in corpus size.
A shard is written as `<name>.incomplete` and renamed when complete, so:
- a rerun skips every shard that exists under its final name, without even
  tokenizing that shard's text;
- an interrupted run leaves at most the shards it was writing as stale
  `.incomplete` files, which the rerun overwrites (never appends), so no
  example is ever written twice.
`read_records` interleaves the shards one example at a time.

Both writers can report the split's length histogram (`LengthHistogram`), counted
while encoding, so nobody reads the shards back to learn how many examples are long.

Text is tokenized inside tf.data with parallel calls while Python serializes
and writes, so datagen keeps both cores busy; memory holds a few batches,
however large the corpus.
"""
import bisect
import itertools
import json
import math
import os
import random
import shutil
import struct
import sys
import time
from collections.abc import Callable, Iterable, Iterator

import numpy as np
import tensorflow as tf

from t2t_lite.errors import UserError
from t2t_lite.files import atomic_write_text

# A function of no arguments that starts the pairs over from the beginning.
PairSource = Callable[[], Iterable[tuple[str, str]]]
# tf.string [B] -> int ragged [B, None], EOS included.
Encoder = Callable[[tf.Tensor], tf.RaggedTensor]
# {str(length): number of examples}, length = max(len(inputs), len(targets)) with EOS, the length
# training buckets and drops by (batching.example_length); string keys, as JSON stores them.
LengthHistogram = dict[str, int]

INCOMPLETE = ".incomplete"
_ENCODE_BATCH = 512  # strings per tokenizer call: large enough to amortise the op's overhead.
SHUFFLE_SEED = 2017
# Most examples one shuffle bucket is expected to hold; datagen holds one bucket in memory
# at a time (WMT examples serialize to about 150 bytes, so some 15-30 MB).
SHUFFLE_CHUNK = 100_000
SCATTER = ".scatter"  # suffix of the directory holding a split's buckets until its shards are written
_FLUSH_BYTES = 1 << 16  # a bucket's pending records are appended to its file past this size


def shard_paths(prefix: str, num_shards: int) -> list[str]:
    """Final names of a split's shards.

    >>> shard_paths("/d/train", 2)
    ['/d/train-00000-of-00002.tfrecord', '/d/train-00001-of-00002.tfrecord']
    """
    return [f"{prefix}-{k:05d}-of-{num_shards:05d}.tfrecord" for k in range(num_shards)]


def shard_bounds(num_examples: int, num_shards: int) -> list[tuple[int, int]]:
    """The contiguous [start, stop) range of example indices in each shard; sizes differ by at most 1.

    >>> shard_bounds(10, 3)
    [(0, 3), (3, 6), (6, 10)]
    """
    if num_shards < 1:
        raise UserError(f"num_shards must be at least 1, got {num_shards}")
    edges = [num_examples * k // num_shards for k in range(num_shards + 1)]
    return list(itertools.pairwise(edges))


def serialize_example(inputs: list[int], targets: list[int]) -> bytes:
    """One tf.train.Example with int64 list features "inputs" and "targets" (t2t's format)."""
    feature = {name: tf.train.Feature(int64_list=tf.train.Int64List(value=ids))
               for name, ids in (("inputs", inputs), ("targets", targets))}
    # deterministic=True sorts the feature map's keys; otherwise protobuf writes them in a
    # per-process hash order, and a rerun would not reproduce a shard byte for byte.
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(deterministic=True)


def write_shards(pairs: PairSource, encode: Encoder, prefix: str, num_examples: int,
                 num_shards: int, log=None, on_lengths: Callable[[LengthHistogram], None] | None = None) -> int:
    """Tokenizes and writes the shards of one split that do not exist yet.

    Args:
      pairs: restarts the split's (source, target) texts; must yield exactly
        `num_examples` pairs, in the same order on every call.
      encode: tokenizer, run inside tf.data; its output is written as is.
      prefix: shard path prefix, e.g. "<data_dir>/train".
      num_examples: pairs in the split.
      num_shards: shards in the split.
      log: progress lines go here (default: stderr).
      on_lengths: called with the split's length histogram once every shard is
        written, if this call wrote them all (a rerun that finishes some has not
        seen the others' examples).
    Returns:
      The number of shards written by this call (0 when all existed).
    """
    paths = shard_paths(prefix, num_shards)
    bounds = shard_bounds(num_examples, num_shards)
    todo = [k for k in range(num_shards) if not os.path.exists(paths[k])]
    if not todo:
        return 0
    wanted = [bounds[k] for k in todo]
    lengths: LengthHistogram = {}

    def counted(serialized):
        for record, _, length in serialized:
            lengths[str(length)] = lengths.get(str(length), 0) + 1
            yield record

    examples = counted(
        _serialized(_encoded_batches(_indexed_batches(_select(pairs(), wanted, num_examples)), encode)))
    progress = Progress(os.path.basename(prefix), sum(stop - start for start, stop in wanted), log)
    for k in todo:
        start, stop = bounds[k]
        _write_shard(paths[k], itertools.islice(examples, stop - start), stop - start, progress)
    if next(examples, None) is not None:
        raise UserError(f"{os.path.basename(prefix)} text has more than the {num_examples} pairs "
                        "counted before writing; did the input files change during datagen?")
    if on_lengths is not None and len(todo) == num_shards:
        on_lengths(_sorted(lengths))
    return len(todo)


def _select(pairs: Iterable[tuple[str, str]], ranges: list[tuple[int, int]],
            num_examples: int) -> Iterator[tuple[str, str]]:
    """The pairs whose index falls in one of the sorted, disjoint `ranges`, then any beyond `num_examples`.

    Pairs beyond the count are passed on so the writer can report that the text changed.
    """
    starts = [start for start, _ in ranges]
    for i, pair in enumerate(pairs):
        r = bisect.bisect_right(starts, i) - 1
        if (r >= 0 and i < ranges[r][1]) or i >= num_examples:
            yield pair


def write_shuffled_shards(pairs: PairSource, encode: Encoder, prefix: str, num_examples: int,
                          num_shards: int, log=None, seed: int = SHUFFLE_SEED,
                          chunk: int = SHUFFLE_CHUNK,
                          on_lengths: Callable[[LengthHistogram], None] | None = None) -> int:
    """Tokenizes and writes the shards of one split that do not exist yet, in a seeded random order.

    Example i goes to bucket `shuffle_buckets(i)`, a hash of (seed, i), among
    num_shards * C buckets, C = ceil(num_examples / (num_shards * chunk));
    shard k is buckets kC, ..., kC + C - 1, each shuffled in memory and
    written one after the other. Every bucket is a uniform random sample of
    the corpus in random order, so every stretch of every shard mixes the
    corpus's parts in their shares, while memory holds one bucket (about
    `chunk` examples) however large the corpus. Two passes:
    1. scatter: encode the pairs of the missing shards in corpus order and
       append each record to its bucket file in `<prefix>.scatter/`. Every
       `_commit_every(num_examples)` examples it records in state.json how far
       it got and the bucket files' sizes; a killed run's rerun truncates the
       buckets to those sizes and goes on from there, reading but not
       tokenizing the pairs before it. The buckets take as much disk as the
       split's shards until those are written. The length histogram of the
       encoded examples is committed with the rest, so it survives a kill too.
    2. shuffle: per missing shard, read its buckets one at a time, shuffle
       each (seeded by its number), write the shard as `.incomplete` and
       rename it; then delete its buckets.
    The output depends only on the pairs, the encoder, num_shards, seed and
    chunk: a rerun after a kill at any point writes the same bytes.

    Args and return value: as `write_shards`, plus
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
    chunks = max(1, math.ceil(num_examples / (num_shards * chunk)))
    sizes = bucket_sizes(num_examples, num_shards * chunks, seed)
    layout = {"num_examples": num_examples, "num_shards": num_shards, "chunks": chunks, "seed": seed}
    name = os.path.basename(prefix)
    state = _scatter(pairs, encode, directory, layout, todo, sizes, name, log)
    if on_lengths is not None and state.get("lengths") is not None and state["todo"] == list(range(num_shards)):
        on_lengths(_sorted(state["lengths"]))
    wanted = sum(int(sizes[k * chunks:(k + 1) * chunks].sum()) for k in todo)
    progress = Progress(name, wanted, log, what="examples shuffled into shards")
    for k in todo:
        buckets = range(k * chunks, (k + 1) * chunks)
        records = itertools.chain.from_iterable(_shuffled_bucket(directory, b, seed) for b in buckets)
        _write_shard(paths[k], records, int(sizes[buckets.start:buckets.stop].sum()), progress)
        for b in buckets:
            _remove(_bucket_path(directory, b))
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


def _state_path(directory: str) -> str:
    return os.path.join(directory, "state.json")


def _remove(path: str) -> None:
    if os.path.exists(path):
        os.remove(path)


def _load_scatter_state(directory: str, layout: dict, todo: list[int]) -> dict | None:
    """The state of an earlier scatter of this layout that covered every shard in `todo`, else None."""
    try:
        with open(_state_path(directory), encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, ValueError):
        return None
    if state.get("layout") != layout or not set(todo) <= set(state.get("todo", [])):
        return None
    return state


def _save_scatter_state(directory: str, state: dict) -> None:
    atomic_write_text(_state_path(directory), json.dumps(state) + "\n")


def _scatter(pairs: PairSource, encode: Encoder, directory: str, layout: dict, todo: list[int],
             sizes: np.ndarray, name: str, log) -> dict:
    """Pass 1 of write_shuffled_shards: fills (or finishes filling) the bucket files of the shards in `todo`.

    Returns the final state: {"todo": the shards it covers, "lengths": their length histogram
    (None for a scatter an earlier t2t-lite began, which kept none), ...}.
    """
    num_buckets, chunks = len(sizes), layout["chunks"]
    state = _load_scatter_state(directory, layout, todo)
    if state is None:
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        state = {"layout": layout, "todo": todo, "next": 0, "bytes": [0] * num_buckets,
                 "counts": [0] * num_buckets, "lengths": {}, "complete": False}
        _save_scatter_state(directory, state)
    if state["complete"]:
        return state
    lengths = state.setdefault("lengths", None)
    wanted = np.zeros(num_buckets, bool)
    for k in state["todo"]:
        wanted[k * chunks:(k + 1) * chunks] = True
    for bucket in np.flatnonzero(wanted):
        # Drop what a killed run appended after its last commit.
        with open(_bucket_path(directory, bucket), "ab") as f:
            f.truncate(state["bytes"][bucket])
    expected = int(sizes[wanted].sum())
    progress = Progress(name, expected, log, every=math.inf, done=int(np.asarray(state["counts"])[wanted].sum()),
                        what="examples encoded")
    start, num_examples = state["next"], layout["num_examples"]
    batches = _scatter_batches(itertools.islice(enumerate(pairs()), start, None), wanted, num_examples,
                               layout["seed"])
    pending: dict[int, list[bytes]] = {}
    pending_bytes = [0] * num_buckets

    def flush(bucket: int) -> None:
        with open(_bucket_path(directory, bucket), "ab") as f:
            f.write(b"".join(pending.pop(bucket)))
        state["bytes"][bucket] += pending_bytes[bucket]
        pending_bytes[bucket] = 0

    since_commit, every = 0, _commit_every(num_examples)
    for record, tag, length in _serialized(_encoded_batches(batches, encode)):
        if tag < 0:
            raise UserError(f"{progress.name} text has more than the {num_examples} pairs counted "
                            "before writing; did the input files change during datagen?")
        index, bucket = divmod(tag, num_buckets)
        pending.setdefault(bucket, []).append(struct.pack("<I", len(record)) + record)
        pending_bytes[bucket] += 4 + len(record)
        state["counts"][bucket] += 1
        if lengths is not None:
            lengths[str(length)] = lengths.get(str(length), 0) + 1
        if pending_bytes[bucket] >= _FLUSH_BYTES:
            flush(bucket)
        progress.done += 1
        since_commit += 1
        if since_commit >= every:
            for b in list(pending):
                flush(b)
            state["next"], since_commit = index + 1, 0
            _save_scatter_state(directory, state)
            progress.report()
    for b in list(pending):
        flush(b)
    if progress.done != expected:
        raise UserError(f"{progress.name}: the text ended after {progress.done} of the {expected} pairs "
                        "counted before writing; did the input files change?")
    state["next"], state["complete"] = num_examples, True
    _save_scatter_state(directory, state)
    progress.report()
    return state


def _scatter_batches(indexed_pairs: Iterator[tuple[int, tuple[str, str]]], wanted: np.ndarray,
                     num_examples: int, seed: int) -> Iterator[tuple[list[str], list[str], list[int]]]:
    """(sources, targets, tags) batches of the pairs whose bucket is wanted; tag = index * num_buckets + bucket.

    Pairs beyond `num_examples` get tag -1, so the writer can report that the text changed.
    """
    num_buckets = len(wanted)
    while chunk := list(itertools.islice(indexed_pairs, _ENCODE_BATCH)):
        indices = np.array([i for i, _ in chunk], np.int64)
        buckets = shuffle_buckets(indices, num_buckets, seed)
        keep = wanted[buckets] | (indices >= num_examples)
        tags = np.where(indices >= num_examples, -1, indices * num_buckets + buckets)[keep].tolist()
        if tags:
            kept = [pair for (_, pair), k in zip(chunk, keep) if k]
            yield [src for src, _ in kept], [tgt for _, tgt in kept], tags


def _sorted(lengths: LengthHistogram) -> LengthHistogram:
    """The histogram by increasing length, so the same examples always give the same JSON."""
    return {key: lengths[key] for key in sorted(lengths, key=int)}


def count_longer(lengths: LengthHistogram, max_length: int) -> int:
    """How many examples of a length histogram are longer than max_length."""
    return sum(count for length, count in lengths.items() if int(length) > max_length)


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


def _indexed_batches(pairs: Iterable[tuple[str, str]]) -> Iterator[tuple[list[str], list[str], list[int]]]:
    """(sources, targets, tags) of up to _ENCODE_BATCH pairs; every tag is 0 (the contiguous layout needs none)."""
    pairs = iter(pairs)
    while chunk := list(itertools.islice(pairs, _ENCODE_BATCH)):
        sources, targets = zip(*chunk)
        yield list(sources), list(targets), [0] * len(chunk)


def _encoded_batches(batches: Iterator[tuple[list[str], list[str], list[int]]], encode: Encoder) -> Iterator[tuple]:
    """(inputs, targets) ragged ids of each (sources, targets, tags) batch, tokenized on all cores by tf.data.

    The tags (int64, one per pair) pass through untouched, so the writer knows
    where each example goes.
    """
    # The generator yields whole batches: from_generator costs ~90us per element,
    # which per pair would cap datagen near 11k examples/s.
    text = tf.data.Dataset.from_generator(
        lambda: batches, output_signature=(tf.TensorSpec([None], tf.string),) * 2 + (tf.TensorSpec([None], tf.int64),))
    encoded = (text.map(lambda src, tgt, tags: (encode(src), encode(tgt), tags),
                        num_parallel_calls=tf.data.AUTOTUNE)
               .prefetch(tf.data.AUTOTUNE))
    return iter(encoded)


def _serialized(batches: Iterator[tuple]) -> Iterator[tuple[bytes, int, int]]:
    """(serialized tf.train.Example, tag, max(len(inputs), len(targets))) per row of each batch, in order."""
    for inputs, targets, tags in batches:
        # Slicing Python lists is much faster than slicing RaggedTensors row by row.
        in_ids, in_splits = inputs.flat_values.numpy().tolist(), inputs.row_splits.numpy().tolist()
        tgt_ids, tgt_splits = targets.flat_values.numpy().tolist(), targets.row_splits.numpy().tolist()
        for row, tag in enumerate(tags.numpy().tolist()):
            yield (serialize_example(in_ids[in_splits[row]:in_splits[row + 1]],
                                     tgt_ids[tgt_splits[row]:tgt_splits[row + 1]]), tag,
                   max(in_splits[row + 1] - in_splits[row], tgt_splits[row + 1] - tgt_splits[row]))


def _write_shard(path: str, examples: Iterable[bytes], expected: int, progress: "Progress") -> None:
    """Writes `path` + ".incomplete", renames it to `path` if it holds `expected` examples.

    Any failure, including Ctrl-C, removes the partial file.
    """
    partial, written = path + INCOMPLETE, 0
    try:
        with tf.io.TFRecordWriter(partial) as writer:
            for record in examples:
                writer.write(record)
                written += 1
                progress.advance()
        if written != expected:
            raise UserError(f"{os.path.basename(path)}: the text ended after {written} of the "
                            f"{expected} pairs counted before writing; did the input files change?")
        os.replace(partial, path)
    except BaseException:
        if os.path.exists(partial):
            os.remove(partial)
        raise
    progress.shard_done(path)


class Progress:
    """Progress lines on stderr: one per finished shard, one every `every` seconds in between.

    Args:
      name: what is being written, e.g. "train".
      total: examples this run will write (or, resuming, has written and will write).
      log: where lines go (default stderr).
      every: seconds between lines within a shard.
      done: examples an earlier run already wrote; the rate counts only this run's.
      what: how the lines name the examples, e.g. "examples encoded".
    """

    def __init__(self, name: str, total: int, log=None, every: float = 10.0, done: int = 0,
                 what: str = "examples"):
        self.name, self.total, self.every, self.what = name, total, every, what
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.done = self._first = done
        self._start = self._last = time.monotonic()

    def advance(self) -> None:
        self.done += 1
        if self.done % 1000 == 0 and time.monotonic() - self._last >= self.every:
            self.report("")

    def shard_done(self, path: str) -> None:
        self.report(f" ({os.path.basename(path)} done)")

    def report(self, suffix: str = "") -> None:
        """Logs done/total, this run's rate and the time left, then `suffix`."""
        self._last = time.monotonic()
        elapsed = max(self._last - self._start, 1e-9)
        rate = (self.done - self._first) / elapsed
        left = (self.total - self.done) / rate if rate else 0.0
        self.log(f"{self.name}: {self.done:,}/{self.total:,} {self.what}, {rate:,.0f} examples/s, "
                 f"{left:.0f}s left{suffix}")


def read_records(files: str | list[str]) -> tf.data.Dataset:
    """The examples of TFRecord shards, one from each shard in turn, in a fixed order.

    Args:
      files: a glob pattern or a list of paths; `.incomplete` files are never read.
    Returns:
      Unbatched {"inputs": int32 [T_src], "targets": int32 [T_tgt]}.
    """
    paths = sorted(tf.io.gfile.glob(files)) if isinstance(files, str) else list(files)
    paths = [p for p in paths if not p.endswith(INCOMPLETE)]
    if not paths:
        raise UserError(f"no TFRecord files match {files!r}")
    features = {"inputs": tf.io.VarLenFeature(tf.int64), "targets": tf.io.VarLenFeature(tf.int64)}

    def parse(record):
        example = tf.io.parse_single_example(record, features)
        return {name: tf.cast(example[name].values, tf.int32) for name in features}

    records = tf.data.Dataset.from_tensor_slices(paths).interleave(
        tf.data.TFRecordDataset, cycle_length=len(paths), block_length=1)
    return records.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
