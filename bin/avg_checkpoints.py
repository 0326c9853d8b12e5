"""t2t-lite-avg-checkpoints: average the model weights of a run's last N checkpoints into a new checkpoint.

  t2t-lite-avg-checkpoints --output_dir=/tmp/ende_base --last_n=5

The paper averages the last 5 checkpoints of the base model and the last 20 of
the big one. The result, <output_dir>/averaged/ckpt-<step> with its own
hparams.json, is what t2t-lite-decoder should decode from.
"""
from absl import flags

from t2t_lite.bin.cli import run_main
from t2t_lite.errors import UserError

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "The trainer's run directory: hparams.json and ckpt-<step> files.")
flags.DEFINE_integer("last_n", 5, "Average this many newest checkpoints (paper: 5 base, 20 big).")
flags.DEFINE_string("destination_dir", None, "Where the averaged checkpoint goes; default <output_dir>/averaged.")


def main(argv) -> None:
    if not FLAGS.output_dir:
        raise UserError("--output_dir is required")
    from t2t_lite.training.averaging import average_checkpoints

    average_checkpoints(FLAGS.output_dir, FLAGS.last_n, FLAGS.destination_dir, log=print)


def run() -> None:
    run_main(main, "t2t-lite-avg-checkpoints")


if __name__ == "__main__":
    run()
