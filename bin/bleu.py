"""t2t-lite-bleu: corpus BLEU of a translation against a reference, as sacreBLEU, as t2t-bleu and, asked, as the paper.

  t2t-lite-bleu --translation=decoded.de --reference=newstest2014.de

prints one line per convention, each with its sacreBLEU signature:
  BLEU (sacreBLEU 13a, detokenized) = 27.31  nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0
  BLEU (t2t-bleu intl, tokenized) = 28.12  nrefs:1|case:mixed|eff:no|tok:intl|smooth:exp|version:2.6.0
  chrF2 = 57.40  nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0
  TER = 60.12  nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:2.6.0

With --paper_bleu_language=de, also the paper's convention (get_ende_bleu.sh: Moses-tokenized, compound-split).
"""
from absl import flags

from t2t_lite.bin.cli import run_main
from t2t_lite.errors import UserError

FLAGS = flags.FLAGS
flags.DEFINE_string("translation", None, "Hypotheses: one detokenized sentence per line, UTF-8.")
flags.DEFINE_string("reference", None, "References: line-aligned with --translation, UTF-8.")
flags.DEFINE_string("paper_bleu_language", None, "Also print the paper's BLEU (t2t's get_ende_bleu.sh: Moses-"
                    "tokenized for this target language, e.g. de or fr, compounds split), the number the paper's "
                    "27.3 / 28.4 compare with.")


def main(argv) -> None:
    from t2t_lite.metrics.bleu import score_files

    if not FLAGS.translation or not FLAGS.reference:
        raise UserError("--translation and --reference are both required")
    for result in score_files(FLAGS.translation, FLAGS.reference, FLAGS.paper_bleu_language):
        print(result)


def run() -> None:
    run_main(main, "t2t-lite-bleu")


if __name__ == "__main__":
    run()
