"""Combining several models' next-token predictions into one ensemble distribution."""
import tensorflow as tf


def shared_vocab_size(models) -> int:
    """The vocabulary size every model in `models` has; a ValueError if they differ."""
    sizes = [model.vocab_size for model in models]
    if not sizes:
        raise ValueError("an ensemble needs at least one model")
    if len(set(sizes)) > 1:
        raise ValueError(f"an ensemble's models must share one vocabulary; their vocabulary sizes are {sizes}")
    return sizes[0]


def mean_log_probs(logits):
    """The models' mean log-softmax at one step: float32 [N, V], given each model's logits [N, V].

    The mean of log-probs is the log of the geometric mean of the models'
    distributions, which sums to at most 1, not to 1. The searches renormalise
    whatever they are given (log-softmax over the allowed tokens), so the
    ensemble's distribution is the renormalised geometric mean (Sockeye's
    log-linear ensemble). That renormalisation also makes it the same whether
    a suppressed EOS is masked in each model before averaging or once after.
    """
    return tf.add_n([tf.nn.log_softmax(tf.cast(x, tf.float32)) for x in logits]) / len(logits)
