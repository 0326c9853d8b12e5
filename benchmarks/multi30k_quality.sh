#!/usr/bin/env bash
# Quality in a fixed CPU budget: Multi30k En->De, the protocol of
# benchmarks/peers/multi30k (OpenNMT-tf, its run 2): shared BPE 8k,
# Transformer 3+3 layers, d 256, d_ff 1024, 4 heads (the transformer_small_data
# set: its learning rate, dropout, label smoothing and batch), BUDGET seconds of
# training (default 2100 = 35 min, --train_minutes: the trainer stops, saves and
# averages 5 checkpoints spread over the last 10% of the budget), beam 4, alpha 0.6,
# sacreBLEU on test_2016_flickr and val. Every checkpoint (every 200 steps) is kept
# for benchmarks/plot_quality_curve.py.
#
#   bash benchmarks/multi30k_quality.sh [WORK_DIR] [BUDGET_SECONDS]
#
# Environment: MULTI30K_DIR (the release files, gzipped or not; default WORK_DIR/tmp, where datagen
# downloads what is missing: docs/problems.md#multi30k), VOCAB_SIZE (8000), SEED (1234),
# HPARAMS (extra overrides), TRAIN_FLAGS (extra trainer flags, e.g.
# --mixed_precision=none to train in float32 where bfloat16 is native). The budget counts training time (steps, evaluations,
# saves), not start-up; the process's whole wall time is in WORK_DIR/train.time.
set -euo pipefail
WORK=${1:-/tmp/t2t_lite_multi30k}
BUDGET=${2:-2100}
FILES=${MULTI30K_DIR:-$WORK/tmp}
VOCAB=${VOCAB_SIZE:-8000}
SEED=${SEED:-1234}
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"

t2t-lite-datagen --problem=translate_multi30k --data_dir="$WORK/data" --tmp_dir="$FILES" --vocab_size="$VOCAB"
multi30k_file() { if [ -f "$FILES/$1.gz" ]; then echo "$FILES/$1.gz"; else echo "$FILES/$1"; fi; }

MINUTES=$(python3 -c "print($BUDGET / 60)")
date +%s.%N > "$WORK/train.start"  # plot_quality_curve.py measures checkpoint times from here
/usr/bin/time -v -o "$WORK/train.time" t2t-lite-trainer --problem=translate_multi30k --data_dir="$WORK/data" \
  --hparams_set=transformer_small_data --hparams="${HPARAMS:-}" --output_dir="$WORK/run" \
  --train_minutes="$MINUTES" --train_steps=1000000 --save_checkpoints_steps=200 --keep_checkpoint_max=100000 \
  --eval_steps=20 --eval_bleu_sentences=0 --random_seed="$SEED" --log_every_steps=100 ${TRAIN_FLAGS:-} 2>&1 | tee "$WORK/train.log"
echo "training wall time: $(python3 -c "import time; print(round(time.time() - $(cat "$WORK/train.start")))") s"

# The averaged checkpoint (the run's default) on both splits.
for split in test_2016_flickr val; do
  start=$(date +%s)
  /usr/bin/time -v -o "$WORK/decode.$split.time" t2t-lite-decoder --output_dir="$WORK/run" --data_dir="$WORK/data" \
    --beam_size=4 --alpha=0.6 --decode_from_file="$(multi30k_file "$split.en")" --decode_to_file="$WORK/$split.hyp.de" \
    --decode_reference="$(multi30k_file "$split.de")"
  echo "decode $split wall time: $(( $(date +%s) - start )) s"
done
