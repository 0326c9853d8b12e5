#!/usr/bin/env bash
# Adaptation, measured (issue 87 item 4): what fine-tuning a general En->Fr model on a little in-domain text
# gains in domain, and what it forgets out of domain. The general model trains GENERAL_MINUTES on the shared
# Europarl sample (20k pairs; datagen skips its 36 pairs with an empty English side), dev newstest2012. The
# domain is a 10% subset of Multi30k En-Fr train (its first SUBSET_LINES = 2900 pairs), dev Multi30k val.
# Per seed, each for TUNE_MINUTES:
#   fine-tuned                   the subset in the general model's vocabulary, --warm_start_from the general run
#   subset alone (own vocab)     the subset from scratch with a vocabulary trained on it
#   subset alone (general vocab) the subset from scratch in the general model's vocabulary (fine-tuned's data)
# Every model (the general one unadapted too, once) decodes Multi30k test_2016_flickr (in domain) and
# newstest2013 (the general domain: what fine-tuning forgets) in float32 with the run's beam (4, alpha 0.6)
# from its averaged checkpoint; sacreBLEU (13a, t2t-lite-bleu) per seed and the mean. Nothing is chosen on
# a test set: the runs have fixed budgets and settings, each test set is decoded once per model, and the
# only choices made during training (the best checkpoint, which this does not decode) look at dev splits.
#
#   bash benchmarks/adaptation.sh WORK_DIR [GENERAL_MINUTES [TUNE_MINUTES]]     (defaults 30 and 5)
#
# Environment: SHARED_DATA (default ../shared/data beside the checkout), SEEDS (trainer --random_seed of the
# three subset runs, default "1 2 3"), GENERAL_SEED (1234, the trainer's default), SUBSET_LINES (2900),
# OWN_VOCAB_SIZE (4000), MAX_TEST_LINES (decode only the first N lines of each test set, for a quick trial of
# the script; default all: numbers with it set are not the benchmark's). A rerun keeps what WORK_DIR holds:
# the prepared data, each finished run (run dirs are named by their budget, so another budget trains anew)
# and each decoded file; it scores and prints the table again. Data dirs are not named by SUBSET_LINES or
# OWN_VOCAB_SIZE: give another of those a new WORK_DIR.
set -euo pipefail
USAGE="usage: adaptation.sh WORK_DIR [GENERAL_MINUTES [TUNE_MINUTES]]"
WORK=${1:?$USAGE}
GENERAL_MINUTES=${2:-30}
TUNE_MINUTES=${3:-5}
DATA=${SHARED_DATA:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}
SEEDS=${SEEDS:-1 2 3}
GENERAL_SEED=${GENERAL_SEED:-1234}
SUBSET_LINES=${SUBSET_LINES:-2900}
# The subset's own vocabulary: 4000, not translate_files' 8000. SentencePiece accepts 8000 (and more) on
# these 2900 pairs, but at 8000 1,455 of the pieces never occur in the subset's training text and 3,556 of
# the rest occur at most twice (6,545 occur), so nearly half the embedding rows learn little from 5,800
# sentences; at 4000, 3,534 pieces occur, 312 at most twice, for 16.1 pieces a sentence instead of 14.6.
# (Measured on the training text alone.) The general vocabulary stays 8000, fitted to its 20k pairs, so
# the two subset-alone rows differ in the vocabulary's size as well as in the text it was trained on.
OWN_VOCAB_SIZE=${OWN_VOCAB_SIZE:-4000}
GENERAL_VOCAB_SIZE=8000
MAX_TEST_LINES=${MAX_TEST_LINES:-}
RAW=$DATA/multi30k/raw
EUROPARL=$DATA/europarl_fr_en_sample20k/europarl-v7.fr-en.sample20k
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
START=$(date +%s)

