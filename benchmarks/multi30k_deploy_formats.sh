#!/usr/bin/env bash
# One trained run decoded six ways on Multi30k test_2016_flickr, one after the other in this sitting: the decoder in
# float32 and in bfloat16 (--mixed_precision=mixed_bfloat16), its SavedModel export, its CTranslate2 exports in
# float32 and int8 (in the decoder's process), and the decoder with --mixed_precision=auto; val too for the
# decoder's two precisions. For each: sacreBLEU, the rate the decoder reports (sentences/s from its first batch, tracing included, not start-up) and
# how many sentences equal the float32 decoder's output. Beam 4, alpha 0.6 (the run's), real lengths, the batch
# the decoder chooses.
#
#   bash benchmarks/multi30k_deploy_formats.sh [WORK_DIR]
#
# WORK_DIR is a benchmarks/multi30k_quality.sh work directory (its run/); the exports go to WORK_DIR/exports,
# the outputs to WORK_DIR/formats.
# Environment: MULTI30K_DIR (the release files, as for multi30k_quality.sh; default WORK_DIR/tmp, where that
# script's datagen put them), PYTHON (t2t-lite's python), DECODE_FLAGS (more decoder flags for every decode, e.g.
# --batch_size=64, what transformer_small_data decodes with now, for a run that recorded 32). Their plain copies go to WORK_DIR/raw
# (benchmarks/peers/multi30k_raw.py, which downloads any that are missing).
set -euo pipefail
WORK=${1:-/tmp/t2t_lite_multi30k}
[[ -d "$WORK/run" ]] || {
  echo "multi30k_deploy_formats.sh: $WORK is not a benchmarks/multi30k_quality.sh work directory (no run/)" >&2
  exit 2; }
RAW=$WORK/raw
"${PYTHON:-python}" "$(dirname "$0")/peers/multi30k_raw.py" "${MULTI30K_DIR:-$WORK/tmp}" "$RAW"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
rm -rf "$WORK/exports" "$WORK/formats"
mkdir -p "$WORK/formats"
t2t-lite-exporter --output_dir="$WORK/run" --export_dir="$WORK/exports" --model_name=saved_model
t2t-lite-exporter --output_dir="$WORK/run" --export_dir="$WORK/exports" --model_name=ct2_float32 --export_format=ctranslate2
t2t-lite-exporter --output_dir="$WORK/run" --export_dir="$WORK/exports" --model_name=ct2_int8 --export_format=ctranslate2 \
  --quantization=int8
decode() {  # NAME SPLIT FLAGS...: WORK/formats/NAME.SPLIT.de and its log
  local name=$1 split=$2; shift 2
  # shellcheck disable=SC2086  # DECODE_FLAGS holds several flags
  t2t-lite-decoder "$@" ${DECODE_FLAGS:-} --decode_from_file="$RAW/$split.en" --decode_to_file="$WORK/formats/$name.$split.de" \
    --decode_reference="$RAW/$split.de" > "$WORK/formats/$name.$split.log" 2>&1 || {
    tail -5 "$WORK/formats/$name.$split.log" >&2; exit 1; }
  grep "BLEU" "$WORK/formats/$name.$split.log" | sed "s/^/$name $split: /"
}
for split in test_2016_flickr val; do
  decode float32 "$split" --output_dir="$WORK/run" --mixed_precision=none
  decode bfloat16 "$split" --output_dir="$WORK/run" --mixed_precision=mixed_bfloat16
done
decode auto test_2016_flickr --output_dir="$WORK/run" --mixed_precision=auto
for name in saved_model ct2_float32 ct2_int8; do
  decode "$name" test_2016_flickr --export_dir="$WORK/exports/$name/1"
done
python3 - "$WORK/formats" <<'PY'
import re
import sys

formats = sys.argv[1]


def lines(name, split):
    with open(f"{formats}/{name}.{split}.de", encoding="utf-8") as f:
        return f.read().splitlines()


def reported(name, split, pattern):
    with open(f"{formats}/{name}.{split}.log", encoding="utf-8") as f:
        found = re.findall(pattern, f.read())
    return found[-1] if found else "?"


print("| decoded by | split | BLEU | sentences/s | outputs equal to float32's |")
print("|---|---|---|---|---|")
for name, split in [("float32", "test_2016_flickr"), ("bfloat16", "test_2016_flickr"), ("auto", "test_2016_flickr"),
                    ("saved_model", "test_2016_flickr"), ("ct2_float32", "test_2016_flickr"),
                    ("ct2_int8", "test_2016_flickr"), ("float32", "val"), ("bfloat16", "val")]:
    reference, output = lines("float32", split), lines(name, split)
    same = sum(a == b for a, b in zip(reference, output))
    bleu = reported(name, split, r"BLEU \(sacreBLEU 13a, detokenized\) = ([0-9.]+)")
    rate = reported(name, split, r"\(([0-9.]+) sentences/s\)")
    print(f"| {name} | {split} | {bleu} | {rate} | {same}/{len(reference)} |")
PY
