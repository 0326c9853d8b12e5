#!/usr/bin/env bash
# A parser in the same CPU budget, t2t-lite and OpenNMT-tf 2.32 one after the other on this machine (run it on an
# idle one), on PROBLEM (parsing_ptb_sample_words by default: NLTK's WSJ sample, docs/parsing.md#parsing_ptb_sample):
#   1. t2t-lite: benchmarks/parsing_quality.sh (datagen, SECONDS of training, dev decoded with the set's beam),
#      keeping a checkpoint every CHECKPOINT_STEPS steps for the curve (unless CURVE=0);
#   2. OpenNMT-tf: the same train split as text (benchmarks/peers/parsing/prepare.py), encoded with t2t-lite's own
#      SentencePiece model (same vocabulary and size), a Transformer of the t2t-lite set's sizes, dropouts,
#      optimiser, learning-rate schedule (Noam at the same peak where the set's schedule is not rsqrt), batch and decoding settings (benchmarks/peers/parsing/make_onmt.py),
#      SECONDS from the launch of its training process (benchmarks/peers/multi30k/train_budget.py), its last
#      checkpoint (or the average of the set's average_last_checkpoints) decoded on dev;
#   3. both dev outputs scored by t2t-lite's parsing scorer (benchmarks/peers/parsing/score.py: EVALB bracket F1,
#      well-formed before repair, exact tree match) in one table, and unless CURVE=0 dev F1 against training
#      minutes for every kept checkpoint of both (benchmarks/peers/parsing/curve.py: a table, a CSV and a PNG).
#
#   bash benchmarks/peers/setup.sh /tmp/peers        # once: the OpenNMT-tf venv
#   bash benchmarks/parsing_side_by_side.sh WORK_DIR [SECONDS]
#
# Environment: PTB_DIR (the sample's .mrg files or an NLTK data directory; default WORK_DIR/ptb, where datagen
# downloads what is missing), PROBLEM (parsing_ptb_sample_words), HPARAMS_SET (transformer_parsing_small_data), HPARAMS (overrides, applied to both
# toolkits: e.g. beam_size=1,extra_length=5 for a smoke run), VOCAB_SIZE, TRAIN_FLAGS (extra t2t-lite trainer
# flags), DECODE_FLAGS (extra t2t-lite decoder flags; the peer does not see them: prefer HPARAMS),
# CHECKPOINT_STEPS (200), CURVE (1), CURVE_SENTENCES (dev sentences per curve point, default 100), PEERS_DIR
# (/tmp/peers), PYTHON (t2t-lite's python, default python), SKIP_T2T_LITE=1 (keep WORK_DIR/t2t_lite from an earlier
# run: only the peer, the table and the curve are redone).
# Budgets: t2t-lite's SECONDS count training time (its --train_minutes); OpenNMT-tf's count from the launch of its
# training process, start-up included, as in multi30k_side_by_side.sh.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${1:?usage: bash benchmarks/parsing_side_by_side.sh WORK_DIR [SECONDS]}
SECONDS_BUDGET=${2:-600}
SET=${HPARAMS_SET:-transformer_parsing_small_data}
export PROBLEM=${PROBLEM:-parsing_ptb_sample_words}
CHECKPOINT_STEPS=${CHECKPOINT_STEPS:-200}
PYTHON=${PYTHON:-python}
PEERS=${PEERS_DIR:-/tmp/peers}
ONMT=$PEERS/onmt
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
PTB=${PTB_DIR:-$WORK/ptb}
OURS=$WORK/t2t_lite PEER=$WORK/opennmt_tf
"$ONMT/bin/python" -c "import opennmt, sentencepiece" 2> /dev/null || {
  echo "parsing_side_by_side.sh: no OpenNMT-tf venv at $ONMT: run bash benchmarks/peers/setup.sh $PEERS first (or set PEERS_DIR)" >&2
  exit 2; }

# 1. t2t-lite.
if [[ "${SKIP_T2T_LITE:-0}" == "1" ]]; then
  [[ -f "$OURS/dev.hyp" && -f "$OURS/data/vocab.model" ]] || {
    echo "parsing_side_by_side.sh: SKIP_T2T_LITE=1 but $OURS holds no finished parsing_quality.sh run" >&2; exit 2; }
else
  # One model against the peer's one: MEMBERS only when asked (the recipe's ensemble has no peer counterpart here).
  # The curve's checkpoints (each one also scores the dev split, inside the budget) only when it is drawn.
  CURVE_FLAGS=""
  if [[ "${CURVE:-1}" != "0" ]]; then
    CURVE_FLAGS="--save_checkpoints_steps=$CHECKPOINT_STEPS --keep_checkpoint_max=100000"
  fi
  PTB_DIR=$PTB HPARAMS_SET=$SET MEMBERS=${MEMBERS-} \
    TRAIN_FLAGS="$CURVE_FLAGS ${TRAIN_FLAGS:-}" \
    bash "$HERE/parsing_quality.sh" "$OURS" "$SECONDS_BUDGET" 2>&1 | tee "$WORK/t2t_lite.log"
