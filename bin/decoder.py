"""t2t-lite-decoder: translate (or parse) a file with a trained model, optionally scoring it.

  t2t-lite-decoder --output_dir=RUN --decode_from_file=src.txt --decode_to_file=out.txt --decode_reference=ref.txt
  echo "A dog runs." | t2t-lite-decoder --output_dir=RUN --data_dir=DATA --decode_from_file=-

T2T_LITE_KERNEL_LAYOUT and T2T_LITE_STEP_MATMUL set how a decoding step multiplies on a CPU
(t2t_lite/environment.py, docs/performance.md).
"""
import sys

from absl import flags

from t2t_lite.bin import run_flags
from t2t_lite.bin.cli import run_main
from t2t_lite.errors import UserError

FLAGS = flags.FLAGS
run_flags.define("decodes")
flags.adopt_module_key_flags(run_flags)
flags.DEFINE_string("decode_from_file", None, "Source text, one sentence per line (UTF-8); - reads standard input "
                    "and writes each output as soon as it is decoded.")
flags.DEFINE_string("decode_to_file", None, "Where outputs go, one line per input line; default stdout.")
flags.DEFINE_string("decode_reference", None, "Reference file: print the problem's scores (BLEU, chrF2 and TER; "
                    "bracket F1 for parsing; exact match for algorithmic problems).")
flags.DEFINE_string("paper_bleu_language", None, "With --decode_reference, also print the paper's BLEU (Moses-"
                    "tokenized for this target language, e.g. de or fr, compounds split).")
flags.DEFINE_integer("batch_size", None, "Sentences per batch; default the set's decode.batch_size.")
flags.DEFINE_integer("parallel_batches", None, "Batches decoded at once, each on its own thread: on a CPU a "
                     "second batch uses the cycles one batch leaves idle between its matmuls. Outputs are the "
                     "same. Default: 2 where the process may use two or more cores, else 1; standard input is "
                     "decoded a batch at a time.", lower_bound=1)
flags.DEFINE_integer("nbest", 1, "Hypotheses per input line, best first (at most the beam size).")
flags.DEFINE_enum("output_format", "text", ["text", "jsonl"], "text: the best output per line, or Moses n-best "
                  "lines (INDEX ||| TEXT ||| SCORE) with --nbest > 1; jsonl: per line {source, hypotheses: "
                  "[{text, score, ids}]}.")
flags.DEFINE_float("sampling_temperature", 0.0, "Sample each token at this temperature instead of beam search "
                   "(e.g. 1.0 for back-translation); 0 = beam search.")
flags.DEFINE_integer("sampling_topk", 0, "With sampling, sample among the k most likely tokens; 0 = all.")
flags.DEFINE_string("export_dir", None, "Decode an export instead of a run: the numbered version directory "
                    "t2t-lite-exporter printed: a SavedModel (decodes with the beam it was exported with) or a "
                    "CTranslate2 model (takes --beam_size).")
flags.DEFINE_string("compute_type", "default", "With a CTranslate2 --export_dir: its compute type (int8, "
                    "int8_float32, float32, bfloat16, ...); default what its weights were saved in.")
flags.DEFINE_bool("output_trees", False, "For a parser: write bracketed trees with the words put back "
                  "instead of its linearised output. A words-form parser writes no tags, so its words get XX "
                  "and punctuation the tag EVALB reads: (S (NP (XX The) (XX cat)) (VP (XX sat)) (. .)); a "
                  "tags-form parser's trees keep its predicted tags.")
flags.DEFINE_bool("input_tokenized", False, "The input lines are tokens already, separated by spaces, and are "
                  "read as they are. Without it a parser tokenizes raw text as its problem says (Penn Treebank "
                  "tokens for the PTB parsers: \"mat.\" -> mat . , \"(\" -> -LRB-); other problems read raw text "
                  "either way.")
flags.DEFINE_integer("random_seed", None, "With sampling, a seed that makes the samples reproducible.")


def main(argv) -> None:
    from t2t_lite import environment
    from t2t_lite.bin.lines import DecodeFileRequest, decode_file
    from t2t_lite.decoding.request import SamplingSettings

    if FLAGS.sampling_temperature < 0:
        raise UserError(f"--sampling_temperature must be at least 0 (0 is beam search), "
                        f"got {FLAGS.sampling_temperature}")
    if FLAGS.sampling_temperature == 0 and (FLAGS.sampling_topk or FLAGS.random_seed is not None):
        raise UserError("--sampling_topk and --random_seed need --sampling_temperature above 0 (0 is beam search)")
    sampling = SamplingSettings(FLAGS.sampling_temperature, FLAGS.sampling_topk, FLAGS.random_seed) \
        if FLAGS.sampling_temperature > 0 else None
    run_request = run_flags.run_request(batch_size=FLAGS.batch_size, nbest=FLAGS.nbest, sampling=sampling)
    # The rest of the request's fields are this command's flags of the same names.
    names = ("decode_from_file", "decode_to_file", "decode_reference", "parallel_batches", "output_format",
             "paper_bleu_language", "export_dir", "compute_type", "output_trees", "input_tokenized")
    # T2T_LITE_KERNEL_LAYOUT and T2T_LITE_STEP_MATMUL's settings for a run's decoding steps; None for an export
    # (which has its own), so a CTranslate2 export decodes without importing TensorFlow.
    step_matmul = None if FLAGS.export_dir else environment.step_matmul_settings()
    request = DecodeFileRequest(run_request, step_matmul=step_matmul, **{name: FLAGS[name].value for name in names})
    decode_file(request, log=lambda line: print(line, file=sys.stderr, flush=True))


def run() -> None:
    run_main(main, "t2t-lite-decoder")


if __name__ == "__main__":
    run()
