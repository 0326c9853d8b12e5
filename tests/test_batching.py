"""Length bucketing and token-based batches."""
import numpy as np

from t2t_lite.data.batching import batch_by_length, bucket_batch_sizes, bucket_boundaries, largest_batch_shapes
from t2t_lite.data.problem import dataset_from_lists


def test_boundaries_follow_t2t():
    boundaries = bucket_boundaries(256)
    assert len(boundaries) == 41 and boundaries[0] == 8 and boundaries[-1] < 256
    for a, b in zip(boundaries, boundaries[1:]):
        assert b == max(a + 1, int(a * 1.1))


def test_batch_sizes_keep_tokens_under_budget():
    boundaries = bucket_boundaries(64)
    sizes = bucket_batch_sizes(1000, boundaries, 64)
    assert sizes[0] == 1000 // 8 and sizes[-1] == 1000 // 64
    assert all(size * bound <= 1000 for size, bound in zip(sizes, boundaries + [64]))


def test_batches_hold_every_short_example_once_and_drop_long_ones():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 40, size=300)
    inputs = [[int(i) + 2] * int(n) + [1] for i, n in enumerate(lengths)]
    targets = [[3] * int(rng.integers(1, 30)) + [1] for _ in lengths]
    dataset = batch_by_length(dataset_from_lists(inputs, targets), batch_size=200, max_length=32)
    seen, padded_tokens, real_tokens = [], 0, 0
    for batch in dataset:
        x, y = batch["inputs"].numpy(), batch["targets"].numpy()
        assert x.shape[0] * max(x.shape[1], y.shape[1]) <= 200 or x.shape[0] == 1
        seen.extend(int(row[0]) - 2 for row in x)
        padded_tokens += x.size
        real_tokens += int((x != 0).sum())
    expected = [i for i, row in enumerate(inputs) if max(len(row), len(targets[i])) <= 32]
    assert sorted(seen) == expected
    assert real_tokens / padded_tokens > 0.7  # bucketing keeps padding low


def test_pad_to_boundary_gives_fixed_shapes():
    # Lengths 2..30 (EOS included) each once, but none at the top of its bucket (7, 23, 25, 27, 29), so padding
    # to a batch's longest example would give other widths.
    inputs = [[2] * (n - 1) + [1] for n in range(2, 31) if n not in (7, 23, 25, 27, 29)]
    dataset = batch_by_length(dataset_from_lists(inputs, inputs), 64, 32, pad_to_boundary=True)
    allowed = sorted({b - 1 for b in bucket_boundaries(32)} | {32})
    seen = []
    for batch in dataset:
        x, y = batch["inputs"].numpy(), batch["targets"].numpy()
        lengths = (x != 0).sum(axis=1)
        seen.extend(lengths.tolist())
        # Padded to the smallest fixed width that holds its longest example, not to that example.
        assert x.shape[1] == y.shape[1] == min(width for width in allowed if width >= lengths.max())
    assert sorted(seen) == [len(row) for row in inputs]  # every example, once


def test_largest_batch_shapes_are_the_longest_and_the_fullest_batches_the_pipeline_makes():
    for batch_size, max_length in [(200, 40), (64, 20), (50, 20), (50, 32)]:  # the last two: two shapes
        # Enough examples of every length to fill every bucket's batches.
        inputs = [[2] * (n - 1) + [1] for n in range(1, max_length + 1) for _ in range(batch_size // n + 1)]
        shapes = {tuple(batch["inputs"].shape) for batch in batch_by_length(
            dataset_from_lists(inputs, inputs), batch_size, max_length)}
        longest = max(shapes, key=lambda shape: (shape[1], shape[0]))
        fullest = max(shapes, key=lambda shape: (shape[0] * shape[1], shape[1]))
        assert set(largest_batch_shapes(batch_size, max_length)) == {longest, fullest}


def _independent_lengths(count, seed=0):
    """Pairs whose source and target lengths (10-50, with EOS) vary independently, as in the benchmark corpus."""
    rng = np.random.default_rng(seed)
    inputs = [[int(i) % 1000 + 2] * int(rng.integers(10, 51)) + [1] for i in range(count)]
    targets = [[5] * int(rng.integers(10, 51)) + [1] for _ in range(count)]
    return inputs, targets


def _lengths(batch, side):
    return (batch[side].numpy() != 0).sum(axis=1)


def test_both_sides_batches_hold_every_example_once_within_one_bucket_per_side_and_the_budget():
    inputs, targets = _independent_lengths(3000)
    boundaries = bucket_boundaries(64)
    seen = []
    for batch in batch_by_length(dataset_from_lists(inputs, targets), 1024, 64, both_sides=True):
        x, y = batch["inputs"].numpy(), batch["targets"].numpy()
        assert x.shape[0] * max(x.shape[1], y.shape[1]) <= 1024
        for side in ("inputs", "targets"):
            lengths = _lengths(batch, side)
            assert len(set(np.searchsorted(boundaries, lengths, side="right"))) == 1, (side, lengths)
            assert batch[side].shape[1] == lengths.max()  # padded to the batch's longest, not further
        seen.extend(int(row[0]) for row in x)
    assert sorted(seen) == sorted(row[0] for row in inputs)


def test_both_sides_pads_far_less_than_the_longer_side_alone_when_lengths_are_independent():
    inputs, targets = _independent_lengths(6000)

    def real_fraction(both_sides):
        dataset = batch_by_length(dataset_from_lists(inputs, targets).repeat(), 2048, 64, both_sides=both_sides)
        padded = real = 0
        for batch in dataset.take(60):
            padded += batch["targets"].shape[0] * batch["targets"].shape[1]
            real += int(_lengths(batch, "targets").sum())
        return real / padded

    longer_side, both = real_fraction(False), real_fraction(True)
    assert longer_side < 0.85 and both > 0.93, (longer_side, both)
