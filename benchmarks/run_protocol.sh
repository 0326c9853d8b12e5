#!/usr/bin/env bash
# The whole performance protocol (docs/performance.md): the peers
# and t2t-lite one command after another on this machine, so their ratios compare.
#
#   bash benchmarks/peers/setup.sh /tmp/peers        # once: the OpenNMT-tf and CTranslate2 venvs
#   bash benchmarks/run_protocol.sh [LOG]            # about 50 minutes on 2 cores
#   QUICK=1 bash benchmarks/run_protocol.sh [LOG]    # t2t-lite only, each benchmark's --quick mode
#
# The peers' side runs benchmarks/peers/protocol.sh (data, OpenNMT-tf's 40 timed steps, its export to
# CTranslate2, CTranslate2's decoding) in the venvs under PEERS_DIR (default /tmp/peers), where their data, runs
# and logs go too. LOG (default benchmarks/logs/sitting-<time>.txt)
# gets the benchmarks' own lines and "peer ..." lines, which
# `python benchmarks/plot_results.py LOG PNG` plots; full output goes to LOG.raw.
# Environment: PEERS_DIR, PYTHON (t2t-lite's python, default python), QUICK.
# Run it on an otherwise idle machine: anything else running moves the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS=${PEERS_DIR:-/tmp/peers}
export PEERS_DIR=$PEERS
PYTHON=${PYTHON:-python}
LOG=${1:-benchmarks/logs/sitting-$(date -u +%Y%m%dT%H%M%SZ).txt}
QUICK=${QUICK:-}
quick=${QUICK:+--quick}

if [[ -z "$QUICK" ]]; then
  for venv in onmt ct2; do
    if [[ ! -x "$PEERS/$venv/bin/python" ]]; then
      echo "run_protocol.sh: no peers' $venv venv under $PEERS: run bash benchmarks/peers/setup.sh $PEERS (or set PEERS_DIR), or run with QUICK=1 for t2t-lite alone" >&2
      exit 2
    fi
  done
fi

note() { echo "# $(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }
# A benchmark's result lines (those its own prints begin with) go to LOG; everything, TensorFlow's
# logging included, to LOG.raw, which is where a failure's traceback is.
ours() {
  note "\$ python $*"
  if ! "$PYTHON" "$@" 2>&1 | tee -a "$LOG.raw" | grep -E '^(train|decode|pipeline|seed|ceiling)' | tee -a "$LOG"; then
    echo "run_protocol.sh: python $* failed or printed no result; its output is in $LOG.raw" >&2
    exit 1
  fi
}
onmt_train() {
  note "\$ bash benchmarks/peers/protocol.sh train $1"
  bash benchmarks/peers/protocol.sh train "$1"
  "$PEERS/onmt/bin/python" - "$PEERS/logs" "$1" <<'PY' | tee -a "$LOG"
import re, sys
logs, tag = sys.argv[1], sys.argv[2]
sys.path.insert(0, "benchmarks/peers")
from summarize import stats  # the peers' own figures: steps 11-40, median step
s = stats(f"{logs}/onmt_steps{tag}.json")
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(f"{logs}/onmt_train{tag}.log").read())[1])
per_second = s["mean_tgt_tokens"] / s["median_step_s"]
print(f"#   OpenNMT-tf: median step {s['median_step_s']:.2f} s, {per_second:.1f} target tokens/s, "
      f"{s['achieved_gflops_a']:.1f} GFLOP/s (A), peak RSS {rss / 2**20:.2f} GiB")
print(f"peer OpenNMT-tf 2.32 train fp32: {per_second:.1f} target tokens/s")
PY
}
ct2_decode() {
  note "\$ bash benchmarks/peers/protocol.sh ct2 $1"
  bash benchmarks/peers/protocol.sh ct2 "$1"
  python3 - "$PEERS/logs/ct2$1.json" <<'PY' | tee -a "$LOG"
import json, sys
d = json.load(open(sys.argv[1]))
print(f"#   CTranslate2 {d['ctranslate2_version']} passes {[round(t, 2) for t in d['times_s']]} median {d['median_s']:.2f} s")
print(f"peer CTranslate2 {d['ctranslate2_version']} decode fp32: {d['sent_per_s']:.2f} sentences/s, peak RSS {d['peak_rss_gib']:.2f} GiB")
PY
}

mkdir -p "$(dirname "$LOG")"
note "sitting started $(date -u +%Y-%m-%dT%H:%M:%SZ), HEAD $(git rev-parse --short HEAD), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), cpu family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs)${QUICK:+, quick}"
if [[ -z "$QUICK" ]]; then
  note "\$ bash benchmarks/peers/protocol.sh data"
  bash benchmarks/peers/protocol.sh data > /dev/null
  onmt_train _sitting
fi
ours benchmarks/bench_train.py $quick
ours benchmarks/bench_train.py $quick --mixed_precision=mixed_bfloat16
if [[ -z "$QUICK" ]]; then
  note "CTranslate2: export OpenNMT-tf's 40-step checkpoint in float32 and int8"
  bash benchmarks/peers/protocol.sh export
  ct2_decode _sitting
fi
# Our CTranslate2 export in float32 and int8 (and OpenNMT-tf's int8 export, with the peers' CTranslate2), then int8 in TF.
peer_ct2=()
[[ -z "$QUICK" ]] && peer_ct2=(--peer_model_dir "$PEERS/run/ct2_int8_model" --python "$PEERS/ct2/bin/python")
ours benchmarks/bench_ctranslate2.py $quick "${peer_ct2[@]}"
ours benchmarks/bench_int8_tf.py $quick
ours benchmarks/bench_decode.py $quick
ours benchmarks/bench_decode.py $quick --mixed_precision=mixed_bfloat16
ours benchmarks/bench_decode.py $quick --mixed_precision=bfloat16
ours benchmarks/bench_decode.py $quick --beam_size=1
ours benchmarks/bench_decode.py --batch_size=1 --sentences=$([[ -n "$QUICK" ]] && echo 8 || echo 50)
ours benchmarks/bench_decode.py --length_sweep --quick
if [[ -z "$QUICK" ]]; then
  note "\$ $PEERS/ct2/bin/python benchmarks/ct2_length_sweep.py"
  "$PEERS/ct2/bin/python" benchmarks/ct2_length_sweep.py "$PEERS/run/ct2_model" "$PEERS/data/infer_src.txt" 2>&1 | tee -a "$LOG"
fi
ours benchmarks/bench_pipeline.py --quick
for seed in 1234 7 42 99; do
  ours benchmarks/bench_bf16_curve.py $quick --seed=$seed --no_rounded_start
done
note "sitting ended $(date -u +%Y-%m-%dT%H:%M:%SZ)"
