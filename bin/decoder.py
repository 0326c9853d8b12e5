"""t2t-lite-decoder: translate (or parse) a file with a trained model, optionally scoring it.

  t2t-lite-decoder --output_dir=RUN --decode_from_file=src.txt --decode_to_file=out.txt --decode_reference=ref.txt
"""
import dataclasses
import os
import sys

from absl import flags

from t2t_lite import registry
from t2t_lite.bin.cli import load_registries, run_main
from t2t_lite.errors import UserError

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
flags.DEFINE_integer("parallel_batches", 1, "Batches decoded at once, each on its own thread; 2 uses a "
                     "2-core CPU's idle cycles (1.24-1.27x the sentences/s in benchmarks/RESULTS.md, sitting 5).",
                     lower_bound=1)
flags.DEFINE_enum("mixed_precision", "none", ["none", "mixed_bfloat16", "mixed_float16"],
                  "Compute dtype of decoding, whatever the run trained in: mixed_bfloat16 runs the matmuls "
                  "in bfloat16 (fast on CPUs with AMX or AVX512_BF16; outputs can differ slightly, see README).")
flags.DEFINE_bool("return_beams", False, "Write all beams: text<TAB>score for each, tab-separated, per line.")


def decode_hparams(defaults):
    """The run's decode hparams with any decoding flags given on the command line."""
    given = {name: FLAGS[name].value for name in ("beam_size", "alpha", "extra_length", "batch_size")
             if FLAGS[name].value is not None}
    hp = dataclasses.replace(defaults, **given)
    if hp.beam_size < 1 or hp.batch_size < 1 or hp.extra_length < 0:
        raise UserError("--beam_size and --batch_size must be at least 1 and --extra_length at least 0")
    return hp


def check_output_file(path: str) -> None:
    """Refuses an output path that cannot be written, before the (long) decode rather than after it."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UserError(f"--decode_to_file {path!r} is a directory; give a file name")
    if not os.path.isdir(directory):
        raise UserError(f"--decode_to_file {path!r}: directory {directory!r} does not exist; create it first")
    if not os.access(directory, os.W_OK):
        raise UserError(f"--decode_to_file {path!r}: directory {directory!r} is not writable")


def check_vocab_size(problem, model_vocab_size: int) -> None:
    """Refuses a --data_dir whose vocabulary is not the one the model was trained with (its size differs)."""
    if problem.vocab_size != model_vocab_size:
        raise UserError(f"the vocabulary of --data_dir {FLAGS.data_dir!r} has {problem.vocab_size} ids but the "
                        f"model was trained with {model_vocab_size}; pass the run's --data_dir")


def format_line(hypotheses, return_beams: bool) -> str:
    if return_beams:
        return "\t".join(f"{h.text}\t{h.score:.4f}" for h in hypotheses)
    return hypotheses[0].text if hypotheses else ""


def main(argv) -> None:
    load_registries()
    from t2t_lite.decoding.decode_lines import decode_lines
    from t2t_lite.decoding.decoder import Decoder
    from t2t_lite.decoding.restore import find_checkpoint, load_run_spec, restore_model
    from t2t_lite.files import atomic_write_text, read_lines
    from t2t_lite.training.precision import compute_dtype

    if not FLAGS.decode_from_file:
        raise UserError("--decode_from_file is required")
    if FLAGS.decode_to_file:
        check_output_file(FLAGS.decode_to_file)
    lines = read_lines(FLAGS.decode_from_file)
    references = read_lines(FLAGS.decode_reference) if FLAGS.decode_reference else None
    if references is not None and len(references) != len(lines):
        raise UserError(f"--decode_reference has {len(references)} lines but --decode_from_file has {len(lines)}")
    checkpoint = find_checkpoint(FLAGS.output_dir, FLAGS.checkpoint_path)
    spec = load_run_spec(checkpoint, FLAGS.hparams_set)
    problem = registry.problems.get(FLAGS.problem or spec.problem)(FLAGS.data_dir)
    check_vocab_size(problem, spec.hparams.model.vocab_size)
    hp = decode_hparams(spec.hparams.decode)
    decoder = Decoder(restore_model(spec, checkpoint, FLAGS.mixed_precision), hp)
    print(f"decoding {len(lines)} lines from {checkpoint} (beam {hp.beam_size}, alpha {hp.alpha}) in "
          f"{compute_dtype(FLAGS.mixed_precision)}", file=sys.stderr)
    results = decode_lines(problem, decoder, lines, hp.batch_size,
                           progress=lambda line: print(line, file=sys.stderr),
                           parallel_batches=FLAGS.parallel_batches)
    text = "".join(format_line(r, FLAGS.return_beams) + "\n" for r in results)
    if FLAGS.decode_to_file:
        atomic_write_text(FLAGS.decode_to_file, text)
    else:
        sys.stdout.write(text)
    if references is not None:
        for line in problem.score([r[0].text for r in results], references, lines):
            print(line)


def run() -> None:
    run_main(main, "t2t-lite-decoder")


if __name__ == "__main__":
    run()
