"""Combining several models' next-token predictions into one ensemble distribution."""
import tensorflow as tf

from t2t_lite.decoding.search_state import Shortlist


def shared_vocab_size(models) -> int:
    """The vocabulary size every model in `models` has; a ValueError if they differ."""
    sizes = [model.vocab_size for model in models]
    if not sizes:
        raise ValueError("an ensemble needs at least one model")
    if len(set(sizes)) > 1:
        raise ValueError(f"an ensemble's models must share one vocabulary; their vocabulary sizes are {sizes}")
    return sizes[0]


def mean_log_probs(outputs):
    """The models' mean log-softmax at one step: float32 [N, V] given each model's logits [N, V], or a Shortlist
    of float32 [N, W] given each model's Shortlist over the same columns (search_state.Shortlist).

    The mean of log-probs is the log of the geometric mean of the models'
    distributions, which sums to at most 1, not to 1. The searches renormalise
    whatever they are given (log-softmax over the allowed tokens), so the
    ensemble's distribution is the renormalised geometric mean (Sockeye's
    log-linear ensemble). That renormalisation also makes it the same whether
    a suppressed EOS is masked in each model before averaging or once after,
    and whether each model normalises over its whole row or over a shortlist
    holding every allowed token: a row's normaliser is one constant added to
    all its tokens, which the search's own normalisation removes.
    """
    if isinstance(outputs[0], Shortlist):
        return Shortlist(mean_log_probs([output.logits for output in outputs]), outputs[0].ids)
    return tf.add_n([tf.nn.log_softmax(tf.cast(x, tf.float32)) for x in outputs]) / len(outputs)
