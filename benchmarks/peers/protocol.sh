#!/usr/bin/env bash
# The peers' side of the CPU throughput protocol (docs/performance.md): synthetic data, OpenNMT-tf 2.32 training
# steps timed, its checkpoint exported to CTranslate2 and decoded there and by OpenNMT-tf itself.
#
#   bash benchmarks/peers/protocol.sh STEP [TAG]
#
# STEP is one of
#   data          gen_data.py: the 20,000 synthetic pairs, the 32,768-entry vocabulary and the 500 decode inputs
#                 in $PEERS_DIR/data
#   ceiling       matmul_ceiling.py in the onmt venv (and mg's, if made): logs/matmul_<venv>TAG.json
#   train         40 steps of onmt-main train (transformer base, ~4096-token batches), timed per step by
#                 onmt_train.py: logs/onmt_stepsTAG.json, /usr/bin/time -v in logs/onmt_trainTAG.log
#   export        that checkpoint exported to CTranslate2: run/ct2_model (float32) and run/ct2_int8_model (int8)
#   ct2           ct2_translate.py in the ct2 venv on run/ct2_model: logs/ct2TAG.json
#   infer         onmt-main infer on the same inputs and settings (beam 4, forced length 60, 32 per batch)
#   infer_steady  the same on the inputs twice over, to see the first batch's overhead
#   mg_train      Model Garden's 40 steps (needs setup.sh DIR --model-garden): logs/mg_stepsTAG.json
#   summarize     summarize.py's table of every training run in logs/
#   all           data, ceiling, train, export, ct2, infer, infer_steady, summarize (about 30 minutes on 2 cores)
#
# Environment: PEERS_DIR (default /tmp/peers): the directory benchmarks/peers/setup.sh made the venvs in; the
# data, runs and logs go there too. For a smoke run only (the figures then mean nothing): PEERS_TRAIN_STEPS
# (default the protocol's 40) and PEERS_DECODE_SENTENCES (default all 500) for ct2, infer and infer_steady.
# Run it on an otherwise idle machine.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
STEP=${1:?usage: bash benchmarks/peers/protocol.sh data|ceiling|train|export|ct2|infer|infer_steady|mg_train|summarize|all [TAG]}
TAG=${2:-}
PEERS=${PEERS_DIR:-/tmp/peers}
mkdir -p "$PEERS/data" "$PEERS/run" "$PEERS/logs"
PEERS=$(cd "$PEERS" && pwd)
D=$PEERS/data R=$PEERS/run L=$PEERS/logs

need_venv() {  # need_venv NAME
  [[ -x "$PEERS/$1/bin/python" ]] || {
    echo "protocol.sh: no $1 venv in $PEERS: run bash benchmarks/peers/setup.sh $PEERS${2:+ $2} first (or set PEERS_DIR)" >&2
    exit 2; }
}
need_data() {
  [[ -f "$D/corpus.npz" && -f "$D/infer_src.txt" ]] || {
    echo "protocol.sh: no synthetic data in $D: run bash benchmarks/peers/protocol.sh data first" >&2; exit 2; }
}
need_model() {
  [[ -f "$R/onmt_model/checkpoint" ]] || {
    echo "protocol.sh: no OpenNMT-tf checkpoint in $R/onmt_model: run bash benchmarks/peers/protocol.sh train first" >&2
    exit 2; }
}
# onmt-main with the protocol's configuration; the paths file holds what onmt_base.yml leaves out.
paths_config() {
  cat > "$R/onmt_paths.yml" <<EOF
model_dir: $R/onmt_model
data:
  train_features_file: $D/src.txt
  train_labels_file: $D/tgt.txt
  source_vocabulary: $D/vocab.txt
  target_vocabulary: $D/vocab.txt
EOF
  if [[ -n "${PEERS_TRAIN_STEPS:-}" ]]; then printf 'train:\n  max_step: %d\n' "$PEERS_TRAIN_STEPS" >> "$R/onmt_paths.yml"; fi
}
# The decode inputs: all 500, or the first PEERS_DECODE_SENTENCES of them (smoke runs).
decode_inputs() {
  if [[ -n "${PEERS_DECODE_SENTENCES:-}" ]]; then
    head -n "$PEERS_DECODE_SENTENCES" "$D/infer_src.txt" > "$D/infer_src_head.txt"
    echo "$D/infer_src_head.txt"
  else
    echo "$D/infer_src.txt"
  fi
}
ONMT_ARGS=(--model_type TransformerBaseSharedEmbeddings --config "$HERE/configs/onmt_base.yml" "$R/onmt_paths.yml")

