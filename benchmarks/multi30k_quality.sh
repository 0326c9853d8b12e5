#!/usr/bin/env bash
# Quality in a fixed CPU budget: Multi30k En->De, the protocol of
# ../shared/peers/quality_multi30k (OpenNMT-tf reached 35.97 BLEU with it):
# shared SentencePiece BPE 8k, Transformer 3+3 layers, d 256, d_ff 1024, 4 heads,
# dropout 0.1, label smoothing 0.1, Adam with Noam constant 0.5 and warmup 1000,
# 4096-token batches, BUDGET seconds of training (default 2100 = 35 min),
# average of the last 5 checkpoints, beam 4, alpha 0.6, sacreBLEU on test_2016_flickr.
#
#   bash benchmarks/multi30k_quality.sh [WORK_DIR] [BUDGET_SECONDS]
#
# Training stops on SIGTERM from `timeout` (the trainer saves and exits 0), so
# the budget is wall time of the training process, start-up included.
set -euo pipefail
WORK=${1:-/tmp/t2t_lite_multi30k}
BUDGET=${2:-2100}
RAW=${MULTI30K_RAW:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data/multi30k/raw}
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"

t2t-lite-datagen --problem=translate_files --data_dir="$WORK/data" --tmp_dir="$WORK/tmp" \
  --train_files="$RAW/train.en,$RAW/train.de" --dev_files="$RAW/val.en,$RAW/val.de" --vocab_size=8000

HPARAMS="num_encoder_layers=3,num_decoder_layers=3,d_model=256,d_ff=1024,num_heads=4,dropout=0.1"
HPARAMS+=",attention_dropout=0.0,relu_dropout=0.0,learning_rate_constant=0.5,warmup_steps=1000"
HPARAMS+=",train.batch_size=4096,label_smoothing=0.1,average_last_checkpoints=5"
start=$(date +%s)
timeout -s TERM "$BUDGET" t2t-lite-trainer --problem=translate_files --data_dir="$WORK/data" \
  --hparams_set=transformer_small --hparams="$HPARAMS" --output_dir="$WORK/run" \
  --train_steps=1000000 --save_checkpoints_steps=200 --keep_checkpoint_max=5 --eval_steps=20 \
  --log_every_steps=100 2>&1 | tee "$WORK/train.log" || true
echo "training wall time: $(( $(date +%s) - start )) s"

t2t-lite-avg-checkpoints --output_dir="$WORK/run" --last_n=5
start=$(date +%s)
t2t-lite-decoder --output_dir="$WORK/run" --data_dir="$WORK/data" --beam_size=4 --alpha=0.6 \
  --decode_from_file="$RAW/test_2016_flickr.en" --decode_to_file="$WORK/test_2016_flickr.hyp.de" \
  --decode_reference="$RAW/test_2016_flickr.de"
echo "decode wall time: $(( $(date +%s) - start )) s"
