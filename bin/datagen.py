"""t2t-lite-datagen: prepare a problem's vocabulary and TFRecord shards in --data_dir.

  t2t-lite-datagen --problem=translate_files --data_dir=/tmp/m30k \\
      --train_files=train.en,train.de --dev_files=val.en,val.de --vocab_size=8000
  t2t-lite-datagen --problem=wmt_ende --data_dir=/data/ende --tmp_dir=/data/tfds

Rerun the same command after an interruption: finished shards are kept.
t2t-lite-trainer --generate_data takes the same flags and does the same before training.
"""
from absl import flags

from t2t_lite import registry
from t2t_lite.bin import prepare
from t2t_lite.bin.cli import run_main

FLAGS = flags.FLAGS
flags.adopt_module_key_flags(prepare)
flags.DEFINE_integer("max_length", 256, "Report how many examples are longer than this (training drops "
                     "them); 0 skips the count.")
flags.mark_flags_as_required(["problem", "data_dir"])


def main(argv) -> None:
    prepare.generate_data(registry.problems.get(FLAGS.problem)(FLAGS.data_dir), FLAGS.max_length)


def run() -> None:
    run_main(main, "t2t-lite-datagen")


if __name__ == "__main__":
    run()
