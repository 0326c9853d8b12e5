#!/usr/bin/env bash
# The Multi30k peer's evaluation: average the last 5 checkpoints, decode test_2016_flickr and val (beam 4,
# GNMT length penalty 0.6, max decoding length 150, as config.yml sets), detokenize with SentencePiece and
# score with sacreBLEU (13a, cased); also decode test_2016_flickr with the last (non-averaged) checkpoint.
# benchmarks/multi30k_peer.sh calls it after train_budget.py.
#
#   bash benchmarks/peers/multi30k/average_decode_score.sh WORK_DIR RAW_DIR
#
# WORK_DIR is multi30k_peer.sh's: data/ (prep_spm.py's), paths.yml, model/run/ckpt-*; writes model/avg5,
# out/<split>.<avg5|last>.{sp.de,de} and logs/. RAW_DIR holds the plain references <split>.de.
# Environment: PEERS_DIR (/tmp/peers; its onmt venv), SKIP_VAL=1 skips the val decode.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${1:?usage: average_decode_score.sh WORK_DIR RAW_DIR}
RAW=${2:?usage: average_decode_score.sh WORK_DIR RAW_DIR}
BIN=${PEERS_DIR:-/tmp/peers}/onmt/bin
[[ -x "$BIN/onmt-main" ]] || { echo "average_decode_score.sh: no OpenNMT-tf venv at $BIN (bash benchmarks/peers/setup.sh DIR)" >&2; exit 2; }
MODEL=$WORK/model
SKIP_VAL=${SKIP_VAL:-0}
ONMT=("$BIN/onmt-main" --model "$HERE/model_transformer_small.py" --config "$HERE/config.yml" "$WORK/paths.yml"
      --intra_op_parallelism_threads 2 --inter_op_parallelism_threads 2)
mkdir -p "$WORK/out" "$WORK/logs"
ls "$MODEL"/run/ckpt-*.index > /dev/null 2>&1 || { echo "average_decode_score.sh: no checkpoint in $MODEL/run" >&2; exit 2; }
LAST=$(ls "$MODEL"/run/ckpt-*.index | sed 's/.*ckpt-\([0-9]*\).index/\1/' | sort -n | tail -1)
echo "last checkpoint step: $LAST"
ls "$MODEL"/run/ckpt-*.index | sed 's/.*ckpt-\([0-9]*\).index/\1/' | sort -n | tail -5 | tr '\n' ' '; echo " <- averaged steps"

rm -rf "$MODEL/avg5"
/usr/bin/time -v "${ONMT[@]}" average_checkpoints --output_dir "$MODEL/avg5" --max_count 5 \
  > "$WORK/logs/03_average.log" 2>&1
grep -E "Averag(ing|ed)" "$WORK/logs/03_average.log" | tail -8 || true

decode () {  # $1 checkpoint path, $2 split, $3 tag
  local ck=$1 split=$2 tag=$3
  local t0 t1
  t0=$(date +%s.%N)
  /usr/bin/time -v "${ONMT[@]}" --checkpoint_path "$ck" infer \
     --features_file "$WORK/data/$split.sp.en" --predictions_file "$WORK/out/$split.$tag.sp.de" \
     > "$WORK/logs/04_infer.$split.$tag.log" 2>&1
  t1=$(date +%s.%N)
  echo "decode $split $tag: $(python3 -c "print(round($t1 - $t0, 1))") s, peak RSS $(grep 'Maximum resident' "$WORK/logs/04_infer.$split.$tag.log")"
  "$BIN/python" "$HERE/spm_decode_score.py" "$WORK/data/spm.model" "$WORK/out/$split.$tag.sp.de" \
     "$WORK/out/$split.$tag.de" "$RAW/$split.de" | tee "$WORK/logs/05_bleu.$split.$tag.txt"
}

decode "$MODEL/avg5" test_2016_flickr avg5
decode "$MODEL/run/ckpt-$LAST" test_2016_flickr last
if [ "$SKIP_VAL" != "1" ]; then
  decode "$MODEL/avg5" val avg5
else
  echo "val decode skipped (SKIP_VAL=1)"
fi
