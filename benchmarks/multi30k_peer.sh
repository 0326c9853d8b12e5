#!/usr/bin/env bash
# The peer side of benchmarks/multi30k_side_by_side.sh: OpenNMT-tf 2.32 on Multi30k En->De with the protocol of
# benchmarks/peers/multi30k/ (shared SentencePiece BPE, Transformer 3+3 layers, d 256, d_ff 1024, 4 heads, Noam
# scale 0.5, warmup 1000, 4096-token batches), BUDGET seconds from the launch of its training process, then its
# average of the last 5 checkpoints, decoded on test_2016_flickr and val (beam 4, length penalty 0.6).
#
#   bash benchmarks/multi30k_peer.sh [WORK_DIR] [BUDGET_SECONDS]
#
# WORK_DIR (default /tmp/peers_multi30k) gets raw/ (the plain text files), data/ (SentencePiece model, encoded
# splits, OpenNMT-tf vocabulary), paths.yml, model/run (every checkpoint), model/avg5, out/, logs/, train.log,
# train.time, train_summary.json, model_dir, and <split>.hyp.de (the averaged model's detokenized output) for
# benchmarks/multi30k_summary.py and benchmarks/plot_quality_curve.py.
# Environment: PEERS_DIR (/tmp/peers: the venvs of `bash benchmarks/peers/setup.sh DIR`), MULTI30K_DIR (the
# release files, gzipped or not, as for multi30k_quality.sh; default WORK_DIR/tmp, where what is missing is
# downloaded: docs/problems.md#multi30k), MULTI30K_RAW (a directory already holding the plain files; skips
# benchmarks/peers/multi30k_raw.py), VOCAB_SIZE (8000), PYTHON (t2t-lite's python, default python).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS_SRC=$HERE/peers/multi30k
WORK=${1:-/tmp/peers_multi30k}
BUDGET=${2:-2100}
VOCAB=${VOCAB_SIZE:-8000}
PEERS=${PEERS_DIR:-/tmp/peers}
ONMT=$PEERS/onmt
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
"$ONMT/bin/python" -c "import opennmt, sentencepiece, sacrebleu" 2> /dev/null || {
  echo "multi30k_peer.sh: no OpenNMT-tf venv with sentencepiece and sacrebleu at $ONMT: run bash benchmarks/peers/setup.sh $PEERS (or set PEERS_DIR)" >&2
  exit 2; }

if [[ -n "${MULTI30K_RAW:-}" ]]; then
  RAW=$(cd "$MULTI30K_RAW" && pwd)
else
  RAW=$WORK/raw
  "${PYTHON:-python}" "$HERE/peers/multi30k_raw.py" "${MULTI30K_DIR:-$WORK/tmp}" "$RAW"
fi

rm -rf "$WORK/model" "$WORK/out" "$WORK/logs"
"$ONMT/bin/python" "$PEERS_SRC/prep_spm.py" "$RAW" "$WORK/data" "$VOCAB"
cat > "$WORK/paths.yml" <<EOF
model_dir: $WORK/model/run
data:
  train_features_file: $WORK/data/train.sp.en
  train_labels_file: $WORK/data/train.sp.de
  source_vocabulary: $WORK/data/vocab.onmt.txt
  target_vocabulary: $WORK/data/vocab.onmt.txt
EOF

date +%s.%N > "$WORK/train.start"  # plot_quality_curve.py measures checkpoint times from here
/usr/bin/time -v -o "$WORK/train.time" "$ONMT/bin/python" "$PEERS_SRC/train_budget.py" "$BUDGET" \
  "$PEERS_SRC/model_transformer_small.py" "$PEERS_SRC/config.yml" "$WORK/paths.yml" 2>&1 | tee "$WORK/train.log"
echo "training wall time: $(python3 -c "import time; print(round(time.time() - $(cat "$WORK/train.start")))") s"
"$ONMT/bin/python" "$PEERS_SRC/parse_train_log.py" "$WORK/train.log" "$WORK/data" > "$WORK/train_summary.json"

PEERS_DIR=$PEERS bash "$PEERS_SRC/average_decode_score.sh" "$WORK" "$RAW"
for split in test_2016_flickr val; do
  if [[ -f "$WORK/out/$split.avg5.de" ]]; then cp "$WORK/out/$split.avg5.de" "$WORK/$split.hyp.de"; fi
done
echo "$WORK/model/run" > "$WORK/model_dir"
