"""Preparing a problem's data in --data_dir: the flags and the step shared by t2t-lite-datagen and
t2t-lite-trainer --generate_data, so both take the same source flags and do the same work."""
from absl import flags

FLAGS = flags.FLAGS
flags.DEFINE_string("problem", None, "Registered problem name (t2t-lite-trainer --registry_help lists them).")
flags.DEFINE_string("data_dir", None, "The problem's prepared data: vocabulary, shards and problem_config.json "
                    "(written by t2t-lite-datagen or t2t-lite-trainer --generate_data).")
flags.DEFINE_string("tmp_dir", None, "Downloads (tensorflow-datasets' data_dir); default: its own.")
flags.DEFINE_string("train_files", None, "SRC,TGT parallel text files (.gz allowed) for training.")
flags.DEFINE_string("dev_files", None, "SRC,TGT parallel text files for the dev split (WMT: newstest2013).")
flags.DEFINE_string("test_files", None, "SRC,TGT parallel text files for the test split (WMT: newstest2014).")
flags.DEFINE_integer("vocab_size", None, "Shared vocabulary size of the data to prepare; default: the problem's "
                     "(37000 En-De, 32000 En-Fr). t2t-lite-trainer --dry_run builds a model of this size.")
flags.DEFINE_integer("num_shards", 10, "TFRecord shards of the train split.")
flags.DEFINE_integer("max_vocab_sentences", 1_000_000, "Training sentences sampled to train the vocabulary.")
flags.DEFINE_string("vocab_from", None, "Encode with an existing vocabulary instead of training one: a prepared "
                    "--data_dir, a run's --output_dir (through the data_dir it recorded) or an export's version "
                    "directory. For fine-tuning that model on new data (--warm_start_from); not with --vocab_size.")
flags.DEFINE_string("vocab_file", None, "Use a SentencePiece model trained elsewhere (PATH.model) instead of "
                    "training one. It is rewritten with PAD at id 0 and EOS at 1 (added if missing), and the "
                    "rewritten model is the vocabulary from then on; not with --vocab_size or --vocab_from.")
for _side, _language in (("source", "English for WMT"), ("target", "the other language")):
    flags.DEFINE_integer(f"{_side}_vocab_size", None, f"Give the {_side} ({_language}) a vocabulary of its own, of "
                         f"this size, instead of the shared one (e.g. for scripts that differ). Any --{_side}_vocab_* "
                         "flag asks for two; a side given none trains one of the problem's default size. Not with "
                         "--vocab_size, --vocab_file or --vocab_from.")
    flags.DEFINE_string(f"{_side}_vocab_file", None, f"As --vocab_file, for the {_side}'s own vocabulary.")
    flags.DEFINE_string(f"{_side}_vocab_from", None, f"As --vocab_from, for the {_side}'s own vocabulary: that "
                        f"place's {_side} vocabulary (its shared one if it has one).")

flags.DEFINE_float("max_length_ratio", None, "Cleaning of the train split: drop pairs whose longer side has more "
                   "than this many times the shorter's characters (whitespace aside; the shorter counted as at "
                   "least 12); 0: off. Default: the problem's (translate_files and WMT: 3; others: off).")
flags.DEFINE_boolean("drop_copies", None, "Cleaning of the train split: drop pairs whose source equals their "
                     "target. Default: the problem's (translate_files and WMT: true; others: false).")
flags.DEFINE_boolean("drop_duplicates", None, "Cleaning of the train split: drop repeats of a (source, target) "
                     "pair, keeping the first. Default: the problem's (translate_files and WMT: true).")

OPTION_FLAGS = ("train_files", "dev_files", "test_files", "vocab_size", "num_shards", "max_vocab_sentences",
                "vocab_from", "vocab_file", "source_vocab_size", "target_vocab_size", "source_vocab_file",
                "target_vocab_file", "source_vocab_from", "target_vocab_from", "max_length_ratio", "drop_copies",
                "drop_duplicates")


def generate_data(problem, max_length: int = 0) -> None:
    """Prepares (or finishes preparing) `problem`'s data in its data_dir from the flags; one line per split.

    Args:
      problem: a registered problem constructed with --data_dir.
      max_length: also report how many examples are longer than this; 0 skips the count.
    """
    from t2t_lite.data.cleaning import report_line
    from t2t_lite.data.text_problem import Text2TextProblem
    from t2t_lite.files import check_dir_can_be_written

    if not isinstance(problem, Text2TextProblem):
        print(f"{FLAGS.problem} generates its examples in memory; there is nothing to prepare")
        return
    # Before the vocabulary is trained (minutes on a large corpus) rather than when it is saved.
    check_dir_can_be_written(problem.data_dir, "--data_dir")
    config = problem.generate_data(FLAGS.tmp_dir, **{name: FLAGS[name].value for name in OPTION_FLAGS})
    for split, counts in config["splits"].items():
        line = (f"{split}: {counts['examples']:,} examples in {counts['num_shards']} shards; "
                f"{counts['skipped_empty']:,} pairs skipped with an empty side")
        if max_length > 0:
            longer = problem.count_longer_than(split, max_length)
            line += f"; {longer:,} longer than {max_length} tokens (training drops them)"
        print(line)
        cleaning = counts.get("cleaning")
        if cleaning and any(cleaning["rules"].values()):
            print(report_line(split, cleaning))
    sizes = (f"source vocabulary {problem.source_vocab_size} pieces, target vocabulary {problem.vocab_size}"
             if problem.separate_vocabularies else f"vocabulary: {problem.vocab_size} pieces")
    print(f"{sizes}; data ready in {problem.data_dir}")
