#!/usr/bin/env bash
# A parser in a CPU time budget: parsing_ptb_sample (NLTK's WSJ sample, split by file number:
# docs/parsing.md#parsing_ptb_sample) prepared, trained for SECONDS of training time, its dev split
# (wsj_0160-0179) decoded with the set's beam and scored: EVALB bracket F1, the share of outputs that are
# well-formed trees before repair, and exact-tree match. The test split is never decoded here.
#
#   bash benchmarks/parsing_quality.sh WORK_DIR [SECONDS]
#
# Environment: PTB_DIR (the sample's .mrg files or an NLTK data directory; default WORK_DIR/tmp, where
# datagen downloads what is missing), PROBLEM (parsing_ptb_sample_words), USR_DIR (a --usr_dir for all three
# commands, e.g. one registering a variant of the problem), HPARAMS_SET (transformer_parsing_small_data), HPARAMS (overrides),
# VOCAB_SIZE (the problem's default), EXTRA_TRAIN_MRG (below), TRAIN_FLAGS (extra trainer flags), DECODE_FLAGS (extra decoder flags:
# a model that has not learned to end its trees runs every sentence to the set's extra_length (150 with
# beam 4 for the default set; 300 with beam 21 for transformer_wsj_parsing), so a smoke run wants e.g.
# DECODE_FLAGS='--beam_size=1 --extra_length=5').
# MEMBERS spends the budget on an ensemble: one run per ';'-separated entry of hparams overrides (each after
# HPARAMS), each trained for SECONDS divided by their number, WORK/run for the first and WORK/run_member<N> for
# the others, named WORK/run's partners (t2t-lite-ensemble), so that the dev decode, and any later
# --output_dir=WORK/run, decodes them as one ensemble. For the default set it defaults to the recipe
# "decoder_features=word_pointer+open_phrases;decoder_features=word_pointer": a run of the set beside one with the
# word pointer alone (docs/parsing.md#a-set-run-beside-a-word-pointer-run); MEMBERS= (empty) trains one run of the set.
# SEEDS (e.g. "1234 42 7") does the same with one run of the set per seed, WORK/run_seed<S> for the others.
# benchmarks/parsing_side_by_side.sh runs this script for t2t-lite's side, with TRAIN_FLAGS keeping a checkpoint
# every CHECKPOINT_STEPS steps for its curve; WORK_DIR/train.start records when training was launched.
set -euo pipefail
WORK=${1:?usage: parsing_quality.sh WORK_DIR [SECONDS]}
SECONDS_BUDGET=${2:-600}
PTB=${PTB_DIR:-$WORK/tmp}
SET=${HPARAMS_SET:-transformer_parsing_small_data}
PROBLEM=${PROBLEM:-parsing_ptb_sample_words}
USR=(${USR_DIR:+--usr_dir="$USR_DIR"})
if [ -n "${SEEDS:-}" ] && [ -n "${MEMBERS:-}" ]; then
  echo "parsing_quality.sh: give SEEDS or MEMBERS, not both" >&2; exit 2
fi
if [ -z "${SEEDS:-}" ] && [ "$SET" = transformer_parsing_small_data ]; then
  MEMBERS=${MEMBERS-"decoder_features=word_pointer+open_phrases;decoder_features=word_pointer"}
fi
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"

# EXTRA_TRAIN_MRG: more .mrg files (comma-separated) joining the sample's train split, e.g. the trees
# parsing_self_training.sh keeps; the dev split stays the sample's.
SPLITS=()
if [ -n "${EXTRA_TRAIN_MRG:-}" ]; then
  mapfile -t SPLITS < <(python3 - "$PTB" "$EXTRA_TRAIN_MRG" <<'EOF'
import sys
sys.path = [path for path in sys.path if path not in ("", ".")]
from t2t_lite.problems.ptb_sample import SPLIT_GLOBS, sample_directory
sample, extra = sample_directory(sys.argv[1]), sys.argv[2]
print("--train_files=" + ",".join([f"{sample}/{glob}" for glob in SPLIT_GLOBS["train"]] + [extra]))
print("--dev_files=" + ",".join(f"{sample}/{glob}" for glob in SPLIT_GLOBS["dev"]))
EOF
)
fi
t2t-lite-datagen "${USR[@]}" --problem="$PROBLEM" --data_dir="$WORK/data" --tmp_dir="$PTB" \
  ${VOCAB_SIZE:+--vocab_size="$VOCAB_SIZE"} "${SPLITS[@]}"

