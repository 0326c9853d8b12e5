"""How legacy_parser/ was made, with t2t-lite before decoder-input features were plug-ins (af962de):
a tiny parser with the word pointer and open phrases as the two ModelHParams booleans of then, trained 40
steps on a slice of the PTB sample; its run directory (hparams.json, the last checkpoint), its data's
vocabulary and config, its .keras file, and its outputs decoded then (constrained and free), the lines
today's code must reproduce. Decoded and saved in float32 (mixed_precision "none"), which every CPU computes
alike.

    PYTHONPATH=<checkout at af962de>:<it>/tests python tests/data/legacy_parser/make.py WORK_DIR
"""
import json
import pathlib
import shutil
import sys

import tensorflow as tf

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # tests/, for tiny_parsers
from tiny_parsers import linearised, train_tiny_parser  # noqa: E402

from t2t_lite.inference.translator import Translator  # noqa: E402
from t2t_lite.decoding.request import DecodeRequest  # noqa: E402
from t2t_lite.run import RunRequest, open_run  # noqa: E402

SENTENCES = ["The cat sat on the mat .", "Prices rose in May , did n't they ?",
             "Pierre Vinken , 61 years old , will join the board as a nonexecutive director Nov. 29 ."]

work = pathlib.Path(sys.argv[1])
work.mkdir(parents=True)
run, data, _ = train_tiny_parser(work, "parsing_ptb_sample_words", "word_pointer=true,open_phrases=true")
here = pathlib.Path(__file__).parent
outputs = {}
for constrained in (True, False):
    translator = Translator.from_run(run, beam_size=3, constrained_decoding=constrained, extra_length=20,
                                     mixed_precision="none")
    outputs["constrained" if constrained else "free"] = linearised(translator, SENTENCES)
model = open_run(RunRequest(output_dir=run, data_dir=data, decode=DecodeRequest(mixed_precision="none"))).model
model.save(str(here / "parser.keras"))
# The model's variables alone (a trained run's checkpoint also holds the optimizer's slots and the data's place).
(here / "run").mkdir(exist_ok=True)
checkpoint = tf.train.Checkpoint(model=model)
checkpoint.save_counter.assign(1)  # created now, so that a restore finds it as in a trained run's checkpoint
checkpoint.write(str(here / "run" / "ckpt-40"))
(here / "run" / "checkpoint").write_text('model_checkpoint_path: "ckpt-40"\nall_model_checkpoint_paths: "ckpt-40"\n')
shutil.copy(pathlib.Path(run) / "hparams.json", here / "run")
(here / "data").mkdir(exist_ok=True)
for name in ("problem_config.json", "vocab.model"):
    shutil.copy(pathlib.Path(data) / name, here / "data")
(here / "outputs.json").write_text(json.dumps({"sentences": SENTENCES, **outputs}, indent=1) + "\n")
print(outputs)
