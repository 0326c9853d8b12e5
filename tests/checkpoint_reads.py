"""Whether a checkpoint really loads, for the tests of crash safety and resuming."""
import tensorflow as tf


def assert_every_tensor_reads(path):
    """Reads every tensor of checkpoint `path`, the data iterator's state too; raises if a file is truncated.

    get_variable_to_shape_map() alone reads only the .index file, which a truncated .data leaves intact.
    """
    dtypes = tf.train.load_checkpoint(path).get_variable_to_dtype_map()
    names = sorted(dtypes)
    assert names
    tf.raw_ops.RestoreV2(prefix=path, tensor_names=names, shape_and_slices=[""] * len(names),
                         dtypes=[dtypes[name] for name in names])
