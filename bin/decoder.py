"""t2t-lite-decoder: translate (or parse) a file with a trained model, optionally scoring it.

  t2t-lite-decoder --output_dir=RUN --decode_from_file=src.txt --decode_to_file=out.txt --decode_reference=ref.txt
"""
import sys

from absl import flags

from t2t_lite.bin import run_flags
from t2t_lite.bin.cli import load_registries, run_main

FLAGS = flags.FLAGS
run_flags.define("decodes")
flags.adopt_module_key_flags(run_flags)
flags.DEFINE_string("decode_from_file", None, "Source text, one sentence per line (UTF-8).")
flags.DEFINE_string("decode_to_file", None, "Where outputs go, one line per input line; default stdout.")
flags.DEFINE_string("decode_reference", None, "Reference file: print BLEU (or bracket F1 for parsing).")
flags.DEFINE_integer("batch_size", None, "Sentences per batch; default the set's decode.batch_size.")
flags.DEFINE_integer("parallel_batches", 1, "Batches decoded at once, each on its own thread: on a CPU a "
                     "second batch uses the cycles one batch leaves idle between its matmuls (2 suits a 2-core "
                     "CPU; docs/performance.md has the gain). Outputs are the same.", lower_bound=1)
flags.DEFINE_bool("return_beams", False, "Write all beams: text<TAB>score for each, tab-separated, per line.")


def main(argv) -> None:
    load_registries()
    from t2t_lite.decoding.decode_lines import DecodeFileRequest, decode_file

    run_request = run_flags.run_request(batch_size=FLAGS.batch_size)
    request = DecodeFileRequest(run_request, decode_from_file=FLAGS.decode_from_file,
                                decode_to_file=FLAGS.decode_to_file, decode_reference=FLAGS.decode_reference,
                                parallel_batches=FLAGS.parallel_batches, return_beams=FLAGS.return_beams)
    decode_file(request, log=lambda line: print(line, file=sys.stderr))


def run() -> None:
    run_main(main, "t2t-lite-decoder")


if __name__ == "__main__":
    run()