step_data() {
  python3 -c "import numpy" 2> /dev/null && py=python3 || { need_venv onmt; py=$PEERS/onmt/bin/python; }
  "$py" "$HERE/gen_data.py" "$D"
}
step_ceiling() {
  need_venv onmt
  for venv in onmt mg; do
    [[ -x "$PEERS/$venv/bin/python" ]] || continue
    "$PEERS/$venv/bin/python" "$HERE/matmul_ceiling.py" "$L/matmul_$venv$TAG.json" > /dev/null 2>&1
    echo "matmul ceiling in the $venv venv: $L/matmul_$venv$TAG.json"
  done
}
step_train() {
  need_venv onmt; need_data; paths_config
  rm -rf "$R/onmt_model"
  /usr/bin/time -v "$PEERS/onmt/bin/python" "$HERE/onmt_train.py" "$L/onmt_steps$TAG.json" -- \
    "${ONMT_ARGS[@]}" --seed 1234 train > "$L/onmt_train$TAG.log" 2>&1 || {
    echo "protocol.sh: OpenNMT-tf training failed; its output is in $L/onmt_train$TAG.log" >&2; exit 1; }
  echo "OpenNMT-tf: $(grep -c '^\[steptimer\]' "$L/onmt_train$TAG.log") steps timed in $L/onmt_steps$TAG.json"
}
step_export() {
  need_venv onmt; need_model; paths_config
  for format in ctranslate2 ctranslate2_int8; do
    local out=$R/ct2_model
    [[ $format == ctranslate2_int8 ]] && out=$R/ct2_int8_model
    rm -rf "$out"
    "$PEERS/onmt/bin/onmt-main" "${ONMT_ARGS[@]}" export --output_dir "$out" --format "$format" \
      > "$L/onmt_export_$format.log" 2>&1 || {
      echo "protocol.sh: onmt-main export --format $format failed; see $L/onmt_export_$format.log" >&2; exit 1; }
    echo "exported $format: $out"
  done
}
step_ct2() {
  need_venv ct2; need_data
  [[ -f "$R/ct2_model/model.bin" ]] || { echo "protocol.sh: no $R/ct2_model: run protocol.sh export first" >&2; exit 2; }
  /usr/bin/time -v "$PEERS/ct2/bin/python" "$HERE/ct2_translate.py" "$R/ct2_model" "$(decode_inputs)" \
    "$L/ct2$TAG.json" "$R/ct2_pred.txt" > "$L/ct2$TAG.log" 2>&1 || {
    echo "protocol.sh: ct2_translate.py failed; see $L/ct2$TAG.log" >&2; exit 1; }
  echo "CTranslate2: $L/ct2$TAG.json"
}
infer() {  # infer INPUTS PREDICTIONS LOG
  need_venv onmt; need_model; paths_config
  /usr/bin/time -v "$PEERS/onmt/bin/onmt-main" --model_type TransformerBaseSharedEmbeddings --config \
    "$HERE/configs/onmt_base.yml" "$R/onmt_paths.yml" "$HERE/configs/onmt_infer_overrides.yml" \
    infer --features_file "$1" --predictions_file "$2" --log_prediction_time > "$3" 2>&1 || {
    echo "protocol.sh: onmt-main infer failed; see $3" >&2; exit 1; }
  grep -E "Total prediction time|Tokens per second" "$3" || true
}
step_infer() {
  need_data
  infer "$(decode_inputs)" "$R/onmt_pred.txt" "$L/onmt_infer$TAG.log"
  awk '{n+=NF; if(NF<mn||NR==1)mn=NF; if(NF>mx)mx=NF} END{print "onmt predictions: lines",NR,"tokens",n,"min",mn,"max",mx}' \
    "$R/onmt_pred.txt"
}
step_infer_steady() {
  need_data
  local inputs
  inputs=$(decode_inputs)
  cat "$inputs" "$inputs" > "$D/infer_src_x2.txt"
  infer "$D/infer_src_x2.txt" "$R/onmt_pred_x2.txt" "$L/onmt_infer_x2$TAG.log"
}
step_mg_train() {
  need_venv mg --model-garden; need_data
  /usr/bin/time -v "$PEERS/mg/bin/python" "$HERE/mg_train.py" "$D/corpus.npz" "$L/mg_steps$TAG.json" 40 \
    > "$L/mg_train$TAG.log" 2>&1 || { echo "protocol.sh: mg_train.py failed; see $L/mg_train$TAG.log" >&2; exit 1; }
  echo "Model Garden: $L/mg_steps$TAG.json"
}
step_summarize() { python3 "$HERE/summarize.py" "$L"; }

case "$STEP" in
  data|ceiling|train|export|ct2|infer|infer_steady|mg_train|summarize) "step_$STEP" ;;
  all) for s in data ceiling train export ct2 infer infer_steady summarize; do echo "== $s"; "step_$s"; done ;;
  *) echo "protocol.sh: unknown step $STEP (data|ceiling|train|export|ct2|infer|infer_steady|mg_train|summarize|all)" >&2
     exit 2 ;;
esac
