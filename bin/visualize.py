"""t2t-lite-visualize: PNG heat maps of every attention layer and head for one sentence.

  t2t-lite-visualize --output_dir=RUN --sentence="0123" --plot_dir=/tmp/attention
"""
import sys

from absl import flags

from t2t_lite.bin import run_flags
from t2t_lite.bin.cli import run_main
from t2t_lite.errors import UserError

FLAGS = flags.FLAGS
run_flags.define("plots", decoding_settings=False)
flags.adopt_module_key_flags(run_flags)
flags.DEFINE_string("sentence", None, "The source sentence to decode and plot.")
flags.DEFINE_string("plot_dir", None, "Where the PNG files go.")


def main(argv) -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError('matplotlib is needed for plots: pip install ".[visualize]" in the t2t-lite checkout') from None
    from t2t_lite import environment
    from t2t_lite.decoding.decoder import make_decoder
    from t2t_lite.run import open_run
    from t2t_lite.visualize import visualize_sentence

    if not FLAGS.sentence or not FLAGS.plot_dir:
        raise UserError("--sentence and --plot_dir are required")
    opened = open_run(run_flags.run_request())
    try:
        decoder = make_decoder(opened.model, opened.problem, opened.decode, environment.step_matmul_settings())
        paths = visualize_sentence(opened.problem, opened.model, decoder, FLAGS.sentence, FLAGS.plot_dir)
    except ValueError as error:
        raise UserError(f"--sentence: {error}") from None
    print(f"wrote {len(paths)} plots to {FLAGS.plot_dir}", file=sys.stderr)
    print(*paths, sep="\n")


def run() -> None:
    run_main(main, "t2t-lite-visualize")


if __name__ == "__main__":
    run()
