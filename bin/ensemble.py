"""t2t-lite-ensemble: name the runs a run is decoded with by default, as one ensemble.

  t2t-lite-ensemble --output_dir=RUN --partners=RUN2,RUN3

Afterwards t2t-lite-decoder --output_dir=RUN, t2t-lite-scorer and Translator.from_run(RUN) average the
log-probabilities of RUN's model and its partners' (each at the checkpoint --checkpoint picks), as
--checkpoint_path=RUN,RUN2,RUN3 does; --checkpoint_path=RUN opens RUN alone. --partners= (empty) makes RUN
decode alone again. The record is RUN/ensemble.json, its paths relative to RUN (docs/decoding.md#ensembles).
"""
import sys

from absl import flags

from t2t_lite.bin.cli import run_main
from t2t_lite.errors import UserError

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "The run decoded with its partners by default.")
flags.DEFINE_list("partners", None, "Other run directories (comma-separated), decoded with --output_dir's model; "
                  "empty: none, the run decodes alone.")


def main(argv) -> None:
    if not FLAGS.output_dir or FLAGS.partners is None:
        raise UserError("--output_dir and --partners are required (--partners= for none)")
    from t2t_lite.run import name_partners

    name_partners(FLAGS.output_dir, FLAGS.partners)
    partners = f"with {', '.join(FLAGS.partners)} as one ensemble" if FLAGS.partners else "alone"
    print(f"{FLAGS.output_dir} decodes {partners}", file=sys.stderr)


def run() -> None:
    run_main(main, "t2t-lite-ensemble")


if __name__ == "__main__":
    run()
