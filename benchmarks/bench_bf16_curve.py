"""Does mixed_bfloat16 train like float32? The loss curves of a tiny model over its first 200 steps, side by side.

  python benchmarks/bench_bf16_curve.py            # 200 steps, the loss every 20
  python benchmarks/bench_bf16_curve.py --quick    # 60 steps
  python benchmarks/bench_bf16_curve.py --seed=7 --no_rounded_start   # another seed's pair
  python benchmarks/bench_bf16_curve.py --float32_output_projection    # bfloat16 with the loss's projection in float32

transformer_tiny on algorithmic_reverse (the README's main job), same seed,
same batches; the two runs differ only in the compute dtype. The curve is the
mean training loss over each window of --every steps (one step's loss is one
batch's, and two trajectories that differ by rounding soon see different
noise); the stated tolerance is 0.05 between window means.

A third run, float32 again but started from the initial weights rounded to
bfloat16, measures how far this task's trajectory moves under one change of
bfloat16's size, at the start only: if it moved as far as the bfloat16 run,
the difference would be the trajectory's sensitivity, not bfloat16's
arithmetic during training. --no_rounded_start skips it.

--seed (default the trainer's 1234) changes the initial weights and the
batches' order for all runs: the steep drop of this task moves by a few
steps from seed to seed, so one seed's difference there is one sample.
"""
import argparse
import re
import tempfile

TOLERANCE = 0.05
PROGRESS = re.compile(r"^step (\d+)/\d+ +loss ([\d.]+)")


def loss_curve(mixed_precision: str, steps: int, every: int, rounded_start: bool = False,
               seed: int = 1234, float32_output_projection: bool = False) -> dict[int, float]:
    """Mean training loss per window of `every` steps, keyed by the window's last step.

    rounded_start: round every initial weight to bfloat16 (and back) before training.
    float32_output_projection: the trainer's option of that name (mixed precision only).
    """
    import tensorflow as tf

    import t2t_lite.hparams  # noqa: F401
    import t2t_lite.problems  # noqa: F401
    from t2t_lite import config
    from t2t_lite.registry import hparams_sets, problems
    from t2t_lite.training.run_config import RunConfig, resolve_for
    from t2t_lite.training.trainer import Trainer

    problem = problems.get("algorithmic_reverse")()
    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(),
                                     f"vocab_size={problem.vocab_size},average_last_checkpoints=0")
    losses = {}

    def on_log(line):
        match = PROGRESS.match(line)
        if match:
            losses[int(match.group(1))] = float(match.group(2))

    run = RunConfig(output_dir=tempfile.mkdtemp(prefix="bench_bf16_"), train_steps=steps, eval_steps=1,
                    save_checkpoints_steps=10**9, log_every_steps=1, mixed_precision=mixed_precision,
                    random_seed=seed, float32_output_projection=float32_output_projection)
    trainer = Trainer(problem, hparams, resolve_for(run, problem, hparams, log=on_log), log=on_log)
    if rounded_start:
        for weight in trainer.model.weights:
            weight.assign(tf.cast(tf.cast(weight, tf.bfloat16), weight.dtype))
    trainer.train()
    return {end: sum(losses[s] for s in range(end - every + 1, end + 1)) / every
            for end in range(every, steps + 1, every)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--every", type=int, default=20)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no_rounded_start", action="store_true", help="skip the float32 run from bf16-rounded weights")
    parser.add_argument("--seed", type=int, default=1234, help="the runs' random seed (weights, batch order)")
    parser.add_argument("--float32_output_projection", action="store_true",
                        help="the bfloat16 run projects onto the vocabulary for its loss in float32")
    args = parser.parse_args()
    steps = 60 if args.quick else args.steps
    # The trainer sets the dtype policy only while it builds its model, so both runs can share a process.
    float32 = loss_curve("none", steps, args.every, seed=args.seed)
    bfloat16 = loss_curve("mixed_bfloat16", steps, args.every, seed=args.seed,
                          float32_output_projection=args.float32_output_projection)
    rounded = None if args.no_rounded_start else loss_curve("none", steps, args.every, rounded_start=True,
                                                            seed=args.seed)
    print(f"steps      float32  bfloat16  difference" + ("  fp32 from bf16-rounded start  difference"
                                                          if rounded else "")
          + f"   (mean training loss per {args.every}-step window)")
    for step in sorted(float32):
        line = (f"{step - args.every + 1:4d}-{step:<4d}  {float32[step]:8.4f}  {bfloat16[step]:8.4f}  "
                f"{bfloat16[step] - float32[step]:+9.4f}")
        if rounded:
            line += f"  {rounded[step]:28.4f}  {rounded[step] - float32[step]:+9.4f}"
        print(line)
    worst = max(abs(bfloat16[s] - float32[s]) for s in float32)
    verdict = "within" if worst <= TOLERANCE else "OUTSIDE"
    projection = ", float32 output projection" if args.float32_output_projection else ""
    print(f"seed {args.seed}{projection}, bf16 vs fp32 over {steps} steps: largest difference of {args.every}-step mean losses {worst:.4f}, "
          f"{verdict} the tolerance {TOLERANCE}")
    if rounded:
        print(f"fp32 from bf16-rounded initial weights vs fp32: largest difference "
              f"{max(abs(rounded[s] - float32[s]) for s in float32):.4f} (the trajectory's own sensitivity)")


if __name__ == "__main__":
    main()
