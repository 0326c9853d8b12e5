"""The shard format and its reader: records written by hand read back exactly, interleaved, int32."""
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from t2t_lite.data.shards import INCOMPLETE, read_records, serialize_example, shard_paths
from t2t_lite.errors import UserError

# A process left alone wrote the keys unsorted in about a third of the runs seen: 29 more alike after this one
# would be under 1 in 10^5.
MAX_PROCESSES = 30


def serialized_and_left_alone() -> tuple[str, bool]:
    """serialize_example's bytes (hex), and whether this process's protobuf, left to itself, sorts the map's keys.

    protobuf (upb) orders a map by a hash seeded once per process: its order changes from one run of the same
    interpreter to the next even with a fixed PYTHONHASHSEED, and a fork keeps its parent's.
    """
    left_alone = tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature(int64_list=tf.train.Int64List(value=ids))
        for name, ids in (("inputs", [5, 6]), ("targets", [7, 1]))})).SerializeToString()
    return serialize_example([5, 6], [7, 1]).hex(), left_alone.index(b"inputs") < left_alone.index(b"targets")


def test_serialized_examples_are_byte_stable():
    record = serialize_example([5, 6], [7, 1])
    features = tf.train.Example.FromString(record).features.feature
    assert list(features["inputs"].int64_list.value) == [5, 6]
    assert list(features["targets"].int64_list.value) == [7, 1]
    # Sorted keys whatever this process's hash seed, so a rerun reproduces a shard byte for byte.
    assert record.index(b"inputs") < record.index(b"targets")


@pytest.mark.slow
def test_processes_whose_protobuf_orders_maps_differently_write_the_same_bytes():
    """A rerun of datagen is another process: its records must be this process's, byte for byte.

    Fresh interpreters (not forks, which share the seed) are started until two of the processes, this one
    included, order the map differently when left alone, so that a record written in that order would show.
    """
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
            "from test_shards import serialized_and_left_alone; print(*serialized_and_left_alone())")
    record, is_sorted = serialized_and_left_alone()
    records, left_alone_sorted, processes = {record}, {is_sorted}, 1
    while len(left_alone_sorted) < 2 and processes < MAX_PROCESSES:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONHASHSEED": str(processes)})
        assert done.returncode == 0, done.stderr[-2000:]
        record, is_sorted = done.stdout.split()
        records.add(record)
        left_alone_sorted.add(is_sorted == "True")
        processes += 1
    assert left_alone_sorted == {True, False}, f"{processes} processes all ordered the map alike"
    assert len(records) == 1, f"{len(records)} different records from {processes} processes"


def test_reader_interleaves_shards_as_int32_and_skips_incomplete_files(tmp_path):
    prefix = str(tmp_path / "dev")
    shards = [[([1, 2], [3, 1]), ([4], [5, 6, 1]), ([7, 7, 7], [1])], [([8], [9, 1]), ([10, 11], [1])]]
    paths = shard_paths(prefix, len(shards))
    for path, examples in zip(paths, shards):
        with tf.io.TFRecordWriter(path) as writer:
            for inputs, targets in examples:
                writer.write(serialize_example(inputs, targets))
    with tf.io.TFRecordWriter(paths[0] + INCOMPLETE) as writer:  # what a killed writer leaves
        writer.write(serialize_example([99], [99]))

    dataset = read_records(prefix + "-*")
    assert dataset.element_spec["inputs"].dtype == tf.int32 and dataset.element_spec["targets"].dtype == tf.int32
    read = [(ex["inputs"].tolist(), ex["targets"].tolist()) for ex in dataset.as_numpy_iterator()]
    # One example from each shard in turn; the longer shard's rest at the end.
    assert read == [shards[0][0], shards[1][0], shards[0][1], shards[1][1], shards[0][2]]


def test_no_files_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no TFRecord files"):
        read_records(str(tmp_path / "nothing-*"))
