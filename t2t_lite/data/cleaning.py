"""Cleaning the training pairs: the three rules WMT pipelines apply first (Moses' clean-corpus-n and its kin).

A `PairFilter` drops, from the train split only (dev and test are scored against their references, so
they keep every line):
  length ratio  the longer side is more than `max_length_ratio` times the shorter (a misaligned pair,
                or one side cut short); 0 turns the rule off.
  copies        the source equals the target, whitespace aside (untranslated text, numbers, URLs).
  duplicates    the same (source, target) pair seen earlier in the corpus; the first is kept.

Lengths are characters other than whitespace, not words or pieces: words (whitespace-split) count a
whole unspaced CJK sentence as one, and pieces do not exist yet when the first pass decides (the
vocabulary is trained from what that pass keeps). The shorter side counts as at least
`MIN_RATIO_CHARS` characters, so that a short pair ("Ja." / "Yes, indeed.") is not dropped by the
noise of a ratio between small numbers.

Decisions depend only on the pairs and their order, so datagen's two passes (the vocabulary sample
and the encoding) each build a fresh filter and keep exactly the same pairs.
"""
import dataclasses
import hashlib

import numpy as np

# The shorter side's length in a ratio is at least this many characters (about two short words).
MIN_RATIO_CHARS = 12


@dataclasses.dataclass(frozen=True)
class CleaningRules:
    """Which rules apply; the not-cleaned values are the defaults (what data_dirs from before cleaning had)."""

    # Drop pairs whose longer side has more than this many times the shorter's characters; 0: off.
    max_length_ratio: float = 0.0
    # Drop pairs whose source equals their target.
    drop_copies: bool = False
    # Drop repeats of a (source, target) pair seen earlier.
    drop_duplicates: bool = False

    @property
    def any(self) -> bool:
        return bool(self.max_length_ratio or self.drop_copies or self.drop_duplicates)


NOT_CLEANED = CleaningRules()
# The translation problems' default (translate_files, wmt_ende, wmt_enfr); the ratio is chosen in
# docs/problems.md from benchmarks/logs/2026-12-02-cleaning-ratios.txt.
TRANSLATION_CLEANING = CleaningRules(max_length_ratio=3.0, drop_copies=True, drop_duplicates=True)


def length_ratio(src: str, tgt: str) -> float:
    """The longer side's characters other than whitespace over the shorter's, the shorter counted as at least
    MIN_RATIO_CHARS."""
    a, b = (len("".join(text.split())) for text in (src, tgt))
    return max(a, b) / max(min(a, b), MIN_RATIO_CHARS)


def is_copy(src: str, tgt: str) -> bool:
    """Whether the two sides are the same text, whitespace aside."""
    return src.split() == tgt.split()


def pair_hash(src: str, tgt: str) -> int:
    """A 64-bit hash of the pair, never 0 (HashSet's empty slot)."""
    digest = hashlib.blake2b(f"{src}\t{tgt}".encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") or 1


class HashSet:
    """A set of nonzero 64-bit ints in one numpy array (open addressing, linear probing).

    8 bytes a slot at a load of at most 3/4: about 0.5 GB for WMT14 En-Fr's ~40M train pairs, where a
    Python set of ints takes about 60 bytes an entry (2.4 GB).
    """

    def __init__(self, capacity: int = 1 << 16):
        self._table = np.zeros(capacity, np.uint64)  # a power of two; 0 marks an empty slot
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, key: int) -> bool:
        """Adds `key` (nonzero, uniformly distributed); whether it was new."""
        table = self._table
        mask = len(table) - 1
        slot = key & mask
        while True:
            held = int(table[slot])
            if held == key:
                return False
            if held == 0:
                table[slot] = key
                self._count += 1
                if self._count * 4 > len(table) * 3:
                    self._grow()
                return True
            slot = (slot + 1) & mask

    def _grow(self) -> None:
        """Doubles the table, reinserting every key at once (vectorised linear probing)."""
        keys = self._table[self._table != 0]
        table = np.zeros(2 * len(self._table), np.uint64)
        mask = np.uint64(len(table) - 1)
        slots = keys & mask
        while keys.size:
            free = np.flatnonzero(table[slots] == 0)
            _, first = np.unique(slots[free], return_index=True)  # one key per free slot
            placed = free[first]
            table[slots[placed]] = keys[placed]
            # The rest probe on.
            keys, slots = np.delete(keys, placed), (np.delete(slots, placed) + np.uint64(1)) & mask
        self._table = table


class PairFilter:
    """Keeps or drops each training pair by `rules`, counting the drops per rule.

    Each pair is charged to the first rule that drops it, in the order length ratio, copies, duplicates.
    """

    def __init__(self, rules: CleaningRules):
        self.rules = rules
        self.kept = 0
        self.dropped = {"length_ratio": 0, "copies": 0, "duplicates": 0}
        self._seen = HashSet() if rules.drop_duplicates else None

    def keep(self, src: str, tgt: str) -> bool:
        rule = self._dropped_by(src, tgt)
        if rule:
            self.dropped[rule] += 1
            return False
        self.kept += 1
        return True

    def _dropped_by(self, src: str, tgt: str) -> str | None:
        if self.rules.max_length_ratio and length_ratio(src, tgt) > self.rules.max_length_ratio:
            return "length_ratio"
        if self.rules.drop_copies and is_copy(src, tgt):
            return "copies"
        if self._seen is not None and not self._seen.add(pair_hash(src, tgt)):
            return "duplicates"
        return None

    def report(self) -> dict:
        """What problem_config.json keeps: {"read", "kept", "dropped": {rule: count}}."""
        return {"read": self.kept + sum(self.dropped.values()), "kept": self.kept, "dropped": dict(self.dropped)}


def report_line(split: str, report: dict) -> str:
    """One line: "cleaned train: kept N of M pairs; dropped a by length ratio, b copies, c duplicates"."""
    dropped = report["dropped"]
    return (f"cleaned {split}: kept {report['kept']:,} of {report['read']:,} pairs; dropped "
            f"{dropped['length_ratio']:,} by length ratio, {dropped['copies']:,} copies, "
            f"{dropped['duplicates']:,} duplicates")
