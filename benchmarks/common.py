"""Shared pieces of the benchmarks: the peers' synthetic protocol and memory (the ceilings are ceilings.py's)."""
import resource

import numpy as np

# Before anything imports TensorFlow: t2t_lite sets the allocator TensorFlow
# reads when it makes its first tensor.
import t2t_lite  # noqa: F401,E402

PROTOCOL_VOCAB = 32_768


def peak_rss_gib() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def training_corpus(pairs: int = 20_000, seed: int = 1234) -> tuple[list[list[int]], list[list[int]]]:
    """The peers' gen_data.py corpus as model ids (+ EOS): lengths uniform in [10, 50], tokens over 32,765 words.

    Same RNG recipe and order as benchmarks/peers/gen_data.py; word N becomes id N + 3
    there and here (ids 0-2 reserved), so the sequences are identical.
    """
    rng = np.random.default_rng(seed)
    src_len, tgt_len = rng.integers(10, 51, size=pairs), rng.integers(10, 51, size=pairs)
    src = rng.integers(0, PROTOCOL_VOCAB - 3, size=int(src_len.sum())) + 3
    tgt = rng.integers(0, PROTOCOL_VOCAB - 3, size=int(tgt_len.sum())) + 3
    return _split(src, src_len), _split(tgt, tgt_len)


def decode_inputs(sentences: int = 500, seed: int = 4321) -> list[list[int]]:
    """The peers' 500 decode inputs: lengths uniform in [20, 30], as model ids + EOS."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(20, 31, size=sentences)
    tokens = rng.integers(0, PROTOCOL_VOCAB - 3, size=int(lengths.sum())) + 3
    return _split(tokens, lengths)


def _split(tokens: np.ndarray, lengths: np.ndarray) -> list[list[int]]:
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return [tokens[a:b].tolist() + [1] for a, b in zip(offsets[:-1], offsets[1:])]
