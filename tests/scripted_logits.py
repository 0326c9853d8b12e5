"""Scripted logits for the search tests: a 4-word vocabulary and bigram symbols_to_logits functions.

Vocabulary: 0 <pad> (also the start id), 1 </s>, 2 a, 3 b.
"""
import numpy as np
import tensorflow as tf

VOCAB = ["<pad>", "</s>", "a", "b"]


def seqs(texts, length):
    """Token ids of space-separated words, PAD-padded: int32 [len(texts), length]."""
    ids = np.zeros([len(texts), length], np.int32)
    for i, text in enumerate(texts):
        words = text.split()
        ids[i, :len(words)] = [VOCAB.index(w) for w in words]
    return ids


def bigram_fn(probs, calls=None, dtype=tf.float32):
    """symbols_to_logits_fn with logits log P(next | previous); rows not in `probs` are uniform.

    probs: {previous word: {next word: probability}}; "<pad>" is the start. calls: a
    tf.Variable counting the model calls.
    """
    table = np.zeros([len(VOCAB), len(VOCAB)], np.float32)  # [V, V]
    for prev, row in probs.items():
        table[VOCAB.index(prev)] = -np.inf
        for word, p in row.items():
            table[VOCAB.index(prev), VOCAB.index(word)] = np.log(p)
    table = tf.constant(table, dtype)

    def fn(ids, step, state):
        if calls is not None:
            calls.assign_add(1)
        return tf.gather(table, ids[:, 0]), state  # [N, V]

    return fn
