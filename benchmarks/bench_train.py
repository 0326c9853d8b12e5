"""Training throughput on the peers' protocol (docs/performance.md; the peers' side: benchmarks/peers/), measured through the real Trainer.

  python benchmarks/bench_train.py                                   # fp32, transformer_base, 40 steps
  python benchmarks/bench_train.py --mixed_precision=mixed_bfloat16
  python benchmarks/bench_train.py --mixed_precision=mixed_bfloat16 --float32_output_projection
  python benchmarks/bench_train.py --jit_compile
  python benchmarks/bench_train.py --quick                           # transformer_small, 12 steps
  python benchmarks/bench_train.py --longer_side                     # t2t's bucketing by max(source, target)

Protocol: 20,000 synthetic pairs (lengths 10-50, 32,768 shared vocabulary, seed 1234), ~4096-token
batches with the project's bucketing, transformer_base (dropout 0.1, label smoothing 0.1), Adam.
40 steps; the first 10 are discarded; reported: median step time, target and source+target
tokens/s, peak RSS, and MFU = 6 x parameters x target tokens per step / step time / the matmul
ceiling of the precision that ran (float32, or bfloat16 under mixed_bfloat16), both ceilings
measured in the same process first (benchmarks/ceilings.py).
"""
import argparse
import re
import tempfile
import time

import numpy as np

from ceilings import compute_dtype, print_ceilings
from common import PROTOCOL_VOCAB, peak_rss_gib, training_corpus

PROGRESS = re.compile(r"^step (\d+)/\d+ .*target tokens/s ([\d,]+)")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--discard", type=int, default=10)
    parser.add_argument("--hparams_set", default="transformer_base")
    parser.add_argument("--mixed_precision", default="none", choices=["none", "mixed_bfloat16"])
    parser.add_argument("--float32_output_projection", action="store_true",
                        help="with --mixed_precision: the loss's projection onto the vocabulary in float32")
    parser.add_argument("--jit_compile", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--longer_side", action="store_true",
                        help="bucket by max(source, target) length as t2t does (train.bucket_both_sides=False)")
    args = parser.parse_args()
    if args.quick:
        args.hparams_set, args.steps, args.discard = "transformer_small", 12, 2

    dtype = compute_dtype(args.mixed_precision)
    ceiling = print_ceilings(("float32", "bfloat16"))[dtype]
    step_times, target_tokens, parameters = run_training(args)
    kept_times, kept_tokens = np.array(step_times[args.discard:]), np.array(target_tokens[args.discard:])
    median_time = float(np.median(kept_times))
    tokens_per_step = float(np.mean(kept_tokens))
    mfu = 6 * parameters * tokens_per_step / median_time / (ceiling * 1e9)
    print(f"train {args.hparams_set} ({parameters:,} parameters), {args.mixed_precision}"
          f"{', float32 output projection' if args.float32_output_projection else ''}"
          f"{', XLA' if args.jit_compile else ''}{', longer-side buckets' if args.longer_side else ''}: steps {args.discard + 1}-{args.steps}, "
          f"median step {median_time:.2f} s, {tokens_per_step / median_time:,.0f} target tokens/s "
          f"({tokens_per_step:.0f} target tokens/step), MFU {mfu:.2f} of the {dtype} ceiling, peak RSS {peak_rss_gib():.2f} GiB")


def protocol_trainer(hparams_set: str, run_options: dict, log, overrides: str = ""):
    """A Trainer for the protocol: the synthetic corpus, ~4096-token batches, a temporary output_dir."""
    import t2t_lite.hparams  # noqa: F401
    from t2t_lite import config
    from t2t_lite.data.problem import Problem, dataset_from_lists
    from t2t_lite.registry import hparams_sets
    from t2t_lite.training.run_config import RunConfig, resolve_for
    from t2t_lite.training.trainer import Trainer

    inputs, targets = training_corpus()

    class Synthetic(Problem):
        vocab_size = PROTOCOL_VOCAB

        def dataset(self, split):
            return dataset_from_lists(inputs, targets)

    hparams = config.apply_overrides(hparams_sets.get(hparams_set)(),
                                     f"vocab_size={PROTOCOL_VOCAB},train.batch_size=4096,average_last_checkpoints=0"
                                     + overrides)
    # No dev BLEU: the synthetic corpus has no text to decode, and the protocol times training steps alone.
    run = RunConfig(output_dir=tempfile.mkdtemp(prefix="bench_train_"), eval_steps=1, save_checkpoints_steps=10**9,
                    log_every_steps=1, eval_bleu_sentences=0, **run_options)
    problem = Synthetic()
    return Trainer(problem, hparams, resolve_for(run, problem, hparams, log=log), log=log)


def profiled_steps(mixed_precision: str, steps: int):
    """For profile_ops.py: a transformer_base trainer past its first steps, and a function taking `steps` more."""
    trainer = protocol_trainer("transformer_base", dict(train_steps=2, mixed_precision=mixed_precision),
                               log=lambda line: None)
    trainer.train()  # traces and warms up
    batches = iter(trainer.training_data(seed=0))
    return lambda: [trainer.train_step(batches) for _ in range(steps)]


def run_training(args):
    """Trains for args.steps steps; returns per-step seconds, per-step target tokens and the parameter count."""
    times, tokens, last = [], [], [time.perf_counter()]

    def on_log(line):
        match = PROGRESS.match(line)
        if match:
            now = time.perf_counter()
            times.append(now - last[0])
            tokens.append(float(match.group(2).replace(",", "")) * times[-1])
            last[0] = now
            print(f"  step {match.group(1)}: {times[-1]:.2f} s", flush=True)

    trainer = protocol_trainer(args.hparams_set, dict(train_steps=args.steps, jit_compile=args.jit_compile,
                                                      mixed_precision=args.mixed_precision,
                                                      float32_output_projection=args.float32_output_projection),
                               log=on_log,
                               overrides=",train.bucket_both_sides=False" if args.longer_side else "")
    trainer.train()
    return times, tokens, trainer.model.count_params()


if __name__ == "__main__":
    main()
