#!/usr/bin/env bash
# The peer side of benchmarks/multi30k_side_by_side.sh: OpenNMT-tf 2.32 with the protocol of
# ../shared/peers/quality_multi30k (its run 2, config_scale05.yml), BUDGET seconds from the
# launch of its training process, then its average of the last 5 checkpoints, decoded on
# test_2016_flickr and val. Its scripts work in /tmp/peers_quality (a path they hard-code);
# this one writes its model to /tmp/peers_quality/model_sbs and copies what the summary and
# the curve need into WORK_DIR.
#
#   bash benchmarks/multi30k_peer.sh [WORK_DIR] [BUDGET_SECONDS]
#
# Environment: MULTI30K_RAW, VOCAB_SIZE (8000), ONMT_VENV (/tmp/peers/onmt; how to build it:
# ../shared/peers/RESULTS.md), PEER_DIR (../shared/peers/quality_multi30k).
set -euo pipefail
WORK=${1:-/tmp/peers_multi30k}
BUDGET=${2:-2100}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RAW=$(cd "${MULTI30K_RAW:-$ROOT/shared/data/multi30k/raw}" && pwd)
VOCAB=${VOCAB_SIZE:-8000}
ONMT=${ONMT_VENV:-/tmp/peers/onmt}
PEER=${PEER_DIR:-$ROOT/shared/peers/quality_multi30k}
Q=/tmp/peers_quality
mkdir -p "$WORK" "$Q/scripts"
"$ONMT/bin/python" -c "import opennmt, sentencepiece, sacrebleu" || {
  echo "the OpenNMT-tf venv $ONMT lacks opennmt-tf, sentencepiece or sacrebleu (see ../shared/peers/RESULTS.md)" >&2; exit 1; }

cp "$PEER"/*.py "$PEER"/*.sh "$PEER"/*.yml "$Q/scripts/"
sed -i "s/vocab_size=8000/vocab_size=$VOCAB/" "$Q/scripts/01_prep_spm.py"
sed "s#^model_dir: .*#model_dir: $Q/model_sbs/run#" "$Q/scripts/config_scale05.yml" > "$Q/scripts/config_sbs.yml"
rm -rf "$Q/model_sbs"
(cd "$Q/scripts" && PATH="$ONMT/bin:$PATH" MULTI30K_RAW="$RAW" "$ONMT/bin/python" 01_prep_spm.py)

date +%s.%N > "$WORK/train.start"
(cd "$Q/scripts" && /usr/bin/time -v -o "$WORK/train.time" "$ONMT/bin/python" 02_train.py "$BUDGET" \
   "$Q/scripts/config_sbs.yml" 2>&1 | tee "$WORK/train.log")
echo "training wall time: $(python3 -c "import time; print(round(time.time() - $(cat "$WORK/train.start")))") s"
"$ONMT/bin/python" "$Q/scripts/parse_train_log.py" "$WORK/train.log" > "$WORK/train_summary.json"

(cd "$Q/scripts" && CONFIG="$Q/scripts/config_sbs.yml" MODEL="$Q/model_sbs" SUFFIX=.sbs MULTI30K_RAW="$RAW" \
   bash 03_average_decode_score.sh)
for split in test_2016_flickr val; do
  cp "$Q/out/$split.avg5.sbs.de" "$WORK/$split.hyp.de"
done
echo "$Q/model_sbs/run" > "$WORK/model_dir"
