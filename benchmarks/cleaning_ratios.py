"""Pairs the length-ratio rule drops at ratios 1.5, 2, 3 and 9 on the shared WMT En-De and Europarl
Fr-En samples, with two examples each, to choose its default (data/cleaning.py, docs/problems.md).

  python benchmarks/cleaning_ratios.py > benchmarks/logs/2026-12-02-cleaning-ratios.txt

Ratios are of characters other than whitespace, the shorter side counted as at least MIN_RATIO_CHARS.
The examples at a ratio are drawn (seeded) from the pairs dropped there but kept at the next larger
ratio, so each shows what that step adds; at 9, from all it drops. Copies and duplicates are counted
once per sample, beside.
"""
import random

from t2t_lite.data.cleaning import MIN_RATIO_CHARS, PairFilter, TRANSLATION_CLEANING, is_copy, length_ratio
from t2t_lite.data.text_problem import is_usable
from t2t_lite.problems.translate import read_parallel_files

RATIOS = (1.5, 2.0, 3.0, 9.0)
SAMPLES = {
    "wmt_ende_train_sample10k (En-De)": ("/work/shared/data/wmt_ende_train_sample10k/src-train.txt",
                                         "/work/shared/data/wmt_ende_train_sample10k/tgt-train.txt"),
    "europarl_fr_en_sample20k (En-Fr)": ("/work/shared/data/europarl_fr_en_sample20k/europarl-v7.fr-en.sample20k.en",
                                         "/work/shared/data/europarl_fr_en_sample20k/europarl-v7.fr-en.sample20k.fr"),
}


def shorten(text: str, width: int = 110) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def report(name: str, paths: tuple[str, str]) -> None:
    pairs = [(s, t) for s, t in read_parallel_files(*paths) if is_usable(s, t)]
    ratios = [length_ratio(s, t) for s, t in pairs]
    print(f"== {name}: {len(pairs):,} usable pairs; min shorter side {MIN_RATIO_CHARS} characters")
    rng = random.Random(0)
    for i, ratio in enumerate(RATIOS):
        dropped = [j for j, r in enumerate(ratios) if r > ratio]
        upper = RATIOS[i + 1] if i + 1 < len(RATIOS) else float("inf")
        band = [j for j in dropped if ratios[j] <= upper]
        print(f"ratio {ratio:g}: drops {len(dropped):,} ({100 * len(dropped) / len(pairs):.2f} %); "
              f"{len(band):,} of them kept at {upper:g}")
        for j in rng.sample(band, min(2, len(band))):
            src, tgt = pairs[j]
            print(f"  [{ratios[j]:.2f}] src: {shorten(src)}")
            print(f"         tgt: {shorten(tgt)}")
    cleaner = PairFilter(TRANSLATION_CLEANING)
    for src, tgt in pairs:
        cleaner.keep(src, tgt)
    copies = [p for p in pairs if is_copy(*p)]
    print(f"copies: {len(copies):,} (e.g. {[shorten(p[0], 40) for p in copies[:2]]})")
    print(f"the default rules {TRANSLATION_CLEANING}: {cleaner.report()}")
    print()


if __name__ == "__main__":
    for name, paths in SAMPLES.items():
        report(name, paths)
