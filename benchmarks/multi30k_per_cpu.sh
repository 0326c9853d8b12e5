#!/usr/bin/env bash
# The tour's trained run (benchmarks/multi30k_quality.sh) decoded natively and as on a CPU with AVX2 only, in one
# sitting: t2t-lite's decoder with the defaults (--mixed_precision=auto: bfloat16 where the CPU has it natively,
# float32 under AVX2), its CTranslate2 exports in float32 and int8, and its SavedModel exported with the defaults
# (on a bfloat16 CPU, a bfloat16 graph) and in float32. AVX2 is forced with oneDNN's cap (TensorFlow's kernels, and
# CTranslate2's on AMD), CTranslate2's own (CT2_FORCE_CPU_ISA) and MKL off (CTranslate2's int8 on Intel); a bfloat16
# SavedModel served so also needs TF_ENABLE_ONEDNN_OPTS=0 (bfloat16 in Eigen, as TensorFlow runs it on an AVX2 CPU;
# capped oneDNN crashes on it). The test split is decoded in ROUNDS turns (ours, CTranslate2 float32, int8, ...)
# for the speed; val once, for BLEU. Prints one table: BLEU, chrF2, sentences/s (the decoder's own line, from its
# first batch, tracing included) and how many lines equal the same CPU's float32 CTranslate2 export's.
#
#   bash benchmarks/multi30k_per_cpu.sh [WORK_DIR]
#
# Environment: MULTI30K_DIR (the release files; default WORK_DIR/tmp), ROUNDS (2).
set -euo pipefail
WORK=${1:-/tmp/t2t_lite_multi30k}
[[ -d "$WORK/run" ]] || { echo "multi30k_per_cpu.sh: $WORK has no run/ (run benchmarks/multi30k_quality.sh)" >&2; exit 2; }
RAW=$WORK/raw
python "$(dirname "$0")/peers/multi30k_raw.py" "${MULTI30K_DIR:-$WORK/tmp}" "$RAW"
OUT=$WORK/per_cpu
rm -rf "$WORK/exports_per_cpu" "$OUT"
mkdir -p "$OUT"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "$(grep -o -m1 -w 'avx512_bf16\|amx_bf16' /proc/cpuinfo | head -1 || echo 'no native bfloat16')"
EXPORTS=$WORK/exports_per_cpu
t2t-lite-exporter --output_dir="$WORK/run" --export_dir="$EXPORTS" --model_name=saved_model_defaults
t2t-lite-exporter --output_dir="$WORK/run" --export_dir="$EXPORTS" --model_name=saved_model_float32 --mixed_precision=none
t2t-lite-exporter --output_dir="$WORK/run" --export_dir="$EXPORTS" --model_name=ct2_float32 --export_format=ctranslate2
t2t-lite-exporter --output_dir="$WORK/run" --export_dir="$EXPORTS" --model_name=ct2_int8 --export_format=ctranslate2 \
  --quantization=int8
AVX2=(ONEDNN_MAX_CPU_ISA=AVX2 CT2_USE_MKL=0 CT2_FORCE_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2)
decode() {  # CPU NAME SPLIT ROUND FLAGS...: OUT/CPU.NAME.SPLIT.ROUND.{de,log}
  local cpu=$1 name=$2 split=$3 round=$4; shift 4
  local env=()
  [[ $cpu == avx2 ]] && env=("${AVX2[@]}")
  if [[ $cpu == avx2 && $name == saved_model_defaults ]]; then  # its bfloat16 graph, as an AVX2 CPU runs it
    env+=(TF_ENABLE_ONEDNN_OPTS=0)
    set -- "$@" --mixed_precision="$(python -c "import json,sys; print(json.load(open(sys.argv[1]))['export']['mixed_precision'])"       "$EXPORTS/saved_model_defaults/1/assets/hparams.json")"
  fi
  env "${env[@]}" t2t-lite-decoder "$@" --decode_from_file="$RAW/$split.en" \
    --decode_to_file="$OUT/$cpu.$name.$split.$round.de" --decode_reference="$RAW/$split.de" \
    > "$OUT/$cpu.$name.$split.$round.log" 2>&1 || { tail -5 "$OUT/$cpu.$name.$split.$round.log" >&2; exit 1; }
  echo "$cpu $name $split round $round: $(grep -o '([0-9.]* sentences/s)' "$OUT/$cpu.$name.$split.$round.log" | tail -1)"
}
for round in $(seq "${ROUNDS:-2}"); do
  for cpu in native avx2; do
    decode "$cpu" ours test_2016_flickr "$round" --output_dir="$WORK/run"
    for name in ct2_float32 ct2_int8 saved_model_defaults saved_model_float32; do
      decode "$cpu" "$name" test_2016_flickr "$round" --export_dir="$EXPORTS/$name/1"
    done
  done
done
for cpu in native avx2; do
  decode "$cpu" ours val 1 --output_dir="$WORK/run"
  decode "$cpu" ct2_float32 val 1 --export_dir="$EXPORTS/ct2_float32/1"
  decode "$cpu" ct2_int8 val 1 --export_dir="$EXPORTS/ct2_int8/1"
done
python - "$OUT" <<'PY'
import glob
import os
import re
import statistics
import sys

out = sys.argv[1]


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def found(text, pattern):
    values = re.findall(pattern, text)
    return values[-1] if values else "?"


print("| CPU | decoded by | split | BLEU | chrF2 | sentences/s (each round) | lines equal to CTranslate2 float32's |")
print("|---|---|---|---|---|---|---|")
for cpu in ("native", "avx2"):
    for split in ("test_2016_flickr", "val"):
        for name in ("ours", "ct2_float32", "ct2_int8", "saved_model_defaults", "saved_model_float32"):
            logs = sorted(glob.glob(f"{out}/{cpu}.{name}.{split}.*.log"))
            if not logs:
                continue
            text = read(logs[0])
            rates = [float(found(read(log), r"\(([0-9.]+) sentences/s\)")) for log in logs]
            reference = read(f"{out}/{cpu}.ct2_float32.{split}.1.de").splitlines()
            output = read(logs[0][:-4] + ".de").splitlines()
            same = sum(a == b for a, b in zip(reference, output))
            bleu = found(text, r"BLEU \(sacreBLEU 13a, detokenized\) = ([0-9.]+)")
            chrf = found(text, r"chrF2[^=]*= ([0-9.]+)")
            rate = f"{statistics.median(rates):.1f} ({', '.join(f'{r:.1f}' for r in rates)})"
            print(f"| {cpu} | {name} | {split} | {bleu} | {chrf} | {rate} | {same}/{len(reference)} |")
PY
