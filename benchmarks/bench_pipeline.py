"""Input pipeline throughput: target tokens/s through shuffle + length bucketing + token batches, and padding efficiency.

  python benchmarks/bench_pipeline.py [--batch_size=4096] [--quick] [--longer_side]
  python benchmarks/bench_pipeline.py --quick --pairs ../shared/data/wmt_ende_train_sample10k/{src,tgt}-train.txt
  python benchmarks/bench_pipeline.py --data_dir=DATA_DIR [--problem=translate_files]

Uses the peers' synthetic corpus (20,000 pairs, lengths 10-50) through the same
`train_batches` the trainer uses; compare the tokens/s with the training
consumption from bench_train.py (the target: at least 20x, so training is never input-bound).
`--longer_side` buckets by max(source, target) length alone, as t2t does, instead of by
both lengths (train.bucket_both_sides). `--pairs SRC TGT` measures the padding of a real
parallel corpus instead, with whitespace words (+ EOS) standing in for subword tokens:
real source and target lengths are correlated, unlike the synthetic corpus's.
`--data_dir` reads a problem's TFRecord shards as training does (e.g. the 4.5M-pair
shards bench_datagen_scale.py --work_dir keeps) and also reports the time to the
first batch (opening the shards and filling the 10,000-example shuffle buffer)
and the process's peak RSS.
"""
import argparse
import dataclasses
import resource
import time

from common import training_corpus


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch_size", type=int, default=4096)
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--longer_side", action="store_true", help="bucket by max(source, target) length (t2t)")
    parser.add_argument("--pairs", nargs=2, metavar=("SOURCE_FILE", "TARGET_FILE"),
                        help="a real parallel corpus, measured in whitespace words")
    parser.add_argument("--data_dir", help="a problem's data_dir (its TFRecord shards), read as training reads it")
    parser.add_argument("--problem", default="translate_files", help="the problem of --data_dir")
    args = parser.parse_args()

    import t2t_lite.hparams  # noqa: F401
    import t2t_lite.problems  # noqa: F401
    from t2t_lite.data.problem import Problem, dataset_from_lists
    from t2t_lite.registry import hparams_sets, problems
    from t2t_lite.training.batches import train_batches

    if args.data_dir:
        problem = problems.get(args.problem)(args.data_dir)
    else:
        inputs, targets = training_corpus() if args.pairs is None else word_ids(*args.pairs)

        class Synthetic(Problem):
            vocab_size = 32_768

            def dataset(self, split):
                return dataset_from_lists(inputs, targets)

        problem = Synthetic()

    hp = hparams_sets.get("transformer_base")()
    hp = dataclasses.replace(hp, train=dataclasses.replace(hp.train, batch_size=args.batch_size,
                                                           bucket_both_sides=not args.longer_side))
    start = time.perf_counter()
    batches = iter(train_batches(problem, hp, seed=1))
    next(batches)  # fill the shuffle buffer outside the timing
    if args.data_dir:
        print(f"pipeline ({args.data_dir}): first batch after {time.perf_counter() - start:.1f} s")
    count = 200 if args.quick else args.batches
    real_src = real_tgt = padded_src = padded_tgt = 0
    start = time.perf_counter()
    for _ in range(count):
        batch = next(batches)
        src, tgt = batch["inputs"].numpy(), batch["targets"].numpy()
        real_src, real_tgt = real_src + int((src != 0).sum()), real_tgt + int((tgt != 0).sum())
        padded_src, padded_tgt = padded_src + src.size, padded_tgt + tgt.size
    seconds = time.perf_counter() - start
    print(f"pipeline ({'longer side' if args.longer_side else 'both sides'}"
          f"{', ' + args.pairs[0] if args.pairs else ''}): {count} batches of ~{args.batch_size} tokens in {seconds:.1f} s: "
          f"{real_tgt / seconds:,.0f} target tokens/s, {(real_src + real_tgt) / seconds:,.0f} source+target tokens/s; "
          f"real tokens / padded positions: source {real_src / padded_src:.1%}, target {real_tgt / padded_tgt:.1%}; "
          f"{real_tgt / count:.0f} target tokens per batch"
          + (f"; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB" if args.data_dir else ""))


def word_ids(source_file: str, target_file: str) -> tuple[list[list[int]], list[list[int]]]:
    """Each line as one id per whitespace word, + EOS; pairs with an empty side are left out."""
    with open(source_file, encoding="utf-8") as src, open(target_file, encoding="utf-8") as tgt:
        pairs = [(s.split(), t.split()) for s, t in zip(src, tgt)]
    return ([[3] * len(s) + [1] for s, t in pairs if s and t], [[3] * len(t) + [1] for s, t in pairs if s and t])


if __name__ == "__main__":
    main()
