"""t2t-lite-exporter: export a trained run as a text-in, text-out SavedModel for TensorFlow Serving.

  t2t-lite-exporter --output_dir=RUN --data_dir=DATA --export_dir=/models --model_name=translate

writes /models/translate/<version>/ (one more than the highest version there),
ready for `tensorflow_model_server --model_base_path=/models/translate`. The decoding settings
(--beam_size, --alpha, --extra_length, --mixed_precision) are fixed in the export.
Prints the version directory on stdout.
"""
import sys

from absl import flags

from t2t_lite.bin import run_flags
from t2t_lite.bin.cli import run_main

FLAGS = flags.FLAGS
run_flags.define("exports")
flags.adopt_module_key_flags(run_flags)
flags.DEFINE_string("export_dir", None, "TF Serving's model base directory; the export goes to "
                    "<export_dir>/<model_name>/<version>/.")
flags.DEFINE_string("model_name", None, "The model's name in TF Serving; default the problem's name.")
flags.DEFINE_integer("max_input_length", 256, "Longer inputs are truncated to this many tokens, EOS included, "
                     "so a request's memory and time are bounded.")


def main(argv) -> None:
    from t2t_lite.export.exporter import ExportRequest, export_run

    run_request = run_flags.run_request()
    request = ExportRequest(export_dir=FLAGS.export_dir, run=run_request, model_name=FLAGS.model_name,
                            max_input_length=FLAGS.max_input_length)
    path = export_run(request, log=lambda line: print(line, file=sys.stderr))
    print(path)


def run() -> None:
    run_main(main, "t2t-lite-exporter")


if __name__ == "__main__":
    run()