# Training flags every run shares: the budget ends each run (--train_steps far beyond it), float32, and no
# dev decoding during training so the budget goes to training steps (dev loss is still evaluated).
TRAIN_FLAGS=(--problem=translate_files --hparams_set=transformer_small_data --train_steps=1000000
             --eval_bleu_sentences=0 --mixed_precision=none)
# train RUN DATA_DIR MINUTES SEED [FLAGS...]: skipped once RUN.done exists (written when the trainer finished);
# a run interrupted before that resumes its checkpoints on the rerun.
train() {
  local run=$1 data=$2 minutes=$3 seed=$4; shift 4
  [ -f "$WORK/$run.done" ] && { echo "$run: trained already"; return; }
  local t0; t0=$(date +%s)
  t2t-lite-trainer "${TRAIN_FLAGS[@]}" --data_dir="$WORK/$data" --output_dir="$WORK/$run" \
    --train_minutes="$minutes" --random_seed="$seed" "$@" 2>&1 | tee "$WORK/$run.log"
  echo "$run: trained in $(( $(date +%s) - t0 )) s wall"
  touch "$WORK/$run.done"
}

# 1. The general model.
[ -f "$WORK/general_data/problem_config.json" ] || t2t-lite-datagen --problem=translate_files \
  --data_dir="$WORK/general_data" --vocab_size=$GENERAL_VOCAB_SIZE \
  --train_files="$EUROPARL.en,$EUROPARL.fr" \
  --dev_files="$DATA/newstest2012/newstest2012.en,$DATA/newstest2012/newstest2012.fr"
GENERAL=general_${GENERAL_MINUTES}m
train "$GENERAL" general_data "$GENERAL_MINUTES" "$GENERAL_SEED"

# 2. The in-domain subset, prepared twice: in the general model's vocabulary, and with its own.
head -n "$SUBSET_LINES" "$RAW/train.en" > "$WORK/subset.en"
head -n "$SUBSET_LINES" "$RAW/train.fr" > "$WORK/subset.fr"
SUBSET_FILES=(--train_files="$WORK/subset.en,$WORK/subset.fr" --dev_files="$RAW/val.en,$RAW/val.fr")
[ -f "$WORK/subset_general_vocab_data/problem_config.json" ] || t2t-lite-datagen --problem=translate_files \
  --data_dir="$WORK/subset_general_vocab_data" --vocab_from="$WORK/$GENERAL" "${SUBSET_FILES[@]}"
[ -f "$WORK/subset_own_vocab_data/problem_config.json" ] || t2t-lite-datagen --problem=translate_files \
  --data_dir="$WORK/subset_own_vocab_data" --vocab_size="$OWN_VOCAB_SIZE" "${SUBSET_FILES[@]}"

# 3. Per seed: fine-tuned, and the subset alone with either vocabulary.
for seed in $SEEDS; do
  train "finetuned_${GENERAL_MINUTES}m_${TUNE_MINUTES}m_seed$seed" subset_general_vocab_data "$TUNE_MINUTES" "$seed" \
    --warm_start_from="$WORK/$GENERAL"
  train "alone_own_vocab_${TUNE_MINUTES}m_seed$seed" subset_own_vocab_data "$TUNE_MINUTES" "$seed"
  train "alone_general_vocab_${TUNE_MINUTES}m_seed$seed" subset_general_vocab_data "$TUNE_MINUTES" "$seed"
done

# 4. Decode each model once on each test set and score it.
SUFFIX=
[ -n "$MAX_TEST_LINES" ] && SUFFIX=.first$MAX_TEST_LINES
mkdir -p "$WORK/test" "$WORK/hyp"
# name, source, reference
TESTS=("m30k_test|$RAW/test_2016_flickr.en|$RAW/test_2016_flickr.fr"
       "newstest2013|$DATA/newstest2013/newstest2013.en|$DATA/newstest2013/newstest2013.fr")
for test in "${TESTS[@]}"; do
  IFS='|' read -r name source reference <<< "$test"
  for side in en fr; do
    file=$source; [ $side = fr ] && file=$reference
    if [ -n "$MAX_TEST_LINES" ]; then head -n "$MAX_TEST_LINES" "$file"; else cat "$file"; fi \
      > "$WORK/test/$name$SUFFIX.$side"
  done
