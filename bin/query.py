"""t2t-lite-query: translate lines with a model served by TensorFlow Serving.

  t2t-lite-query --model_name=translate < sentences.txt
  t2t-lite-query --model_name=translate --protocol=grpc --server=localhost:8500 --input_file=src.txt

Prints one output per input line, in order (with --scores: output<TAB>score).
"""
import sys

from absl import flags

from t2t_lite.bin.cli import run_main

FLAGS = flags.FLAGS
flags.DEFINE_string("model_name", None, "The model's name in TF Serving (the exporter's --model_name).")
flags.DEFINE_enum("protocol", "rest", ["rest", "grpc"], "REST (standard library) or gRPC (needs "
                  "tensorflow-serving-api).")
flags.DEFINE_string("server", None, "host:port of TF Serving; default localhost:8501 (REST) or localhost:8500 (gRPC).")
flags.DEFINE_integer("model_version", None, "A specific version; default the one TF Serving serves (the highest).")
flags.DEFINE_string("input_file", "-", "UTF-8 text, one sentence per line; '-' reads stdin.")
flags.DEFINE_integer("batch_size", 32, "Lines per request.")
flags.DEFINE_float("timeout", 60.0, "Seconds to wait for each answer.")
flags.DEFINE_bool("scores", False, "Print output<TAB>score instead of the output alone.")


def main(argv) -> None:
    from t2t_lite.errors import UserError
    from t2t_lite.inference.client import make_predict, predict_in_batches
    from t2t_lite.files import read_lines

    if not FLAGS.model_name:
        raise UserError("--model_name is required")
    lines = read_lines("/dev/stdin" if FLAGS.input_file == "-" else FLAGS.input_file)
    predict = make_predict(FLAGS.protocol, FLAGS.server, FLAGS.model_name, FLAGS.model_version, FLAGS.timeout)
    for result in predict_in_batches(predict, lines, FLAGS.batch_size):
        sys.stdout.write(f"{result.text}\t{result.score:.4f}\n" if FLAGS.scores else f"{result.text}\n")


def run() -> None:
    run_main(main, "t2t-lite-query")


if __name__ == "__main__":
    run()
