"""t2t-lite-exporter: export a trained run as a text-in, text-out SavedModel for TensorFlow Serving.

  t2t-lite-exporter --output_dir=RUN --data_dir=DATA --export_dir=/models --model_name=translate

writes /models/translate/<version>/ (one more than the highest version there),
ready for `tensorflow_model_server --model_base_path=/models/translate`.
Prints the version directory on stdout.
"""
import sys

from absl import flags

from t2t_lite.bin.cli import load_registries, run_main

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "A training run; exports its averaged checkpoint if any, else the newest.")
flags.DEFINE_string("checkpoint_path", None, "A specific checkpoint (e.g. RUN/ckpt-5000) instead.")
flags.DEFINE_string("export_dir", None, "TF Serving's model base directory; the export goes to "
                    "<export_dir>/<model_name>/<version>/.")
flags.DEFINE_string("model_name", None, "The model's name in TF Serving; default the problem's name.")
flags.DEFINE_string("problem", None, "Defaults to the run's problem (hparams.json).")
flags.DEFINE_string("hparams_set", None, "If given, must match the run's set; a guard against exporting the wrong run.")
flags.DEFINE_string("data_dir", None, "The problem's prepared data (its vocabulary), as given to the trainer.")
flags.DEFINE_integer("beam_size", None, "Fixed in the export; default the run's decode.beam_size (paper: 4).")
flags.DEFINE_float("alpha", None, "Length penalty exponent, fixed in the export; default the run's (paper: 0.6).")
flags.DEFINE_integer("extra_length", None, "Max output length = input length + this; default the run's (50).")
flags.DEFINE_integer("max_input_length", 256, "Longer inputs are truncated to this many tokens, EOS included, "
                     "so a request's memory and time are bounded.")
flags.DEFINE_enum("mixed_precision", "none", ["none", "mixed_bfloat16", "mixed_float16"],
                  "Compute dtype of the export, whatever the run trained in: mixed_bfloat16 runs the matmuls "
                  "in bfloat16 (fast on CPUs with AMX or AVX512_BF16; outputs can differ slightly, see README).")


def main(argv) -> None:
    load_registries()
    from t2t_lite.export.exporter import ExportRequest, export_run
    from t2t_lite.run import RunRequest

    run_request = RunRequest(
        output_dir=FLAGS.output_dir, checkpoint_path=FLAGS.checkpoint_path, data_dir=FLAGS.data_dir,
        problem=FLAGS.problem, hparams_set=FLAGS.hparams_set, mixed_precision=FLAGS.mixed_precision,
        beam_size=FLAGS.beam_size, alpha=FLAGS.alpha, extra_length=FLAGS.extra_length)
    request = ExportRequest(export_dir=FLAGS.export_dir, run=run_request, model_name=FLAGS.model_name,
                            max_input_length=FLAGS.max_input_length)
    path = export_run(request, log=lambda line: print(line, file=sys.stderr))
    print(path)


def run() -> None:
    run_main(main, "t2t-lite-exporter")


if __name__ == "__main__":
    run()
