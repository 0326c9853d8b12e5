"""Writing a split's shards: tokenizing pairs, writing one shard atomically, and the in-order layout.

`write_shards` (dev, test) puts example i of n in the shard whose contiguous
range holds it (`shard_bounds`), in corpus order, so evaluation output stays
line-aligned with the reference. `shuffle.write_shuffled_shards` (train) builds
its random order on the same pieces: `encoded_examples`, `write_shard` and
`Progress`.

A rerun skips every shard that exists under its final name, without even
tokenizing that shard's text; an interrupted run leaves at most the shards it
was writing as stale `.incomplete` files, which the rerun overwrites (never
appends), so no example is ever written twice.

Both layouts report the split's length histogram (`LengthHistogram`), counted
while encoding, so nobody reads the shards back to learn how many examples are
long. Text is tokenized inside tf.data with parallel calls while Python
serializes and writes, so datagen keeps both cores busy; memory holds a few
batches, however large the corpus.
"""
import bisect
import itertools
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import NamedTuple

import tensorflow as tf

from t2t_lite.data.shards import INCOMPLETE, serialize_example, shard_paths
from t2t_lite.errors import UserError

# A function of no arguments that starts the pairs over from the beginning.
PairSource = Callable[[], Iterable[tuple[str, str]]]
# tf.string [B] -> int ragged [B, None], EOS included.
Encoder = Callable[[tf.Tensor], tf.RaggedTensor]
# {str(length): number of examples}, length = max(len(inputs), len(targets)) with EOS, the length
# training buckets and drops by (batching.example_length); string keys, as JSON stores them.
LengthHistogram = dict[str, int]
# A pair with a key: ints the caller needs back with its example (its index, say).
KeyedPair = tuple[tuple[int, ...], tuple[str, str]]

ENCODE_BATCH = 512  # strings per tokenizer call: large enough to amortise the op's overhead.


class EncodedExample(NamedTuple):
    """One tokenized pair, ready to write."""

    record: bytes  # the serialized tf.train.Example
    key: tuple[int, ...]  # its pair's key, as given to encoded_examples
    length: int  # max(len(inputs), len(targets)), EOS included: the length LengthHistogram counts