done
# score RUN TEST: prints the sacreBLEU of RUN's decoding of TEST, decoding it first unless decoded already.
score() {
  local run=$1 name=$2$SUFFIX
  local hyp=$WORK/hyp/$run.$name.fr
  if [ ! -f "$hyp" ]; then
    local t0; t0=$(date +%s)
    t2t-lite-decoder --output_dir="$WORK/$run" --decode_from_file="$WORK/test/$name.en" \
      --decode_to_file="$hyp.partial" --mixed_precision=none > "$WORK/hyp/$run.$name.log" 2>&1 \
      || { tail -n 20 "$WORK/hyp/$run.$name.log" >&2; return 1; }
    mv "$hyp.partial" "$hyp"
    echo "$run on $name: decoded $(wc -l < "$hyp") lines in $(( $(date +%s) - t0 )) s wall" >&2
  fi
  local bleu
  bleu=$(t2t-lite-bleu --translation="$hyp" --reference="$WORK/test/$name.fr" 2> /dev/null \
    | sed -n 's/^BLEU (sacreBLEU 13a, detokenized) = \([0-9.]*\).*/\1/p')
  [ -n "$bleu" ] || { echo "adaptation.sh: no sacreBLEU line from t2t-lite-bleu for $hyp" >&2; return 1; }
  echo "$bleu"
}
declare -A BLEU
for test in m30k_test newstest2013; do
  BLEU[general,$test]=$(score "$GENERAL" $test)
  for seed in $SEEDS; do
    BLEU[finetuned,$test,$seed]=$(score "finetuned_${GENERAL_MINUTES}m_${TUNE_MINUTES}m_seed$seed" $test)
    BLEU[alone_own,$test,$seed]=$(score "alone_own_vocab_${TUNE_MINUTES}m_seed$seed" $test)
    BLEU[alone_general,$test,$seed]=$(score "alone_general_vocab_${TUNE_MINUTES}m_seed$seed" $test)
  done
done

# 5. The table.
mean() { python3 -c 'import sys; v = [float(x) for x in sys.argv[1:]]; print(f"{sum(v) / len(v):.2f}")' "$@"; }
echo
echo "Adaptation: general ${GENERAL_MINUTES} min on Europarl 20k (seed $GENERAL_SEED), subset runs ${TUNE_MINUTES} min" \
  "on the first $SUBSET_LINES Multi30k pairs; sacreBLEU${MAX_TEST_LINES:+ on the first $MAX_TEST_LINES lines of each test set (a trial, not the benchmark)}"
header="| model |"; rule="|---|"
for test in "Multi30k test" "newstest2013"; do
  for seed in $SEEDS; do header+=" $test seed $seed |"; rule+="---:|"; done
  header+=" $test mean |"; rule+="---:|"
done
echo "$header"; echo "$rule"
row="| general (unadapted) |"
for test in m30k_test newstest2013; do
  for seed in $SEEDS; do row+=" ${BLEU[general,$test]} |"; done
  row+=" ${BLEU[general,$test]} |"
done
echo "$row"
for model in "finetuned|fine-tuned" "alone_own|subset alone (own vocab $OWN_VOCAB_SIZE)" \
             "alone_general|subset alone (general vocab $GENERAL_VOCAB_SIZE)"; do
  IFS='|' read -r key label <<< "$model"
  row="| $label |"
  for test in m30k_test newstest2013; do
    values=()
    for seed in $SEEDS; do values+=("${BLEU[$key,$test,$seed]}"); row+=" ${BLEU[$key,$test,$seed]} |"; done
    row+=" $(mean "${values[@]}") |"
  done
  echo "$row"
done
echo "(the general model is one run, the same in every seed column; the seeds are the subset runs')"
echo "total wall time: $(( $(date +%s) - START )) s"
