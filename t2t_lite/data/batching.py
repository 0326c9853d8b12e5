"""Length bucketing and token-based batches, as tensor2tensor builds them."""
import tensorflow as tf


def bucket_boundaries(max_length: int, min_length: int = 8, step: float = 1.1) -> list[int]:
    """tensor2tensor's bucket boundaries: from min_length, growing by x step, below max_length.

    >>> bucket_boundaries(20)
    [8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
    >>> len(bucket_boundaries(256))
    41
    """
    boundaries, x = [], min_length
    while x < max_length:
        boundaries.append(x)
        x = max(x + 1, int(x * step))
    return boundaries


def bucket_batch_sizes(batch_size: int, boundaries: list[int], max_length: int) -> list[int]:
    """Sentences per batch for each bucket so a batch holds about `batch_size` tokens.

    Bucket i holds lengths below boundaries[i]; the last holds lengths up to max_length.

    >>> bucket_batch_sizes(64, [8, 16], 32)
    [8, 4, 2]
    """
    return [max(1, batch_size // length) for length in boundaries + [max_length]]


def largest_batch_shapes(batch_size: int, max_length: int) -> list[tuple[int, int]]:
    """[rows, length] of the batches that need the most memory among those batch_by_length makes.

    The longest bucket's full batch (attention grows with length squared) and,
    when another bucket's full batch holds more padded tokens, that one too.
    Bucketing by both sides makes no bigger batch: a (source bucket, target
    bucket) batch has the rows of the longer side's bucket and neither side is
    longer than that bucket allows.

    >>> largest_batch_shapes(4096, 256)
    [(16, 256)]
    """
    boundaries = bucket_boundaries(max_length)
    # Bucket i holds lengths below boundaries[i]; the last holds lengths up to max_length.
    lengths = [bound - 1 for bound in boundaries] + [max_length]
    shapes = list(zip(bucket_batch_sizes(batch_size, boundaries, max_length), lengths))
    longest = shapes[-1]
    most_tokens = max(shapes, key=lambda shape: (shape[0] * shape[1], shape[1]))
    return [longest] if most_tokens[0] * most_tokens[1] <= longest[0] * longest[1] else [longest, most_tokens]


def example_length(example) -> tf.Tensor:
    """max(len(inputs), len(targets)): the length an example is bucketed by."""
    return tf.maximum(tf.shape(example["inputs"])[0], tf.shape(example["targets"])[0])


def bucket_index(length, boundaries: list[int]) -> tf.Tensor:
    """The bucket of a length: how many boundaries are <= length (bucket i holds lengths below boundaries[i])."""
    return tf.reduce_sum(tf.cast(length >= tf.constant(boundaries, tf.int32), tf.int32))


def batch_by_length(dataset: tf.data.Dataset, batch_size: int, max_length: int, drop_long: bool = True,
                    pad_to_boundary: bool = False, both_sides: bool = False) -> tf.data.Dataset:
    """Groups examples of similar length into batches of about `batch_size` tokens.

    Args:
      dataset: unbatched {"inputs" [T_src], "targets" [T_tgt]} examples.
      batch_size: tokens per batch (t2t's batch_size), counted on the padded longer side.
      max_length: longest example kept; longer ones are dropped when drop_long,
        else batched alone-ish in the last bucket.
      drop_long: drop examples longer than max_length (training does; t2t does too).
      pad_to_boundary: pad each batch to its bucket's upper bound instead of its
        longest example, so XLA sees a fixed set of shapes. Buckets by the longer side.
      both_sides: bucket by the pair (source bucket, target bucket) instead of by
        max(len(inputs), len(targets)) alone; see `_batch_by_both_lengths`.
    Returns:
      Batches {"inputs" int32 [B, T_src], "targets" int32 [B, T_tgt]}, PAD = 0.
    """
    if drop_long:
        dataset = dataset.filter(lambda ex: example_length(ex) <= max_length)
    boundaries = bucket_boundaries(max_length)
    sizes = bucket_batch_sizes(batch_size, boundaries, max_length)
    if both_sides and not pad_to_boundary:
        return _batch_by_both_lengths(dataset, boundaries, sizes)
    if pad_to_boundary:
        # tf.data pads bucket i to boundaries[i] - 1; the last bucket needs a bound too.
        boundaries = boundaries + [max_length + 1]
        sizes = sizes + [sizes[-1]]
    return dataset.bucket_by_sequence_length(
        element_length_func=example_length, bucket_boundaries=boundaries, bucket_batch_sizes=sizes,
        padded_shapes={"inputs": [None], "targets": [None]}, pad_to_bucket_boundary=pad_to_boundary)


def _batch_by_both_lengths(dataset: tf.data.Dataset, boundaries: list[int], sizes: list[int]) -> tf.data.Dataset:
    """Batches examples whose source lengths share a bucket and whose target lengths share a bucket.

    Bucketing by max(source, target) alone pads the shorter side of every pair
    up to the batch's longest: when the two lengths vary independently, about a
    fifth of each side is padding, and padded target positions are the costly
    ones (each goes through the decoder and the [D, V] softmax). With a bucket
    per (source bucket, target bucket), both sides stay close to their own
    lengths. A batch holds sizes[max(source bucket, target bucket)] examples,
    so its padded longer side stays within batch_size tokens, as with one key.

    Examples wait in their bucket until it is full: a rare pair of lengths waits
    longer (the dataset repeats, so each example is still seen as often).
    """
    grid = len(sizes)  # buckets per side: len(boundaries) + 1
    sizes = tf.constant(sizes, tf.int64)

    def key(example):
        source = bucket_index(tf.shape(example["inputs"])[0], boundaries)
        target = bucket_index(tf.shape(example["targets"])[0], boundaries)
        return tf.cast(source * grid + target, tf.int64)

    def rows(bucket):  # the bucket of the longer side decides, as it would alone
        return tf.gather(sizes, tf.maximum(bucket // grid, bucket % grid))

    return dataset.group_by_window(key_func=key, window_size_func=rows, reduce_func=lambda bucket, window: (
        window.padded_batch(rows(bucket), padded_shapes={"inputs": [None], "targets": [None]})))
