#!/usr/bin/env bash
# Multi30k En->De quality in the same CPU budget, t2t-lite and OpenNMT-tf 2.32 one after the other
# on this machine (run it on an idle one): benchmarks/multi30k_quality.sh, then
# benchmarks/multi30k_peer.sh, each with BUDGET seconds of training, the same data, the same 8k
# shared BPE size and the same model size; then one table (benchmarks/multi30k_summary.py) and,
# unless CURVE=0, the time-to-BLEU curve of every kept checkpoint of both runs
# (benchmarks/plot_quality_curve.py; CURVE_SENTENCES val sentences per point, default 300).
#
#   bash benchmarks/multi30k_side_by_side.sh [WORK_DIR] [BUDGET_SECONDS]
#
# Environment: as for the two scripts (MULTI30K_RAW, VOCAB_SIZE, SEED, ONMT_VENV).
# A smoke run on a slice of the data: make a directory with the first lines of each raw file,
#   MULTI30K_RAW=/tmp/m30k_slice VOCAB_SIZE=1000 bash benchmarks/multi30k_side_by_side.sh /tmp/sbs 60
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${1:-/tmp/multi30k_side_by_side}
BUDGET=${2:-2100}
RAW=$(cd "${MULTI30K_RAW:-$HERE/../../shared/data/multi30k/raw}" && pwd)
export MULTI30K_RAW=$RAW MULTI30K_DIR=$RAW  # the peer's plain files, and ours (translate_multi30k reads them)
mkdir -p "$WORK"

bash "$HERE/multi30k_quality.sh" "$WORK/t2t_lite" "$BUDGET" 2>&1 | tee "$WORK/t2t_lite.log"
bash "$HERE/multi30k_peer.sh" "$WORK/opennmt_tf" "$BUDGET" 2>&1 | tee "$WORK/opennmt_tf.log"

python3 "$HERE/multi30k_summary.py" "$WORK/t2t_lite" "$WORK/opennmt_tf" "$RAW" | tee "$WORK/summary.md"
if [ "${CURVE:-1}" != "0" ]; then
  python3 "$HERE/plot_quality_curve.py" --ours="$WORK/t2t_lite" --peer="$WORK/opennmt_tf" --raw="$RAW" \
    --sentences="${CURVE_SENTENCES:-300}" --out="$WORK/quality_curve.png"
fi
