"""t2t-lite-decoder: translate (or parse) a file with a trained model, optionally scoring it.

  t2t-lite-decoder --output_dir=RUN --decode_from_file=src.txt --decode_to_file=out.txt --decode_reference=ref.txt
"""
import sys

from absl import flags

from t2t_lite.bin.cli import load_registries, run_main

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "A training run; decodes its averaged checkpoint if any, else the newest.")
flags.DEFINE_string("checkpoint_path", None, "A specific checkpoint (e.g. RUN/ckpt-5000) instead.")
flags.DEFINE_string("problem", None, "Defaults to the run's problem (hparams.json).")
flags.DEFINE_string("hparams_set", None, "If given, must match the run's set; a guard against decoding the wrong run.")
flags.DEFINE_string("data_dir", None, "The problem's prepared data (vocabulary), as given to the trainer.")
flags.DEFINE_string("decode_from_file", None, "Source text, one sentence per line (UTF-8).")
flags.DEFINE_string("decode_to_file", None, "Where outputs go, one line per input line; default stdout.")
flags.DEFINE_string("decode_reference", None, "Reference file: print BLEU (or bracket F1 for parsing).")
flags.DEFINE_integer("beam_size", None, "Default: the hparams set's decode.beam_size (paper: 4). 1 = greedy.")
flags.DEFINE_float("alpha", None, "Length penalty exponent; default the set's (paper: 0.6).")
flags.DEFINE_integer("extra_length", None, "Max output length = input length + this; default the set's (50).")
flags.DEFINE_integer("batch_size", None, "Sentences per batch; default the set's decode.batch_size.")
flags.DEFINE_integer("parallel_batches", 1, "Batches decoded at once, each on its own thread: on a CPU a "
                     "second batch uses the cycles one batch leaves idle between its matmuls (2 suits a 2-core "
                     "CPU; docs/performance.md has the gain). Outputs are the same.", lower_bound=1)
flags.DEFINE_enum("mixed_precision", "none", ["none", "mixed_bfloat16", "mixed_float16"],
                  "Compute dtype of decoding, whatever the run trained in: mixed_bfloat16 runs the matmuls "
                  "in bfloat16 (fast on CPUs with AMX or AVX512_BF16; outputs can differ slightly, see README).")
flags.DEFINE_bool("return_beams", False, "Write all beams: text<TAB>score for each, tab-separated, per line.")


def main(argv) -> None:
    load_registries()
    from t2t_lite.decoding.decode_lines import DecodeFileRequest, decode_file
    from t2t_lite.run import RunRequest

    run_request = RunRequest(
        output_dir=FLAGS.output_dir, checkpoint_path=FLAGS.checkpoint_path, data_dir=FLAGS.data_dir,
        problem=FLAGS.problem, hparams_set=FLAGS.hparams_set, mixed_precision=FLAGS.mixed_precision,
        beam_size=FLAGS.beam_size, alpha=FLAGS.alpha, extra_length=FLAGS.extra_length, batch_size=FLAGS.batch_size)
    request = DecodeFileRequest(run_request, decode_from_file=FLAGS.decode_from_file,
                                decode_to_file=FLAGS.decode_to_file, decode_reference=FLAGS.decode_reference,
                                parallel_batches=FLAGS.parallel_batches, return_beams=FLAGS.return_beams)
    decode_file(request, log=lambda line: print(line, file=sys.stderr))


def run() -> None:
    run_main(main, "t2t-lite-decoder")


if __name__ == "__main__":
    run()