# The dev split as text: the words to parse and the gold linearised trees, one per line.
python3 - "$PTB" "$WORK" "$PROBLEM" "${USR_DIR:-}" <<'EOF'
import sys
# Not the working directory: run from a checkout, its t2t_lite/ would hide the installed package's problems.
sys.path = [path for path in sys.path if path not in ("", ".")]
from t2t_lite.problems.ptb_sample import sample_directory, split_files
from t2t_lite.problems.wsj_parsing import read_mrg_pairs
from t2t_lite.registry import problems
from t2t_lite.usr_dir import import_usr_dir

ptb, work, problem, usr_dir = sys.argv[1:]
if usr_dir:
    import_usr_dir(usr_dir)
form = problems.get(problem)(None).form
pairs = [pair for pair in read_mrg_pairs(split_files(sample_directory(ptb), "dev"), form) if pair[0]]
with open(f"{work}/dev.words", "w", encoding="utf-8") as words, open(f"{work}/dev.trees", "w", encoding="utf-8") as trees:
    for source, target in pairs:
        words.write(source + "\n")
        trees.write(target + "\n")
print(f"dev split: {len(pairs)} sentences")
EOF

SEED_LIST=(${SEEDS:-""})
MEMBER_LIST=()
[ -n "${MEMBERS:-}" ] && IFS=';' read -r -a MEMBER_LIST <<< "$MEMBERS"
# One run per seed, or per member (each with the default seed, or TRAIN_FLAGS').
COUNT=$(( ${#MEMBER_LIST[@]} > ${#SEED_LIST[@]} ? ${#MEMBER_LIST[@]} : ${#SEED_LIST[@]} ))
MINUTES=$(python3 -c "print($SECONDS_BUDGET / 60 / $COUNT)")
date +%s.%N > "$WORK/train.start"  # parsing_side_by_side.sh's F1 curve measures checkpoint times from here
RUNS=()
: > "$WORK/train.log"
for i in $(seq 0 $((COUNT - 1))); do
  seed=${SEED_LIST[$i]:-}
  member=${MEMBER_LIST[$i]:-}
  run="$WORK/run"
  [ "$i" -gt 0 ] && run="$WORK/run_${MEMBERS:+member$((i + 1))}${SEEDS:+seed$seed}"
  RUNS+=("$run")
  overrides="${HPARAMS:-}${member:+${HPARAMS:+,}$member}"
  t2t-lite-trainer "${USR[@]}" --problem="$PROBLEM" --data_dir="$WORK/data" --hparams_set="$SET" \
    --hparams="$overrides" --output_dir="$run" --train_minutes="$MINUTES" --train_steps=1000000 \
    --eval_bleu_sentences=0 ${seed:+--random_seed="$seed"} ${TRAIN_FLAGS:-} 2>&1 | tee -a "$WORK/train.log"
done
if [ "$COUNT" -gt 1 ]; then
  t2t-lite-ensemble "${USR[@]}" --output_dir="$WORK/run" --partners="$(IFS=,; echo "${RUNS[*]:1}")"
fi

start=$(date +%s)
# dev.words holds the treebank's own tokens: --input_tokenized, so they are parsed as they are rather than
# tokenized again (which would turn a closing '' into ``).
t2t-lite-decoder "${USR[@]}" --output_dir="$WORK/run" \
  --decode_from_file="$WORK/dev.words" --input_tokenized --decode_to_file="$WORK/dev.hyp" \
  --decode_reference="$WORK/dev.trees" ${DECODE_FLAGS:-} 2>&1 | tee "$WORK/decode.log"
echo "decode wall time: $(( $(date +%s) - start )) s"
