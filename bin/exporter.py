"""t2t-lite-exporter: export a trained run as a text-in, text-out SavedModel for TensorFlow Serving,
or as a CTranslate2 model.

  t2t-lite-exporter --output_dir=RUN --export_dir=/models --model_name=translate

writes /models/translate/<version>/ (one more than the highest version there),
ready for `tensorflow_model_server --model_base_path=/models/translate`. The decoding settings
(--beam_size, --alpha, --extra_length, --mixed_precision) are fixed in the export.
With --export_format=ctranslate2 (and optionally --quantization=int8, ...) the version
directory is a CTranslate2 model instead, whose decoding settings are defaults a caller may change.
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
flags.DEFINE_integer("max_input_length", 256, "saved_model only: longer inputs are truncated to this many tokens, "
                     "EOS included, so a request's memory and time are bounded.")
flags.DEFINE_enum("export_format", "saved_model", ["saved_model", "ctranslate2"],
                  "saved_model: for TensorFlow Serving. ctranslate2: a CTranslate2 model directory "
                  '(pip install ".[ctranslate2]"; docs/serving.md).')
flags.DEFINE_string("quantization", None, "ctranslate2 only: the weights' type, one of none, int8, int8_float32, "
                    "int8_float16, float16, bfloat16 (CTranslate2's names). Default none (float32).")


def main(argv) -> None:
    if FLAGS.export_format == "ctranslate2":
        print(export_ctranslate2())
        return
    from t2t_lite.errors import UserError
    from t2t_lite.export.exporter import ExportRequest, export_run

    if FLAGS.quantization is not None:
        raise UserError("--quantization is for --export_format=ctranslate2; a SavedModel keeps float32 weights")
    run_request = run_flags.run_request()
    request = ExportRequest(export_dir=FLAGS.export_dir, run=run_request, model_name=FLAGS.model_name,
                            max_input_length=FLAGS.max_input_length)
    path = export_run(request, log=lambda line: print(line, file=sys.stderr))
    print(path)


def export_ctranslate2() -> str:
    """The CTranslate2 export of the flags' run; returns its version directory."""
    from t2t_lite.errors import UserError
    from t2t_lite.export import ctranslate2_export
    from t2t_lite.run import open_run

    # A CTranslate2 model reads sources up to its position table and holds float32 (or --quantization) weights.
    if FLAGS["max_input_length"].present:
        raise UserError("--max_input_length is for --export_format=saved_model; a CTranslate2 export takes "
                        f"sources of up to {ctranslate2_export.MAX_POSITIONS - 1} tokens (its position table)")
    if FLAGS.mixed_precision != "none":
        raise UserError("--mixed_precision is for --export_format=saved_model; a CTranslate2 export's weights "
                        "are --quantization's (e.g. bfloat16), its computation the caller's compute_type")
    ctranslate2_export.require_ctranslate2()  # before the run is opened, its model restored
    quantization = FLAGS.quantization or "none"
    ctranslate2_export.check_quantization(quantization)
    run = open_run(run_flags.run_request())
    print(f"converting {run.checkpoint} for CTranslate2 ({quantization} weights)", file=sys.stderr)
    return ctranslate2_export.export_ctranslate2(run, FLAGS.export_dir, FLAGS.model_name, quantization)


def run() -> None:
    run_main(main, "t2t-lite-exporter")


if __name__ == "__main__":
    run()
