"""t2t-lite-exporter: export a trained run as a text-in, text-out SavedModel for TensorFlow Serving,
or as a CTranslate2 model.

  t2t-lite-exporter --output_dir=RUN --export_dir=/models --model_name=translate

writes /models/translate/<version>/ (one more than the highest version there),
ready for `tensorflow_model_server --model_base_path=/models/translate`. The decoding settings
(--beam_size, --alpha, --extra_length, --mixed_precision) are fixed in the export.
With --export_format=ctranslate2 (and optionally --quantization=int8, ...) the version
directory is a CTranslate2 model instead, whose decoding settings are defaults a caller may change.
Prints the version directory on stdout.

A SavedModel traces the decoding step's products as t2t-lite-decoder runs them on this machine
(T2T_LITE_KERNEL_LAYOUT and T2T_LITE_STEP_MATMUL apply as there), so it decodes the decoder's lines here.
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
flags.DEFINE_integer("max_input_length", None, "saved_model only: longer inputs are truncated to this many tokens, "
                     "EOS included, so a request's memory and time are bounded. Default 256.")
flags.DEFINE_enum("export_format", "saved_model", ["saved_model", "ctranslate2"],
                  "saved_model: for TensorFlow Serving. ctranslate2: a CTranslate2 model directory "
                  '(pip install ".[ctranslate2]"; docs/serving.md).')
flags.DEFINE_string("quantization", None, "ctranslate2 only: the weights' type, one of none, int8, int8_float32, "
                    "int8_float16, float16, bfloat16 (CTranslate2's names). Default none (float32), the fastest "
                    "on CPUs with AVX2 alone; int8 is the smaller file and pays off on big models with AVX-512 "
                    "VNNI or AMX (docs/serving.md#which-cpu-serves-it).")


def main(argv) -> None:
    from t2t_lite import environment
    from t2t_lite.export.exporter import ExportRequest, export_run

    request = ExportRequest(export_dir=FLAGS.export_dir, run=run_flags.run_request(), model_name=FLAGS.model_name,
                            max_input_length=FLAGS.max_input_length, export_format=FLAGS.export_format,
                            quantization=FLAGS.quantization, step_matmul=environment.step_matmul_settings())
    print(export_run(request, log=lambda line: print(line, file=sys.stderr)))


def run() -> None:
    run_main(main, "t2t-lite-exporter")


if __name__ == "__main__":
    run()
