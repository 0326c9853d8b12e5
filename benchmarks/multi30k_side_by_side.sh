#!/usr/bin/env bash
# Multi30k En->De quality in the same CPU budget, t2t-lite and OpenNMT-tf 2.32 one after the other
# on this machine (run it on an idle one): benchmarks/multi30k_quality.sh, then
# benchmarks/multi30k_peer.sh, each with BUDGET seconds of training, the same data, the same 8k
# shared BPE size and the same model size; then one table (benchmarks/multi30k_summary.py) and,
# unless CURVE=0, the time-to-BLEU curve of every kept checkpoint of both runs
# (benchmarks/plot_quality_curve.py; CURVE_SENTENCES val sentences per point, default 300).
#
#   bash benchmarks/peers/setup.sh /tmp/peers        # once: the OpenNMT-tf venv
#   bash benchmarks/multi30k_side_by_side.sh [WORK_DIR] [BUDGET_SECONDS]
#
# Both toolkits read the same release files: MULTI30K_DIR (default WORK_DIR/multi30k) holds them, gzipped or
# not; what is missing is downloaded there by translate_multi30k's own code (problems/multi30k.py), so offline,
# put {train,val,test_2016_flickr}.{en,de} there (docs/problems.md#multi30k). The plain copies the peer and the
# scorers read go to WORK_DIR/raw.
# Environment: MULTI30K_DIR, PEERS_DIR (/tmp/peers), VOCAB_SIZE, SEED, PYTHON (t2t-lite's python), CURVE,
# CURVE_SENTENCES; the rest as for the two scripts.
# A smoke run on a slice of the data: a directory with the first lines of each file,
#   MULTI30K_DIR=/tmp/m30k_slice VOCAB_SIZE=1000 CURVE_SENTENCES=20 bash benchmarks/multi30k_side_by_side.sh /tmp/sbs 60
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${1:-/tmp/multi30k_side_by_side}
BUDGET=${2:-2100}
PYTHON=${PYTHON:-python}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
FILES=${MULTI30K_DIR:-$WORK/multi30k}
mkdir -p "$FILES"
FILES=$(cd "$FILES" && pwd)
PEERS=${PEERS_DIR:-/tmp/peers}
"$PEERS/onmt/bin/python" -c "import opennmt, sentencepiece, sacrebleu" 2> /dev/null || {
  echo "multi30k_side_by_side.sh: no OpenNMT-tf venv at $PEERS/onmt: run bash benchmarks/peers/setup.sh $PEERS first (or set PEERS_DIR)" >&2
  exit 2; }

# The release files (downloaded into FILES when missing), then plain copies for the peer and the scorers.
"$PYTHON" "$HERE/peers/multi30k_raw.py" "$FILES" "$WORK/raw"
export MULTI30K_DIR=$FILES MULTI30K_RAW=$WORK/raw PEERS_DIR=$PEERS

bash "$HERE/multi30k_quality.sh" "$WORK/t2t_lite" "$BUDGET" 2>&1 | tee "$WORK/t2t_lite.log"
bash "$HERE/multi30k_peer.sh" "$WORK/opennmt_tf" "$BUDGET" 2>&1 | tee "$WORK/opennmt_tf.log"

"$PYTHON" "$HERE/multi30k_summary.py" "$WORK/t2t_lite" "$WORK/opennmt_tf" "$WORK/raw" | tee "$WORK/summary.md"
if [ "${CURVE:-1}" != "0" ]; then
  "$PYTHON" "$HERE/plot_quality_curve.py" --ours="$WORK/t2t_lite" --peer="$WORK/opennmt_tf" --raw="$WORK/raw" \
    --venv="$PEERS/onmt" --sentences="${CURVE_SENTENCES:-300}" --out="$WORK/quality_curve.png"
fi
