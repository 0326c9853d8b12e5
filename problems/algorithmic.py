"""tensor2tensor's algorithmic problems, generated in memory: reverse, copy, addition.

They need no download, so the trainer runs offline on a fresh machine.
"""
import numpy as np
import tensorflow as tf

from t2t_lite.data.problem import EOS_ID, Problem, dataset_from_arrays, flattened, strip_ids
from t2t_lite.registry import problems

_RESERVED = 2  # PAD and EOS come before the symbols.


class AlgorithmicProblem(Problem):
    """Sequences over `num_symbols` symbols, written as the characters of `alphabet`.

    Examples are generated from a fixed seed per split, so every run (and a
    resumed run) sees the same data.
    """

    alphabet = "0123456789"
    min_length, max_length = 1, 20
    split_sizes = {"train": 100_000, "dev": 1000}
    split_seeds = {"train": 1, "dev": 2}
    # Dev loss and accuracy say enough about these smoke tests; decoding at every save would cost more than
    # the training steps between saves. --show_samples reports exact match once, after training.
    dev_metric_sentences = 0

    @property
    def vocab_size(self) -> int:
        return _RESERVED + len(self.alphabet)

    def encode(self, text: str) -> list[int]:
        unknown = sorted(set(text) - set(self.alphabet))
        if unknown:
            raise ValueError(f"characters {unknown} are not in this problem's alphabet {self.alphabet!r}")
        return [_RESERVED + self.alphabet.index(c) for c in text]

    def decode(self, ids) -> str:
        return "".join(self.alphabet[i - _RESERVED] for i in strip_ids(ids) if i - _RESERVED < len(self.alphabet))

    def dev_metric(self, outputs: list[str], references: list[str], sources: list[str]) -> tuple[str, float]:
        """Exact-match accuracy in percent: outputs are digit strings without spaces, so BLEU would mean nothing."""
        if len(outputs) != len(references):
            raise ValueError(f"got {len(outputs)} outputs but {len(references)} references")
        matches = sum(output == reference for output, reference in zip(outputs, references))
        return "exact match", 100.0 * matches / max(len(references), 1)

    def generate(self, rng: np.random.Generator) -> tuple[list[int], list[int]]:
        """One (inputs, targets) pair of symbol ids, without EOS."""
        raise NotImplementedError

    def generate_all(self, rng: np.random.Generator, count: int) -> tuple[np.ndarray, ...]:
        """`count` examples as (inputs, input lengths, targets, target lengths): each side's ids concatenated,
        EOS-terminated. This one calls `generate` per example; a problem may compute them all at once."""
        pairs = [self.generate(rng) for _ in range(count)]
        return (*flattened([inputs + [EOS_ID] for inputs, _ in pairs]),
                *flattened([targets + [EOS_ID] for _, targets in pairs]))

    def dataset(self, split: str) -> tf.data.Dataset:
        self.check_split(split)
        rng = np.random.default_rng(self.split_seeds[split])
        return dataset_from_arrays(*self.generate_all(rng, self.split_sizes[split]))



class SymbolSequences(AlgorithmicProblem):
    """Inputs of random symbols, targets the same (or, with `reverse`, reversed): generated all at once in numpy,
    since a trainer makes the 100,000 training examples at every start."""

    reverse = False

    def generate_all(self, rng, count):
        lengths = rng.integers(self.min_length, self.max_length + 1, count)
        symbols = rng.integers(0, len(self.alphabet), int(lengths.sum())) + _RESERVED
        targets = symbols
        if self.reverse:  # within each example: its start + its last index - the symbol's index in it
            starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
            targets = symbols[2 * starts + np.repeat(lengths, lengths) - 1 - np.arange(len(symbols))]
        ends = np.cumsum(lengths)  # each example's EOS goes in after its last symbol
        return (np.insert(symbols, ends, EOS_ID).astype(np.int32), lengths + 1,
                np.insert(targets, ends, EOS_ID).astype(np.int32), lengths + 1)


@problems.register("algorithmic_reverse")
class AlgorithmicReverse(SymbolSequences):
    """Targets are the inputs reversed (t2t's algorithmic_reverse_*), 10 symbols, length 1-20."""

    reverse = True


@problems.register("algorithmic_copy")
class AlgorithmicCopy(SymbolSequences):
    """Targets equal the inputs (t2t's algorithmic_identity_*), 10 symbols, length 1-20."""


@problems.register("algorithmic_addition")
class AlgorithmicAddition(AlgorithmicProblem):
    """"123+45" -> "168": decimal addition of two numbers of 1-10 digits (t2t's addition_decimal40)."""

    alphabet = "0123456789+"
    min_length, max_length = 1, 10

    def generate(self, rng):
        a, b = (int("".join(map(str, rng.integers(0, 10, int(rng.integers(self.min_length, self.max_length + 1))))))
                for _ in range(2))
        return self.encode(f"{a}+{b}"), self.encode(str(a + b))
