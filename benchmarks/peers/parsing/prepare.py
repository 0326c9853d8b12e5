"""The parsing peer's inputs, made in t2t-lite's environment (benchmarks/parsing_side_by_side.sh calls it):

  python benchmarks/peers/parsing/prepare.py PTB_DIR OUT_DIR PROBLEM HPARAMS_SET [HPARAMS_OVERRIDES]

Writes to OUT_DIR
  train.words, train.trees   the train split of PROBLEM (parsing_ptb_sample or a variant: wsj_0001-0159) as text
                             pairs, read and linearised in the problem's target form
                             by t2t-lite's own code (problems/ptb_sample.py, problems/wsj_parsing.py), so the peer
                             trains on exactly the sentences t2t-lite does (pairs with no words are left out, as
                             for the dev split in parsing_quality.sh)
  hparams.json               the t2t-lite hparams set's sizes, dropouts, optimiser, schedule, batch and decoding
                             settings, which make_onmt.py turns into the peer's OpenNMT-tf model and configuration
"""
import dataclasses
import json
import os
import sys

import t2t_lite.hparams  # noqa: F401  (registers the sets)
import t2t_lite.problems  # noqa: F401  (registers the problems)
from t2t_lite import config, registry
from t2t_lite.problems.ptb_sample import sample_directory, split_files
from t2t_lite.problems.wsj_parsing import read_mrg_pairs


def main(ptb: str, out: str, problem: str, hparams_set: str, overrides: str = "") -> None:
    os.makedirs(out, exist_ok=True)
    directory = sample_directory(ptb)
    if directory is None:
        sys.exit(f"prepare.py: no PTB sample under {ptb} (parsing_quality.sh's datagen puts or finds it there)")
    form = registry.problems.get(problem)(None).form
    pairs = [pair for pair in read_mrg_pairs(split_files(directory, "train"), form) if pair[0]]
    with open(f"{out}/train.words", "w", encoding="utf-8") as words, \
            open(f"{out}/train.trees", "w", encoding="utf-8") as trees:
        for source, target in pairs:
            words.write(source + "\n")
            trees.write(target + "\n")
    hparams = registry.hparams_sets.get(hparams_set)()
    if overrides:
        hparams = config.apply_overrides(hparams, overrides)
    with open(f"{out}/hparams.json", "w") as f:
        json.dump(dict(hparams_set=hparams_set, overrides=overrides, **dataclasses.asdict(hparams)), f, indent=1)
    print(f"train split: {len(pairs)} sentences; {hparams_set} settings in {out}/hparams.json")


if __name__ == "__main__":
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__.strip().splitlines()[2].strip())
    main(*sys.argv[1:])
