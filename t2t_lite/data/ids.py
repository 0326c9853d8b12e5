"""tensor2tensor's reserved ids and what a decoded id sequence means, without TensorFlow.

Decoding an export needs these and nothing of tf.data (a CTranslate2 deployment has no TensorFlow);
t2t_lite.data.problem re-exports them for everything else.
"""
import itertools

# tensor2tensor's reserved ids: padding and end of sentence.
PAD_ID = 0
EOS_ID = 1


def strip_ids(ids) -> list[int]:
    """Ids up to the first EOS, without PAD: what a decoded sequence means.

    [5, 0, 7, 1, 9] -> [5, 7].
    """
    return [i for i in itertools.takewhile(lambda i: i != EOS_ID, map(int, ids)) if i != PAD_ID]
