"""Training throughput in target tokens per second, with and without XLA (the trainer's --jit_compile).

  python benchmarks/bench_jit.py --quick

Both modes train the same model from the same start on algorithmic_reverse
through the trainer's own TrainStep and input pipeline. Each first takes
`--warmup` untimed steps (tracing, and under XLA one compilation per bucket
shape); then the modes take turns, `--block` steps at a time, until each has
run `--steps` timed steps, so load from other jobs on a shared machine falls
on both alike. Only non-PAD target tokens count, so the padding to bucket
bounds that XLA needs is paid for, not rewarded. Tokens/s, not steps/s, is
the figure to compare: batches hold a token budget, not a number of sentences.
"""
import argparse
import time

import keras
import tensorflow as tf

import t2t_lite.hparams  # noqa: F401
import t2t_lite.problems  # noqa: F401
from t2t_lite import config
from t2t_lite.models import build_model
from t2t_lite.registry import hparams_sets, problems
from t2t_lite.training.steps import TrainStep, make_optimizer
from t2t_lite.training.batches import train_batches

PROBLEM = "algorithmic_reverse"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hparams_set", default="transformer_tiny")
    parser.add_argument("--hparams", default="train.batch_size=2048", help="overrides, as for the trainer")
    parser.add_argument("--warmup", type=int, default=100, help="untimed steps per mode (tracing, XLA compilation)")
    parser.add_argument("--steps", type=int, default=200, help="timed steps per mode")
    parser.add_argument("--block", type=int, default=10, help="timed steps per turn")
    parser.add_argument("--quick", action="store_true", help="--warmup=40 --steps=30")
    args = parser.parse_args()
    if args.quick:
        args.warmup, args.steps = 40, 30
    return args


class Run:
    """One mode's model, TrainStep and batches, with its timed totals.

    Args:
      hparams: the model and batching.
      jit_compile: XLA on, with batches padded to their bucket's bound.
    """

    def __init__(self, hparams: config.HParams, jit_compile: bool):
        keras.utils.set_random_seed(1)
        model = build_model(hparams)
        optimizer = make_optimizer(hparams)
        optimizer.build(model.trainable_variables)
        self.step = TrainStep(model, optimizer, tf.distribute.get_strategy(), hparams.train.label_smoothing,
                              hparams.train.batch_size, jit_compile=jit_compile)
        self.batches = iter(train_batches(problems.get(PROBLEM)(), hparams, seed=1, pad_to_boundary=jit_compile))
        self.tokens, self.step_seconds = 0.0, []

    def untimed(self, steps: int) -> float:
        """Takes steps steps; returns the seconds they took."""
        start = time.perf_counter()
        for _ in range(steps):
            self.step(self.batches)  # returns Python values, so the step has finished
        return time.perf_counter() - start

    def timed(self, steps: int) -> None:
        for _ in range(steps):
            start = time.perf_counter()
            self.tokens += self.step(self.batches).tokens
            self.step_seconds.append(time.perf_counter() - start)


def main() -> None:
    args = parse_args()
    hparams = config.apply_overrides(hparams_sets.get(args.hparams_set)(), args.hparams)
    hparams = config.apply_overrides(hparams, f"vocab_size={problems.get(PROBLEM)().vocab_size}")
    m = hparams.model
    print(f"{args.hparams_set} (d {m.d_model}, d_ff {m.d_ff}, {m.num_encoder_layers}+{m.num_decoder_layers} layers), "
          f"{hparams.train.batch_size} tokens per batch, {PROBLEM}, warm-up {args.warmup} steps, "
          f"timed {args.steps} in turns of {args.block}")
    runs = {jit_compile: Run(hparams, jit_compile) for jit_compile in (False, True)}
    warmup_seconds = {jit_compile: run.untimed(args.warmup) for jit_compile, run in runs.items()}
    for done in range(0, args.steps, args.block):
        for run in runs.values():
            run.timed(min(args.block, args.steps - done))
    for jit_compile, run in runs.items():
        # A slowest step far above the rest means XLA was still compiling new shapes.
        print(f"jit_compile={jit_compile!s:5}  target tokens/s {run.tokens / sum(run.step_seconds):10,.0f}   "
              f"(warm-up {warmup_seconds[jit_compile]:.1f} s, slowest timed step {max(run.step_seconds):.2f} s)")
    off, on = (runs[j].tokens / sum(runs[j].step_seconds) for j in (False, True))
    print(f"XLA on / off: {on / off:.2f}")


if __name__ == "__main__":
    main()
