#!/usr/bin/env bash
# Makes the peers' virtual environments for the benchmarks that compare t2t-lite with other toolkits
# (benchmarks/run_protocol.sh, multi30k_side_by_side.sh, parsing_side_by_side.sh):
#
#   DIR/onmt  OpenNMT-tf 2.32.0 on TensorFlow 2.13.1 (+ tensorflow-addons 0.21.0; opennmt-tf pulls in
#             ctranslate2 3.x, whose converter `onmt-main export --format ctranslate2` uses), psutil,
#             sentencepiece 0.2.3 and sacrebleu 2.6.0 (the Multi30k and parsing peers' vocabulary and scores)
#   DIR/ct2   CTranslate2 4.8.5 and psutil (the protocol's decoding peer)
#   DIR/mg    only with --model-garden or PEERS_MODEL_GARDEN=1: TF Model Garden (tf-models-official 2.20.0
#             on TensorFlow 2.20.0), for mg_train.py; no benchmark in benchmarks/ needs it
#
#   bash benchmarks/peers/setup.sh DIR [--model-garden]
#
# The versions are those the figures in docs/performance.md were measured with. Idempotent: a venv that
# already imports what it needs is kept as it is (delete the directory to rebuild it). Needs python3.11 or
# older for TensorFlow 2.13 (PYTHON, default python3, chooses the interpreter) and pip's network; the
# OpenNMT-tf venv downloads about 600 MB and takes a few minutes.
set -euo pipefail
DIR=${1:?usage: bash benchmarks/peers/setup.sh DIR [--model-garden]}
MG=${PEERS_MODEL_GARDEN:-0}
[[ "${2:-}" == "--model-garden" ]] && MG=1
PYTHON=${PYTHON:-python3}
command -v "$PYTHON" > /dev/null || { echo "setup.sh: no $PYTHON on PATH (set PYTHON to a Python 3.9-3.11)" >&2; exit 2; }
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

# make_venv NAME IMPORT_CHECK PIP_ARGS...: the venv DIR/NAME, unless IMPORT_CHECK already runs in it.
make_venv() {
  local name=$1 check=$2
  shift 2
  local venv="$DIR/$name"
  if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "$check" > /dev/null 2>&1; then
    echo "setup.sh: $venv already has what it needs; kept"
    return
  fi
  echo "setup.sh: making $venv: pip install $*"
  "$PYTHON" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet "$@"
  "$venv/bin/python" -c "$check" || { echo "setup.sh: $venv was made but cannot import what it needs" >&2; exit 1; }
  echo "setup.sh: made $venv"
}

make_venv onmt "import opennmt, tensorflow, ctranslate2, sentencepiece, sacrebleu, psutil; assert opennmt.__version__ == '2.32.0' and tensorflow.__version__.startswith('2.13.')" \
  "tensorflow==2.13.1" "tensorflow-addons==0.21.0" "opennmt-tf==2.32.0" psutil "sentencepiece==0.2.3" "sacrebleu==2.6.0"
make_venv ct2 "import ctranslate2, psutil; assert ctranslate2.__version__ == '4.8.5'" "ctranslate2==4.8.5" psutil
if [[ "$MG" == "1" ]]; then
  make_venv mg "import official.nlp.modeling, tf_keras, psutil" "tensorflow==2.20.0" "tf-models-official==2.20.0" psutil
fi

echo "setup.sh: the peers' venvs in $DIR:"
"$DIR/onmt/bin/python" -c "import opennmt, tensorflow, ctranslate2, sentencepiece, sacrebleu; print(f'  onmt: OpenNMT-tf {opennmt.__version__}, TensorFlow {tensorflow.__version__}, ctranslate2 {ctranslate2.__version__}, sentencepiece {sentencepiece.__version__}, sacrebleu {sacrebleu.__version__}')" 2> /dev/null
"$DIR/ct2/bin/python" -c "import ctranslate2; print(f'  ct2:  CTranslate2 {ctranslate2.__version__}')"
if [[ -x "$DIR/mg/bin/python" ]]; then
  "$DIR/mg/bin/python" -c "import tensorflow; print(f'  mg:   TensorFlow {tensorflow.__version__} with tf-models-official')" 2> /dev/null
fi
echo "setup.sh: use them with PEERS_DIR=$DIR (the benchmarks' default is /tmp/peers)"
