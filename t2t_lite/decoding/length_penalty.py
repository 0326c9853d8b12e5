"""The GNMT length penalty (Wu et al. 2016; tensor2tensor's form), the one place it is written.

Without TensorFlow: the beam search applies it to tensors, scoring and the CTranslate2 backend to numbers.
"""


def length_penalty(length, alpha):
    """((5 + length) / 6) ** alpha; a beam hypothesis' score is its log-probability over this.

    Args:
      length: the hypothesis' length counting its EOS: a number, or a float tensor of any shape.
      alpha: 0 turns the penalty off (it is then exactly 1).
    """
    return ((5.0 + length) / 6.0) ** alpha
