"""The TFRecord shards of a split on disk: their names, their record format, and the reader.

A split is `num_shards` files `<prefix>-0000k-of-0000n.tfrecord`, each a
TFRecord file of tf.train.Example records with int64 list features "inputs"
and "targets" (tensor2tensor's format). A shard being written is named
`<name>.incomplete` and renamed when complete, so a file under its final name is
always whole and a reader never reads a partial one. Writers:
`shard_writer.write_shards` (examples in corpus order) and
`shuffle.write_shuffled_shards` (in a seeded random order).
"""
import tensorflow as tf

from t2t_lite.errors import UserError

INCOMPLETE = ".incomplete"


def shard_paths(prefix: str, num_shards: int) -> list[str]:
    """Final names of a split's shards.

    >>> shard_paths("/d/train", 2)
    ['/d/train-00000-of-00002.tfrecord', '/d/train-00001-of-00002.tfrecord']
    """
    return [f"{prefix}-{k:05d}-of-{num_shards:05d}.tfrecord" for k in range(num_shards)]


def serialize_example(inputs: list[int], targets: list[int]) -> bytes:
    """One tf.train.Example with int64 list features "inputs" and "targets" (t2t's format)."""
    feature = {name: tf.train.Feature(int64_list=tf.train.Int64List(value=ids))
               for name, ids in (("inputs", inputs), ("targets", targets))}
    # deterministic=True sorts the feature map's keys; otherwise protobuf writes them in a
    # per-process hash order, and a rerun would not reproduce a shard byte for byte.
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(deterministic=True)


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
