"""t2t-lite-datagen: prepare a problem's vocabulary and TFRecord shards in --data_dir.

  t2t-lite-datagen --problem=translate_files --data_dir=/tmp/m30k \\
      --train_files=train.en,train.de --dev_files=val.en,val.de --vocab_size=8000
  t2t-lite-datagen --problem=wmt_ende --data_dir=/data/ende --tmp_dir=/data/tfds

Rerun the same command after an interruption: finished shards are kept.
"""
from absl import flags

from t2t_lite import registry
from t2t_lite.bin.cli import load_registries, run_main

FLAGS = flags.FLAGS
flags.DEFINE_string("problem", None, "Registered problem name.")
flags.DEFINE_string("data_dir", None, "Where the vocabulary, shards and problem_config.json go.")
flags.DEFINE_string("tmp_dir", None, "Downloads (tensorflow-datasets' data_dir); default: its own.")
flags.DEFINE_string("train_files", None, "SRC,TGT parallel text files (.gz allowed) for training.")
flags.DEFINE_string("dev_files", None, "SRC,TGT parallel text files for the dev split (WMT: newstest2013).")
flags.DEFINE_string("test_files", None, "SRC,TGT parallel text files for the test split (WMT: newstest2014).")
flags.DEFINE_integer("vocab_size", None, "Shared vocabulary size; default: the problem's (37000 En-De, 32000 En-Fr).")
flags.DEFINE_integer("num_shards", 10, "TFRecord shards of the train split.")
flags.DEFINE_integer("max_vocab_sentences", 1_000_000, "Training sentences sampled to train the vocabulary.")
flags.DEFINE_integer("max_length", 256, "Report how many examples are longer than this (training drops "
                     "them); 0 skips the count, a full read of the data.")
flags.mark_flags_as_required(["problem", "data_dir"])

_OPTION_FLAGS = ("train_files", "dev_files", "test_files", "vocab_size", "num_shards", "max_vocab_sentences")


def main(argv) -> None:
    load_registries()
    from t2t_lite.data.text_problem import Text2TextProblem, count_longer_than

    problem = registry.problems.get(FLAGS.problem)(FLAGS.data_dir)
    if not isinstance(problem, Text2TextProblem):
        print(f"{FLAGS.problem} generates its examples in memory; there is nothing to prepare")
        return
    config = problem.generate_data(FLAGS.tmp_dir, **{name: FLAGS[name].value for name in _OPTION_FLAGS})
    for split, counts in config["splits"].items():
        line = (f"{split}: {counts['examples']:,} examples in {counts['num_shards']} shards; "
                f"{counts['skipped_empty']:,} pairs skipped with an empty side")
        if FLAGS.max_length > 0:
            longer = count_longer_than(problem.dataset(split), FLAGS.max_length)
            line += f"; {longer:,} longer than {FLAGS.max_length} tokens (training drops them)"
        print(line)
    print(f"vocabulary: {problem.vocab_size} pieces; data ready in {FLAGS.data_dir}")


def run() -> None:
    run_main(main, "t2t-lite-datagen")


if __name__ == "__main__":
    run()