def shard_bounds(num_examples: int, num_shards: int) -> list[tuple[int, int]]:
    """The contiguous [start, stop) range of example indices in each shard; sizes differ by at most 1.

    >>> shard_bounds(10, 3)
    [(0, 3), (3, 6), (6, 10)]
    """
    return list(itertools.pairwise(num_examples * k // num_shards for k in range(num_shards + 1)))


def write_shards(pairs: PairSource, encode: Encoder, prefix: str, num_examples: int,
                 num_shards: int, log=None, on_lengths: Callable[[LengthHistogram], None] | None = None) -> int:
    """Tokenizes and writes the shards of one split that do not exist yet, in corpus order.

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

    def counted(examples: Iterator[EncodedExample]) -> Iterator[bytes]:
        for example in examples:
            add_length(lengths, example.length)
            yield example.record

    records = counted(encoded_examples(_select(pairs(), wanted, num_examples), encode))
    progress = Progress(os.path.basename(prefix), sum(stop - start for start, stop in wanted), log)
    for k, (start, stop) in zip(todo, wanted):
        write_shard(paths[k], itertools.islice(records, stop - start), stop - start, progress)
    if next(records, None) is not None:
        raise UserError(f"{os.path.basename(prefix)} text has more than the {num_examples} pairs "
                        "counted before writing; did the input files change during datagen?")
    if on_lengths is not None and len(todo) == num_shards:
        on_lengths(sorted_histogram(lengths))
    return len(todo)


def _select(pairs: Iterable[tuple[str, str]], ranges: list[tuple[int, int]], num_examples: int) -> Iterator[KeyedPair]:
    """((index,), pair) of the pairs whose index falls in one of the sorted, disjoint `ranges`,
    then of any beyond `num_examples`, which are passed on so the writer can report that the text changed.
    """
    starts = [start for start, _ in ranges]
    for i, pair in enumerate(pairs):
        r = bisect.bisect_right(starts, i) - 1
        if (r >= 0 and i < ranges[r][1]) or i >= num_examples:
            yield (i,), pair


def add_length(lengths: LengthHistogram, length: int) -> None:
    """Counts one example of `length` in a histogram being built."""
    lengths[str(length)] = lengths.get(str(length), 0) + 1


def sorted_histogram(lengths: Mapping[str, int]) -> LengthHistogram:
    """The histogram by increasing length, so the same examples always give the same JSON."""
    return {key: lengths[key] for key in sorted(lengths, key=int)}


def count_longer(lengths: LengthHistogram, max_length: int) -> int:
    """How many examples of a length histogram are longer than max_length."""
    return sum(count for length, count in lengths.items() if int(length) > max_length)


def log_to_stderr(line: str) -> None:
    """Where datagen's progress lines go unless the caller says otherwise."""
    print(line, file=sys.stderr, flush=True)


def encoded_examples(keyed_pairs: Iterable[KeyedPair], encode: "Encoder | tuple[Encoder, Encoder]"
                     ) -> Iterator[EncodedExample]:
    """Every (key, (source, target)) item tokenized on all cores by tf.data and serialized, in order, with its
    key (ints of one length per item, passed through tokenization untouched).

    `encode` tokenizes both sides, or is (the source's, the target's) where each side has its own vocabulary.
    """
    encode_source, encode_target = encode if isinstance(encode, tuple) else (encode, encode)
    keyed_pairs = iter(keyed_pairs)

    def batches():  # (sources, targets, keys) of up to ENCODE_BATCH pairs, to tokenize in one call
        while chunk := list(itertools.islice(keyed_pairs, ENCODE_BATCH)):
            keys, pairs = zip(*chunk)
            yield [src for src, _ in pairs], [tgt for _, tgt in pairs], list(keys)

    # The generator yields whole batches: from_generator costs ~90us per element,
    # which per pair would cap datagen near 11k examples/s.
    text = tf.data.Dataset.from_generator(
        batches,
        output_signature=(tf.TensorSpec([None], tf.string),) * 2 + (tf.TensorSpec([None, None], tf.int64),))
    encoded = text.map(lambda src, tgt, keys: (encode_source(src), encode_target(tgt), keys),
                       num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    for inputs, targets, keys in encoded:
        # Slicing Python lists is much faster than slicing RaggedTensors row by row.
        in_ids, in_splits = inputs.flat_values.numpy().tolist(), inputs.row_splits.numpy().tolist()
        tgt_ids, tgt_splits = targets.flat_values.numpy().tolist(), targets.row_splits.numpy().tolist()
        for row, key in enumerate(keys.numpy().tolist()):
            yield EncodedExample(serialize_example(in_ids[in_splits[row]:in_splits[row + 1]],
                                                   tgt_ids[tgt_splits[row]:tgt_splits[row + 1]]), tuple(key),
                                 max(in_splits[row + 1] - in_splits[row], tgt_splits[row + 1] - tgt_splits[row]))


def write_shard(path: str, records: Iterable[bytes], expected: int, progress: "Progress") -> None:
    """Writes `path` + ".incomplete", renames it to `path` if it holds `expected` records.

    Any failure, including Ctrl-C, removes the partial file.
    """
    partial, written = path + INCOMPLETE, 0
    try:
        with tf.io.TFRecordWriter(partial) as writer:
            for record in records:
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
    progress.report(f" ({os.path.basename(path)} done)")


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

    def __init__(self, name: str, total: int, log=None, every: float = 10.0, done: int = 0, what: str = "examples"):
        self.name, self.total, self.every, self.what = name, total, every, what
        self.log = log or log_to_stderr
        self.done = self._first = done
        self._start = self._last = time.monotonic()

    def advance(self) -> None:
        self.done += 1
        if self.done % 1000 == 0 and time.monotonic() - self._last >= self.every:
            self.report()

    def report(self, suffix: str = "") -> None:
        """Logs done/total, this run's rate and the time left, then `suffix`."""
        self._last = time.monotonic()
        rate = (self.done - self._first) / max(self._last - self._start, 1e-9)
        left = (self.total - self.done) / rate if rate else 0.0
        self.log(f"{self.name}: {self.done:,}/{self.total:,} {self.what}, {rate:,.0f} examples/s, "
                 f"{left:.0f}s left{suffix}")
