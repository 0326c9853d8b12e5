"""Exact top-k over long rows (a vocabulary of logits), through block maxima.

tf.nn.top_k over a decoding step's [128, 32768] logits is a full sort-like
pass per row; this is several times faster for the same result
(docs/performance.md). One pass takes the maximum of each block of `BLOCK` columns, a small top-k
picks the k best blocks, and a top-k over their k * BLOCK entries gives the
answer. Any entry among the row's k best lies in one of the k blocks with the
best maxima, so nothing is lost.

Ties come out as tf.nn.top_k gives them (the lower index first): blocks tied
on their maximum are taken lower block first, and the chosen blocks are read
in column order, so the final top-k sees candidates in their original order.
"""
import tensorflow as tf

BLOCK = 128  # columns per block: few enough blocks for a cheap first top-k, short enough rows to scan


def block_width(width: int) -> int:
    """Columns per block for rows of `width`: BLOCK, or the divisor of width nearest it within a factor 2
    (8,000 -> 125), so the rows split into whole blocks without a padded copy; BLOCK if there is none."""
    divisors = [d for d in range(BLOCK // 2, 2 * BLOCK + 1) if width % d == 0]
    return min(divisors, key=lambda d: (abs(d - BLOCK), d)) if divisors else BLOCK


def top_k(values, k):
    """tf.nn.top_k(values, k) for a float [N, V] tensor with a static V: (values [N, k], indices int32 [N, k]).

    Rows shorter than 4 * k * BLOCK go straight to tf.nn.top_k (no gain there).
    Where no block width divides V (block_width), columns are padded with -inf
    to a whole number of blocks; padding sits after every real column, so it is
    never picked ahead of a real -inf.
    """
    width = values.shape[-1]
    if width is None or width < 4 * k * BLOCK:
        return tf.nn.top_k(values, k=k)
    rows = tf.shape(values)[0]
    block = block_width(width)
    blocks = -(-width // block)
    if blocks * block != width:
        values = tf.pad(values, [[0, 0], [0, blocks * block - width]], constant_values=float("-inf"))
    by_block = tf.reshape(values, [rows, blocks, block])  # [N, blocks, block]
    _, best_blocks = tf.nn.top_k(tf.reduce_max(by_block, axis=2), k=k)  # [N, k]
    best_blocks = tf.sort(best_blocks, axis=1)  # column order, for tf.nn.top_k's tie rule
    candidates = tf.reshape(tf.gather(by_block, best_blocks, axis=1, batch_dims=1), [rows, k * block])
    top_values, position = tf.nn.top_k(candidates, k=k)  # [N, k] positions in the candidates
    chosen = tf.gather(best_blocks, position // block, batch_dims=1)  # [N, k]
    return top_values, chosen * block + position % block
