"""Where a decoder writing a linearised tree stands: its open phrases (the open_phrases decoder feature).

A tree's bracket is well placed only if the decoder counts the phrases it opened and remembers which
one it must close next; a small model writing freely miscounts both. Given them as inputs (the depth
after each input token, and the innermost open phrase's label), it no longer has to.

Which tokens open or close a phrase is a table over the vocabulary, `code` [V]: a phrase label's index
(1, 2, ...) for a token that opens it, CLOSE for a token that closes the innermost phrase, 0 for others.
The state carried between chunks of positions (a decoding step's one) is the depth and a stack of the
labels open at each level.
"""
from keras import ops

CLOSE = -1
# Levels of the stack kept (and depths told apart): deeper phrases read as this deep, with no label.
MAX_DEPTH = 64
# Phrase labels a table can hold, label 0 being "nothing open yet" and the last FINISHED (the PTB has 27).
MAX_LABELS = 64
# The label after the tree's root closed: a state apart from the start's, which the model must not end at.
FINISHED = MAX_LABELS - 1


def open_phrases(code, ids, stack, depth):
    """The open phrases after each of `ids`, continuing from (stack, depth).

    Depths are counted without a floor (a close at depth 0 makes -1), so that chunks of any length give
    the same answers as one pass over the whole sequence, malformed or not.

    Args:
      code: int32 [V], the table of the module doc.
      ids: int [N, T], decoder inputs.
      stack: int32 [N, MAX_DEPTH], the label open at each level (level k: depth k + 1) before ids[:, 0];
        entries at or above the depth are stale and never read.
      depth: int32 [N], the depth before ids[:, 0].
    Returns:
      (depths int32 [N, T] after each input, labels int32 [N, T] the innermost open phrase's label after
      each input (at depth < 1: FINISHED once a root has opened, else 0; 0 at depth > MAX_DEPTH), the stack
      and the depth after the last input).
    """
    codes = ops.take(code, ids)  # [N, T]
    opens = codes > 0
    moves = ops.where(opens, 1, ops.where(ops.equal(codes, CLOSE), -1, 0))
    depths = depth[:, None] + ops.cumsum(moves, axis=1)  # [N, T]
    places = ops.arange(ops.shape(ids)[1], dtype="int32")
    # The innermost phrase after input t was opened by the latest open s <= t that left the same depth:
    # a phrase opened at that depth later would be innermost instead, and any depth below it closes it.
    same_level = (ops.equal(depths[:, :, None], depths[:, None, :]) & opens[:, None, :]
                  & (places[:, None] >= places[None, :])[None])  # [N, T(t), T(s)]
    latest = ops.max(ops.where(same_level, places[None, None, :] + 1, 0), axis=2)  # s + 1, 0 if none
    opened_here = ops.take_along_axis(codes, ops.maximum(latest - 1, 0), axis=1)
    inherited = ops.take_along_axis(stack, ops.clip(depths - 1, 0, MAX_DEPTH - 1), axis=1)
    labels = ops.where(latest > 0, opened_here, inherited)
    # A root has opened once level 0 of the stack is written (by an open that left depth 1).
    rooted = (stack[:, :1] > 0) | (ops.cumsum(ops.cast(opens & ops.equal(depths, 1), "int32"), axis=1) > 0)
    labels = ops.where((depths >= 1) & (depths <= MAX_DEPTH), labels, ops.where((depths < 1) & rooted, FINISHED, 0))
    # Level k of the stack: the latest open in ids that left depth k + 1, else as before.
    levels = ops.arange(1, MAX_DEPTH + 1, dtype="int32")
    at_level = ops.equal(depths[:, :, None], levels[None, None, :]) & opens[:, :, None]  # [N, T, MAX_DEPTH]
    latest_at_level = ops.max(ops.where(at_level, places[None, :, None] + 1, 0), axis=1)  # [N, MAX_DEPTH]
    stack = ops.where(latest_at_level > 0,
                      ops.take_along_axis(codes, ops.maximum(latest_at_level - 1, 0), axis=1), stack)
    return depths, labels, stack, depths[:, -1]
