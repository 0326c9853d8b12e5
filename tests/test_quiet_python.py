"""Quiet from Python as from the commands: t2t-lite's own graphs give TensorFlow nothing to warn about.

The commands lower TensorFlow's log level (bin/quiet_start.py); a notebook
running the README's Python example keeps TensorFlow's default, and used to
show lines that read like failures:
- `OP_REQUIRES failed at sentencepiece_kernels.cc ... NOT_FOUND: Resource
  localhost/_0_SentencepieceOp/... does not exist` and `Local rendezvous is
  aborting`: the trainer's random seed cleared TensorFlow's eager caches,
  and with them the parsed model of the vocabulary the problem had opened
  (data/vocabulary.py);
- `Error in PredictCost() for the op: ... op: "Softmax" ... unknown_rank`,
  eight per step graph: under mixed precision the loss's softmax read the
  XLA-compiled product (ops/float32_product.py), whose rank Grappler cannot see.
"""
import os
import re
import subprocess
import sys

import pytest

from t2t_lite.registry import problems

OWN_WARNINGS = re.compile(r"^.*(?:sentencepiece_kernels|SentencepieceOp|Local rendezvous|PredictCost).*$",
                          re.MULTILINE)
TINY = "num_encoder_layers=1,num_decoder_layers=1,d_model=16,d_ff=32,num_heads=2"
WORDS = ["a", "dog", "runs", "in", "the", "park", "cat", "sleeps", "on", "mat", "big", "red"]
WORTER = ["ein", "hund", "rennt", "im", "park", "die", "katze", "schläft", "auf", "matte", "groß", "rot"]


def _lines(words: list[str], count: int, seed: int) -> str:
    return "".join(" ".join(words[(seed + i * 5 + j * 7) % len(words)] for j in range(2 + i % 4)) + "\n"
                   for i in range(count))


@pytest.mark.slow  # a fresh interpreter trains and translates
def test_train_then_translate_from_python_logs_no_sentencepiece_or_softmax_cost_warnings(tmp_path):
    raw, data_dir, run = tmp_path / "raw", tmp_path / "data", tmp_path / "run"
    raw.mkdir()
    for split, count, seed in (("train", 200, 0), ("dev", 10, 1)):
        (raw / f"{split}.en").write_text(_lines(WORDS, count, seed), encoding="utf-8")
        (raw / f"{split}.de").write_text(_lines(WORTER, count, seed), encoding="utf-8")
    problems.get("translate_files")(str(data_dir)).generate_data(
        None, vocab_size=300, num_shards=1, train_files=f"{raw}/train.en,{raw}/train.de",
        dev_files=f"{raw}/dev.en,{raw}/dev.de", log=lambda line: None)
    # The README's example, small: the problem opens its vocabulary before the trainer sets its seed and
    # its first tokenization comes after (the dev sentences BLEU is scored on); mixed_bfloat16 on any CPU,
    # so the loss's projection is the compiled product.
    code = (f"import t2t_lite\n"
            f"t2t_lite.train(problem='translate_files', hparams_set='transformer_tiny', data_dir={str(data_dir)!r},\n"
            f"               output_dir={str(run)!r}, hparams={TINY!r}, train_steps=2, save_checkpoints_steps=2,\n"
            f"               eval_steps=1, eval_bleu_sentences=2, memory_probe=False,\n"
            f"               mixed_precision='mixed_bfloat16', log=print)\n"
            f"print(t2t_lite.Translator.from_run({str(run)!r}).translate(['a dog runs']))\n")
    # TensorFlow's default logging, as in a notebook: not the test session's TF_CPP_MIN_LOG_LEVEL=3.
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "T2T_LITE_DEBUG")}
    done = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "bleu" in done.stdout.lower()  # the dev sentences were tokenized and scored
    found = OWN_WARNINGS.findall(done.stdout)
    assert found == [], "\n".join(line[:300] for line in found)
