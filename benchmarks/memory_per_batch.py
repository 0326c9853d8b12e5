"""Peak training memory per batch size, for base and big, in float32 and mixed bfloat16 (docs/gpu_sizing.md's per-token figures).

  python benchmarks/memory_per_batch.py [--hparams_sets=transformer_base,transformer_big]
      [--batch_sizes=1024,2048,4096,8192] [--mixed_precisions=none,mixed_bfloat16] [--steps=2]

Each point is a fresh process training a few steps of the protocol's synthetic corpus (32,768
shared vocabulary, bench_train.py's) at that many tokens per batch, and its peak resident memory.
A line through the points splits it into a fixed part (weights, gradients, Adam's two slots, the
runtime) and a part per batch token (activations kept for the backward pass); the printed GPU
estimate is 16 bytes per parameter (float32 weights, gradients and slots) plus that per-token part,
without the CPU runtime's own memory.
"""
import argparse
import subprocess
import sys

import numpy as np

from common import peak_rss_gib


def one_point(args):
    from bench_train import protocol_trainer

    trainer = protocol_trainer(args.hparams_set, dict(train_steps=args.steps, mixed_precision=args.mixed_precision),
                               log=lambda line: None, overrides=f",train.batch_size={args.batch_size}")
    trainer.train()
    print(f"parameters {trainer.model.count_params()} peak {peak_rss_gib():.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hparams_sets", default="transformer_base,transformer_big")
    parser.add_argument("--batch_sizes", default="1024,2048,4096,8192", help="tokens per batch")
    parser.add_argument("--mixed_precisions", default="none,mixed_bfloat16")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a single point, in this process
    parser.add_argument("--hparams_set", help=argparse.SUPPRESS)
    parser.add_argument("--batch_size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--mixed_precision", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        return one_point(args)
    batches = [int(size) for size in args.batch_sizes.split(",")]
    for hparams_set in args.hparams_sets.split(","):
        for precision in args.mixed_precisions.split(","):
            peaks = []
            for batch in batches:
                out = subprocess.run([sys.executable, __file__, "--one", f"--hparams_set={hparams_set}",
                                      f"--batch_size={batch}", f"--mixed_precision={precision}",
                                      f"--steps={args.steps}"], check=True, capture_output=True, text=True).stdout
                parameters, peak = (float(word) for word in out.split()[-3::2])
                peaks.append(peak)
                print(f"{hparams_set} {precision} batch {batch} tokens: peak RSS {peak:.2f} GiB", flush=True)
            per_token, fixed = np.polyfit(batches, peaks, 1)
            weights_and_adam = 16 * parameters / 2**30
            print(f"{hparams_set} ({parameters:,.0f} parameters) {precision}: peak = {fixed:.2f} GiB + "
                  f"{per_token * 2**10:.3f} MiB per batch token; GPU estimate = {weights_and_adam:.2f} GiB + "
                  f"that per token: " + ", ".join(f"{size} tokens {weights_and_adam + per_token * size:.1f} GiB"
                                                  for size in (2048, 4096, 8192, 16384, 25000)), flush=True)


if __name__ == "__main__":
    main()