fi

# 2. OpenNMT-tf.
rm -rf "$PEER"
"$PYTHON" "$HERE/peers/parsing/prepare.py" "$PTB" "$PEER" "$PROBLEM" "$SET" "${HPARAMS:-}"
"$ONMT/bin/python" "$HERE/peers/parsing/make_onmt.py" "$PEER" "$OURS/data/vocab.model" "$OURS/dev.words" \
  "$CHECKPOINT_STEPS"
date +%s.%N > "$PEER/train.start"
/usr/bin/time -v -o "$PEER/train.time" "$ONMT/bin/python" "$HERE/peers/multi30k/train_budget.py" "$SECONDS_BUDGET" \
  "$PEER/model.py" "$PEER/config.yml" 2>&1 | tee "$PEER/train.log"
echo "training wall time: $(python3 -c "import time; print(round(time.time() - $(cat "$PEER/train.start")))") s"
ONMT_RUN=("$ONMT/bin/onmt-main" --model "$PEER/model.py" --config "$PEER/config.yml"
          --intra_op_parallelism_threads 2 --inter_op_parallelism_threads 2)
AVERAGE=$("$ONMT/bin/python" -c "import json; print(json.load(open('$PEER/hparams.json'))['train']['average_last_checkpoints'])")
checkpoint=()
if [[ "$AVERAGE" -gt 0 ]]; then
  "${ONMT_RUN[@]}" average_checkpoints --output_dir "$PEER/model/averaged" --max_count "$AVERAGE" > "$PEER/average.log" 2>&1
  checkpoint=(--checkpoint_path "$PEER/model/averaged")
fi
start=$(date +%s)
"${ONMT_RUN[@]}" "${checkpoint[@]}" infer --features_file "$PEER/data/dev.sp.words" \
  --predictions_file "$PEER/dev.hyp.sp" > "$PEER/decode.log" 2>&1 || {
  echo "parsing_side_by_side.sh: OpenNMT-tf's decode failed; see $PEER/decode.log" >&2; exit 1; }
echo "peer decode wall time: $(( $(date +%s) - start )) s"
"$ONMT/bin/python" - "$OURS/data/vocab.model" "$PEER/dev.hyp.sp" "$PEER/dev.hyp" <<'PY'
import sys
import sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file=sys.argv[1])
with open(sys.argv[2], encoding="utf-8") as f, open(sys.argv[3], "w", encoding="utf-8") as out:
    for line in f:
        out.write(sp.decode_pieces(line.split()) + "\n")
PY

# 3. One table, both scored by t2t-lite's parsing scorer.
{
  echo "$PROBLEM dev ($(wc -l < "$OURS/dev.words") sentences), $SET${HPARAMS:+ ($HPARAMS)}, $SECONDS_BUDGET s of training each, $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "| toolkit | steps | dev bracket F1 | well-formed before repair % | exact tree % |"
  echo "|---|---|---|---|---|"
  for toolkit in t2t-lite OpenNMT-tf; do
    if [[ $toolkit == t2t-lite ]]; then
      hyp=$OURS/dev.hyp
      steps=$(grep -oE "trained steps [0-9]+-[0-9]+" "$OURS/train.log" | tail -1 | sed 's/.*-//')
    else
      hyp=$PEER/dev.hyp
      steps=$(grep -oE "Saved checkpoint \S+/ckpt-[0-9]+" "$PEER/train.log" | tail -1 | sed 's/.*ckpt-//')
    fi
    "$PYTHON" "$HERE/peers/parsing/score.py" "$OURS/dev.words" "$OURS/dev.trees" "$hyp" --json --problem="$PROBLEM" | python3 -c "
import json, sys
s = json.loads(sys.stdin.read().strip().splitlines()[-1])
print(f\"| $toolkit | ${steps:-n/a} | {s['f1']:.2f} | {s['well_formed']:.1f} | {s['exact']:.1f} |\")"
  done
} | tee "$WORK/summary.md"

if [[ "${CURVE:-1}" != "0" ]]; then
  "$PYTHON" "$HERE/peers/parsing/curve.py" --ours="$OURS" --peer="$PEER" --venv="$ONMT" \
    --sentences="${CURVE_SENTENCES:-100}" --decode_flags="${DECODE_FLAGS:-}" --out="$WORK/f1_curve.png" \
    | tee "$WORK/curve.log"
fi
