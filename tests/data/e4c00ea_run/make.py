"""How e4c00ea_run/ was made, with t2t-lite at e4c00ea (before the layers and the decoding step were refactored):
a tiny translate_files run on a made-up word-for-word language, trained 90 steps through t2t_lite.train; its
run directory as the trainer left it (hparams.json, dev_scores.json, its one checkpoint with the optimizer's
slots, best/; not the TensorBoard logs), its data's vocabulary and config, its .keras file, its SavedModel
export (beam 3), and the lines the run (beam 3 and greedy) and the export decoded then, which today's code must
reproduce. Everything in float32 (mixed_precision "none"), which every CPU computes alike.

It trains under `distribution`="mirrored" (on the one CPU), as a run on several GPUs does: such a run's
checkpoint holds no data iterator position, which under the default strategy is a 10,000-example shuffle
buffer (4.3 MB here) that no restore for decoding reads.

    git worktree add /tmp/old e4c00ea
    PYTHONPATH=/tmp/old python tests/data/e4c00ea_run/make.py [WORK_DIR]
"""
import json
import pathlib
import random
import shutil
import sys
import tempfile

import t2t_lite
from t2t_lite import environment
from t2t_lite.decoding.request import DecodeRequest
from t2t_lite.export.exporter import ExportRequest, export_run
from t2t_lite.inference.translator import Translator
from t2t_lite.problems import translate  # registers translate_files
from t2t_lite.registry import problems
from t2t_lite.run import RunRequest, open_run

print("t2t_lite from", t2t_lite.__file__)
print("translate_files from", translate.__file__)
if pathlib.Path(translate.__file__).parents[1] != pathlib.Path(t2t_lite.__file__).parents[1]:
    sys.exit("t2t_lite and its problems come from two checkouts; put the old checkout first on PYTHONPATH")

HERE = pathlib.Path(__file__).resolve().parent  # where the data go

# 1+1 layers of width 16, no dropout; a short warmup and a high rate so that 90 steps learn some words.
TINY = ("d_model=16,d_ff=64,num_heads=2,num_encoder_layers=1,num_decoder_layers=1,dropout=0,attention_dropout=0,"
        "relu_dropout=0,average_last_checkpoints=0,train.batch_size=1024,train.warmup_steps=20,"
        "train.learning_rate_constant=2.0")
STEPS = 90
VOCAB_SIZE = 320  # 256 byte pieces, PAD, EOS, UNK, the letters, and some 40 merges
EXTRA_LENGTH = 8
# English words and their made-up translations; the target says the sentence word for word, adjectives after
# their noun.
DETERMINERS = {"the": "lo", "a": "un"}
ADJECTIVES = {"big": "grando", "small": "pikka", "red": "rossu", "old": "vekki"}
NOUNS = {"cat": "gatto", "dog": "kano", "bird": "ucello", "fish": "pesko", "man": "omo"}
VERBS = {"sees": "vidas", "likes": "amas", "eats": "mangas", "follows": "sekvas"}
SENTENCES = ["the cat sees a dog", "a big dog likes the small fish", "the old man eats a red bird",
             "a small bird follows the big cat", "the red fish sees the old dog"]


def noun_phrase(rng: random.Random) -> tuple[str, str]:
    determiner, noun = rng.choice(list(DETERMINERS)), rng.choice(list(NOUNS))
    adjective = rng.choice([None, *ADJECTIVES])
    source = [determiner, *([adjective] if adjective else []), noun]
    target = [DETERMINERS[determiner], NOUNS[noun], *([ADJECTIVES[adjective]] if adjective else [])]
    return " ".join(source), " ".join(target)


def pairs(count: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    made = []
    for _ in range(count):
        (subject, subject_t), verb, (obj, obj_t) = noun_phrase(rng), rng.choice(list(VERBS)), noun_phrase(rng)
        made.append((f"{subject} {verb} {obj}", f"{subject_t} {VERBS[verb]} {obj_t}"))
    return made


def write_split(raw: pathlib.Path, split: str, count: int, seed: int) -> str:
    made = pairs(count, seed)
    for side, suffix in ((0, "en"), (1, "xx")):
        (raw / f"{split}.{suffix}").write_text("".join(pair[side] + "\n" for pair in made), encoding="utf-8")
    return f"{raw}/{split}.en,{raw}/{split}.xx"


def decoded(translator: Translator) -> list[str]:
    return translator.translate(SENTENCES)


def main(work: pathlib.Path) -> None:
    raw, data, run, exports = work / "raw", work / "data", work / "run", work / "exports"
    for made in ("run", "data", "saved_model"):  # a previous make's
        shutil.rmtree(HERE / made, ignore_errors=True)
    raw.mkdir(parents=True)
    problem = problems.get("translate_files")(str(data))
    problem.generate_data(None, vocab_size=VOCAB_SIZE, num_shards=1, train_files=write_split(raw, "train", 3000, 1),
                          dev_files=write_split(raw, "dev", 100, 2), log=lambda line: None)
    t2t_lite.train(problem="translate_files", hparams_set="transformer_tiny", output_dir=str(run),
                   data_dir=str(data), hparams=TINY, train_steps=STEPS, eval_steps=1, save_checkpoints_steps=STEPS,
                   log_every_steps=STEPS // 2, eval_bleu_sentences=0, mixed_precision="none", memory_probe=False,
                   random_seed=1, distribution="mirrored")
    outputs = {"sentences": SENTENCES}
    for name, beam in (("beam3", 3), ("greedy", 1)):
        outputs[f"run_{name}"] = decoded(Translator.from_run(str(run), data_dir=str(data), beam_size=beam,
                                                             extra_length=EXTRA_LENGTH, mixed_precision="none"))
    # As t2t-lite-exporter --output_dir=RUN --data_dir=DATA --export_dir=EXPORTS --model_name=tiny --beam_size=3
    # --extra_length=8 --mixed_precision=none does it. Only beam 3: each export's graph is ~1 MB.
    decode = DecodeRequest(beam_size=3, extra_length=EXTRA_LENGTH, mixed_precision="none")
    request = ExportRequest(export_dir=str(exports), run=RunRequest(output_dir=str(run), data_dir=str(data),
                                                                      decode=decode),
                            model_name="tiny", step_matmul=environment.step_matmul_settings())
    version = export_run(request, log=print)
    outputs["saved_model_beam3"] = decoded(Translator.from_export(version))
    shutil.copytree(version, HERE / "saved_model")
    opened = open_run(RunRequest(output_dir=str(run), data_dir=str(data), decode=DecodeRequest(mixed_precision="none")))
    print("the .keras file of", opened.checkpoint)
    opened.model.save(str(HERE / "model.keras"))
    keep(run, data)
    (HERE / "outputs.json").write_text(json.dumps(outputs, indent=1) + "\n")
    print(json.dumps(outputs, indent=1))


def keep(run: pathlib.Path, data: pathlib.Path) -> None:
    """The run directory but its TensorBoard logs, and the data directory's vocabulary and config (not its
    TFRecord shards, which only training reads)."""
    shutil.copytree(run, HERE / "run", ignore=shutil.ignore_patterns("train", "eval"))
    (HERE / "data").mkdir()
    for name in ("problem_config.json", "vocab.model"):
        shutil.copy(data / name, HERE / "data")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(pathlib.Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as work:
            main(pathlib.Path(work))
