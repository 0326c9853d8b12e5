"""Sharded TFRecords of {"inputs", "targets"} id sequences: streaming, restartable writes.

Shard layout: example i of n goes to the shard whose contiguous range holds it
(`shard_bounds`), so shards fill one after another. A shard is written as
`<name>.incomplete` and renamed when complete, so:
- a rerun skips every shard that exists under its final name, without even
  tokenizing that shard's text;
- an interrupted run leaves at most the shards it was writing as stale
  `.incomplete` files, which the rerun overwrites (never appends), so no
  example is ever written twice.
`read_records` interleaves the shards one example at a time, so reading mixes
the corpus's parts (WMT's Europarl, CommonCrawl, News Commentary, ...) even
though each shard holds one contiguous part.

Text is tokenized inside tf.data with parallel calls while Python serializes
and writes, so datagen keeps both cores busy; memory holds a few batches,
however large the corpus.
"""
import bisect
import itertools
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator

import tensorflow as tf

from t2t_lite.errors import UserError

# A function of no arguments that starts the pairs over from the beginning.
PairSource = Callable[[], Iterable[tuple[str, str]]]
# tf.string [B] -> int ragged [B, None], EOS included.
Encoder = Callable[[tf.Tensor], tf.RaggedTensor]

INCOMPLETE = ".incomplete"
_ENCODE_BATCH = 512  # strings per tokenizer call: large enough to amortise the op's overhead.


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
                 num_shards: int, log=None) -> int:
    """Tokenizes and writes the shards of one split that do not exist yet.

    Args:
      pairs: restarts the split's (source, target) texts; must yield exactly
        `num_examples` pairs, in the same order on every call.
      encode: tokenizer, run inside tf.data; its output is written as is.
      prefix: shard path prefix, e.g. "<data_dir>/train".
      num_examples: pairs in the split.
      num_shards: shards in the split.
      log: progress lines go here (default: stderr).
    Returns:
      The number of shards written by this call (0 when all existed).
    """
    paths = shard_paths(prefix, num_shards)
    bounds = shard_bounds(num_examples, num_shards)
    todo = [k for k in range(num_shards) if not os.path.exists(paths[k])]
    if not todo:
        return 0
    wanted = [bounds[k] for k in todo]
    examples = _serialized(_encoded_batches(_select(pairs(), wanted, num_examples), encode))
    progress = Progress(os.path.basename(prefix), sum(stop - start for start, stop in wanted), log)
    for k in todo:
        start, stop = bounds[k]
        _write_shard(paths[k], itertools.islice(examples, stop - start), stop - start, progress)
    if next(examples, None) is not None:
        raise UserError(f"{os.path.basename(prefix)} text has more than the {num_examples} pairs "
                        "counted before writing; did the input files change during datagen?")
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


def _encoded_batches(pairs: Iterator[tuple[str, str]], encode: Encoder) -> Iterator[tuple]:
    """Batches of (inputs, targets) ragged ids, tokenized on all cores by tf.data."""
    # The generator yields whole batches: from_generator costs ~90us per element,
    # which per pair would cap datagen near 11k examples/s.
    text = tf.data.Dataset.from_generator(
        lambda: _text_batches(pairs), output_signature=(tf.TensorSpec([None], tf.string),) * 2)
    batches = (text.map(lambda src, tgt: (encode(src), encode(tgt)), num_parallel_calls=tf.data.AUTOTUNE)
               .prefetch(tf.data.AUTOTUNE))
    return iter(batches)


def _text_batches(pairs: Iterator[tuple[str, str]]) -> Iterator[tuple[list[str], list[str]]]:
    """(sources, targets) lists of up to _ENCODE_BATCH pairs."""
    while chunk := list(itertools.islice(pairs, _ENCODE_BATCH)):
        sources, targets = zip(*chunk)
        yield list(sources), list(targets)


def _serialized(batches: Iterator[tuple]) -> Iterator[bytes]:
    """One serialized tf.train.Example per row of each batch, in order."""
    for inputs, targets in batches:
        # Slicing Python lists is much faster than slicing RaggedTensors row by row.
        in_ids, in_splits = inputs.flat_values.numpy().tolist(), inputs.row_splits.numpy().tolist()
        tgt_ids, tgt_splits = targets.flat_values.numpy().tolist(), targets.row_splits.numpy().tolist()
        for row in range(len(in_splits) - 1):
            yield serialize_example(in_ids[in_splits[row]:in_splits[row + 1]],
                                    tgt_ids[tgt_splits[row]:tgt_splits[row + 1]])


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
      total: examples this run will write.
      log: where lines go (default stderr).
      every: seconds between lines within a shard.
    """

    def __init__(self, name: str, total: int, log=None, every: float = 10.0):
        self.name, self.total, self.every = name, total, every
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.done = 0
        self._start = self._last = time.monotonic()

    def advance(self) -> None:
        self.done += 1
        if self.done % 1000 == 0 and time.monotonic() - self._last >= self.every:
            self._report("")

    def shard_done(self, path: str) -> None:
        self._report(f" ({os.path.basename(path)} done)")

    def _report(self, suffix: str) -> None:
        self._last = time.monotonic()
        elapsed = max(self._last - self._start, 1e-9)
        rate = self.done / elapsed
        left = (self.total - self.done) / rate if rate else 0.0
        self.log(f"{self.name}: {self.done:,}/{self.total:,} examples, {rate:,.0f} examples/s, "
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
