#!/usr/bin/env bash
# Same outputs before and after a change: a Multi30k De-En model and a PTB-sample parser, each trained for
# MINUTES by the BEFORE version, decoded in float32 by both versions (Multi30k test_2016_flickr; the
# parser's dev split, with and without its tree constraint); the lines are compared.
#
#   bash benchmarks/same_outputs.sh BEFORE_BIN AFTER_BIN WORK_DIR [MINUTES]
#
# BEFORE_BIN, AFTER_BIN: directories holding each version's t2t-lite-* commands, e.g. a venv's bin/ with the
# commit before installed (python -m venv --system-site-packages V && V/bin/pip install --no-deps CHECKOUT).
# SHARED_DATA: ../shared/data beside the checkout by default. A rerun keeps what WORK_DIR holds (the prepared
# data and the two runs) and decodes again.
set -euo pipefail
BEFORE=${1:?usage: same_outputs.sh BEFORE_BIN AFTER_BIN WORK_DIR [MINUTES]}
AFTER=${2:?usage: same_outputs.sh BEFORE_BIN AFTER_BIN WORK_DIR [MINUTES]}
WORK=${3:?usage: same_outputs.sh BEFORE_BIN AFTER_BIN WORK_DIR [MINUTES]}
MINUTES=${4:-5}
DATA=${SHARED_DATA:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}
RAW=$DATA/multi30k/raw
mkdir -p "$WORK"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"

[ -d "$WORK/m30k_data" ] || "$BEFORE/t2t-lite-datagen" --problem=translate_files --data_dir="$WORK/m30k_data" --vocab_size=8000 \
  --train_files="$RAW/train.de,$RAW/train.en" --dev_files="$RAW/val.de,$RAW/val.en"
[ -d "$WORK/m30k_run" ] || "$BEFORE/t2t-lite-trainer" --problem=translate_files --data_dir="$WORK/m30k_data" \
  --hparams_set=transformer_small_data --output_dir="$WORK/m30k_run" --train_minutes="$MINUTES" \
  --eval_bleu_sentences=0 --mixed_precision=none
[ -d "$WORK/ptb_data" ] || "$BEFORE/t2t-lite-datagen" --problem=parsing_ptb_sample_words --data_dir="$WORK/ptb_data" \
  --tmp_dir="$DATA/ptb_wsj_sample/mrg"
"$BEFORE/python" - "$DATA/ptb_wsj_sample/mrg" "$WORK" <<'EOF'
import sys
sys.path = [path for path in sys.path if path not in ("", ".")]
from t2t_lite.problems.ptb_sample import sample_directory, split_files
from t2t_lite.problems.wsj_parsing import read_mrg_pairs
from t2t_lite.registry import problems

form = problems.get("parsing_ptb_sample_words")(None).form
pairs = [pair for pair in read_mrg_pairs(split_files(sample_directory(sys.argv[1]), "dev"), form) if pair[0]]
with open(f"{sys.argv[2]}/dev.words", "w", encoding="utf-8") as words:
    words.writelines(source + "\n" for source, _ in pairs)
print(f"parser dev split: {len(pairs)} sentences")
EOF
[ -d "$WORK/ptb_run" ] || "$BEFORE/t2t-lite-trainer" --problem=parsing_ptb_sample_words --data_dir="$WORK/ptb_data" \
  --hparams_set=transformer_parsing_small_data --output_dir="$WORK/ptb_run" --train_minutes="$MINUTES" \
  --train_steps=1000000 --eval_bleu_sentences=0 --mixed_precision=none

for version in before after; do
  bin=$BEFORE; [ "$version" = after ] && bin=$AFTER
  "$bin/t2t-lite-decoder" --output_dir="$WORK/m30k_run" --decode_from_file="$RAW/test_2016_flickr.de" \
    --decode_to_file="$WORK/m30k.$version" --mixed_precision=none
  for constrained in true false; do
    "$bin/t2t-lite-decoder" --output_dir="$WORK/ptb_run" --decode_from_file="$WORK/dev.words" --input_tokenized \
      --constrained_decoding=$constrained --decode_to_file="$WORK/ptb_constrained_$constrained.$version" \
      --mixed_precision=none
  done
done
for name in m30k ptb_constrained_true ptb_constrained_false; do
  lines=$(wc -l < "$WORK/$name.before")
  differing=$(paste -d '\n' "$WORK/$name.before" "$WORK/$name.after" | paste - - | awk -F '\t' '$1 != $2' | wc -l)
  echo "$name: $differing of $lines lines differ"
done
