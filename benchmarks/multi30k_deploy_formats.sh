#!/usr/bin/env bash
# One trained run decoded four ways on Multi30k test_2016_flickr: the decoder, its SavedModel export, and its
# CTranslate2 exports in float32 and int8; sacreBLEU of each and how many sentences equal the decoder's output.
#
#   bash benchmarks/multi30k_deploy_formats.sh [WORK_DIR]
#
# WORK_DIR is a benchmarks/multi30k_quality.sh work directory (its run/ and its decoder output
# test_2016_flickr.hyp.de, beam 4, alpha 0.6); the exports go to WORK_DIR/exports.
# Environment: MULTI30K_DIR (the release files, as for multi30k_quality.sh; default WORK_DIR/tmp, where that
# script's datagen put them), PYTHON (t2t-lite's python). Their plain copies go to WORK_DIR/raw
# (benchmarks/peers/multi30k_raw.py, which downloads any that are missing).
set -euo pipefail
WORK=${1:-/tmp/t2t_lite_multi30k}
[[ -d "$WORK/run" && -f "$WORK/test_2016_flickr.hyp.de" ]] || {
  echo "multi30k_deploy_formats.sh: $WORK is not a finished benchmarks/multi30k_quality.sh work directory (no run/ or test_2016_flickr.hyp.de)" >&2
  exit 2; }
RAW=$WORK/raw
"${PYTHON:-python}" "$(dirname "$0")/peers/multi30k_raw.py" "${MULTI30K_DIR:-$WORK/tmp}" "$RAW"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
rm -rf "$WORK/exports"
t2t-lite-exporter --output_dir="$WORK/run" --export_dir="$WORK/exports" --model_name=saved_model
t2t-lite-exporter --output_dir="$WORK/run" --export_dir="$WORK/exports" --model_name=ct2_float32 --export_format=ctranslate2
t2t-lite-exporter --output_dir="$WORK/run" --export_dir="$WORK/exports" --model_name=ct2_int8 --export_format=ctranslate2 \
  --quantization=int8
for name in saved_model ct2_float32 ct2_int8; do
  echo "$name:"
  t2t-lite-decoder --export_dir="$WORK/exports/$name/1" --decode_from_file="$RAW/test_2016_flickr.en" \
    --decode_to_file="$WORK/test_2016_flickr.$name.de" --decode_reference="$RAW/test_2016_flickr.de" 2>&1 | grep "BLEU"
done
python3 - "$WORK" <<'PY'
import sys
work = sys.argv[1]
decoder = open(f"{work}/test_2016_flickr.hyp.de", encoding="utf-8").read().splitlines()
for name in ["saved_model", "ct2_float32", "ct2_int8"]:
    other = open(f"{work}/test_2016_flickr.{name}.de", encoding="utf-8").read().splitlines()
    same = sum(a == b for a, b in zip(decoder, other))
    print(f"{name}: {same}/{len(decoder)} sentences identical to the decoder's output ({100 * same / len(decoder):.1f} %)")
PY
