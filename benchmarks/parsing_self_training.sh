#!/usr/bin/env bash
# Self-training a parser in one CPU time budget: a first run on the treebank's trees parses unlabelled English
# sentences, the trees it is most confident of join the treebank's, and a second run trains on both from scratch.
# The time spent parsing counts against the budget, as training does (datagen and the dev decodes do not).
#
#   PTB_DIR=... SILVER_TEXT=... bash benchmarks/parsing_self_training.sh WORK_DIR [TOTAL_SECONDS]
#
# Environment: PTB_DIR (the sample's .mrg files, as for parsing_quality.sh); SILVER_TEXT (raw English, a sentence a
# line: e.g. ../shared/data/multi30k/raw/train.en); SILVER_LINES (how many of its first lines to parse: 12000);
# KEEP (the share of them kept, the highest-scoring: 0.67); FIRST_SECONDS (the first run's training: 600);
# FIRST_RUN (a parsing_quality.sh WORK_DIR already trained for FIRST_SECONDS, used as the first run instead of
# training one). The second run's training gets TOTAL_SECONDS (2100) minus the first run's and the parsing time.
# WORK_DIR/first is the first run's parsing_quality.sh directory, WORK_DIR/second the second's; each decodes the
# dev split (wsj_0160-0179) with the set's defaults and prints its F1 (PROBLEM, HPARAMS_SET and the rest as there).
set -euo pipefail
WORK=${1:?usage: parsing_self_training.sh WORK_DIR [TOTAL_SECONDS]}
TOTAL=${2:-2100}
FIRST_SECONDS=${FIRST_SECONDS:-600}
SILVER=${SILVER_TEXT:?set SILVER_TEXT to a file of raw English sentences, one a line}
PTB=${PTB_DIR:?set PTB_DIR to the directory of the sample .mrg files}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$WORK"
FIRST=${FIRST_RUN:-$WORK/first}
if [ -z "${FIRST_RUN:-}" ]; then
  PTB_DIR="$PTB" bash "$HERE/parsing_quality.sh" "$FIRST" "$FIRST_SECONDS"
fi

# Parse the unlabelled sentences as a user would (raw text, the set's decode settings), keeping every score.
head -n "${SILVER_LINES:-12000}" "$SILVER" > "$WORK/silver.txt"
start=$(date +%s)
t2t-lite-decoder --output_dir="$FIRST/run" --decode_from_file="$WORK/silver.txt" --decode_to_file="$WORK/silver.jsonl" \
  --output_format=jsonl --output_trees --parallel_batches=2 2>&1 | tail -2
PARSE_SECONDS=$(( $(date +%s) - start ))
echo "parsing the unlabelled sentences: $PARSE_SECONDS s"

# The most confident trees (highest length-penalised log-probability), as .mrg lines.
python3 - "$WORK" "${KEEP:-0.67}" <<'EOF'
import json, sys
work, keep = sys.argv[1], float(sys.argv[2])
parsed = [json.loads(line) for line in open(f"{work}/silver.jsonl", encoding="utf-8")]
trees = sorted(((row["hypotheses"][0]["score"], row["hypotheses"][0]["text"]) for row in parsed if row["hypotheses"]),
               reverse=True)
kept = trees[:int(len(trees) * keep)]
with open(f"{work}/silver.mrg", "w", encoding="utf-8") as out:
    out.writelines(f"( {tree} )\n" for _, tree in kept)
print(f"kept {len(kept)} of {len(parsed)} parsed sentences (score >= {kept[-1][0]:.3f})")
EOF

SECOND_SECONDS=$(( TOTAL - FIRST_SECONDS - PARSE_SECONDS ))
echo "second run: $SECOND_SECONDS s of training on the treebank's trees and the kept ones"
EXTRA_TRAIN_MRG="$WORK/silver.mrg" PTB_DIR="$PTB" bash "$HERE/parsing_quality.sh" "$WORK/second" "$SECOND_SECONDS"
