"""t2t-lite-scorer: the model's log-probability of given translations (forced decoding), one line per pair.

  t2t-lite-scorer --output_dir=RUN --source_file=test.en --target_file=test.de

Each line: log P(target | source) summed over the target's tokens (EOS included), the token count, and that
sum over the GNMT length penalty (the score beam search reports), tab-separated; an empty pair gives an empty line.
"""
import sys

from absl import flags

from t2t_lite.bin import run_flags
from t2t_lite.bin.cli import run_main

FLAGS = flags.FLAGS
run_flags.define("scores with")
flags.adopt_module_key_flags(run_flags)
flags.DEFINE_string("source_file", None, "Sources, one sentence per line (UTF-8).")
flags.DEFINE_string("target_file", None, "Targets to score, line-aligned with --source_file.")
flags.DEFINE_string("output_file", None, "Where the scores go, one line per pair; default stdout.")
flags.DEFINE_integer("batch_size", None, "Pairs per batch; default the set's decode.batch_size.")


def main(argv) -> None:
    from t2t_lite.bin.lines import ScoreFileRequest, score_file

    request = ScoreFileRequest(run_flags.run_request(batch_size=FLAGS.batch_size), source_file=FLAGS.source_file,
                               target_file=FLAGS.target_file, output_file=FLAGS.output_file)
    score_file(request, log=lambda line: print(line, file=sys.stderr, flush=True))


def run() -> None:
    run_main(main, "t2t-lite-scorer")


if __name__ == "__main__":
    run()
