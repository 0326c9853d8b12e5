#!/usr/bin/env python3
"""Deterministic synthetic parallel corpus for the CPU throughput protocol.

Vocabulary: exactly 32768 entries shared by source and target:
  id 0 = <blank> (padding), id 1 = <s>, id 2 = </s>, ids 3..32767 = words w0..w32764.
Sentences: 20,000 pairs; source and target lengths drawn independently and
uniformly in [10, 50] (inclusive); word indices uniform over the 32765 words.

RNG recipe (numpy Generator PCG64, seed 1234), in this exact order:
  rng = np.random.default_rng(1234)
  src_len = rng.integers(10, 51, size=20000)
  tgt_len = rng.integers(10, 51, size=20000)
  src_tok = rng.integers(0, 32765, size=src_len.sum())   # word index N -> "wN", model id N+3
  tgt_tok = rng.integers(0, 32765, size=tgt_len.sum())
Inference inputs (CTranslate2 / onmt infer): rng2 = np.random.default_rng(4321);
  500 sentences, len = rng2.integers(20, 31, size=500), tokens rng2.integers(0, 32765, size=len.sum())

Outputs in OUT_DIR: src.txt tgt.txt vocab.txt (ONMT format, 32768 lines)
  corpus.npz (int32 model ids, flattened + lengths)  infer_src.txt
benchmarks/common.py's training_corpus() and decode_inputs() make the same sequences for t2t-lite.

Usage: python gen_data.py OUT_DIR      (any Python with numpy; run_protocol.sh uses $PEERS_DIR/data)
"""
import os
import sys

import numpy as np

if len(sys.argv) != 2:
    sys.exit("usage: python gen_data.py OUT_DIR")
OUT = sys.argv[1]
N_PAIRS = 20000
N_WORDS = 32765  # + 3 specials = 32768
N_SPECIALS = 3


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(1234)
    src_len = rng.integers(10, 51, size=N_PAIRS)
    tgt_len = rng.integers(10, 51, size=N_PAIRS)
    src_tok = rng.integers(0, N_WORDS, size=int(src_len.sum()))
    tgt_tok = rng.integers(0, N_WORDS, size=int(tgt_len.sum()))

    def write(path, lens, toks):
        offs = np.concatenate([[0], np.cumsum(lens)])
        with open(path, "w") as f:
            for i in range(len(lens)):
                f.write(" ".join("w%d" % t for t in toks[offs[i]:offs[i + 1]]) + "\n")

    write(os.path.join(OUT, "src.txt"), src_len, src_tok)
    write(os.path.join(OUT, "tgt.txt"), tgt_len, tgt_tok)
    with open(os.path.join(OUT, "vocab.txt"), "w") as f:
        f.write("<blank>\n<s>\n</s>\n")
        for i in range(N_WORDS):
            f.write("w%d\n" % i)
    np.savez(os.path.join(OUT, "corpus.npz"),
             src_len=src_len.astype(np.int32), tgt_len=tgt_len.astype(np.int32),
             src_ids=(src_tok + N_SPECIALS).astype(np.int32),
             tgt_ids=(tgt_tok + N_SPECIALS).astype(np.int32))

    rng2 = np.random.default_rng(4321)
    inf_len = rng2.integers(20, 31, size=500)
    inf_tok = rng2.integers(0, N_WORDS, size=int(inf_len.sum()))
    write(os.path.join(OUT, "infer_src.txt"), inf_len, inf_tok)
    print("pairs", N_PAIRS, "src tokens", int(src_len.sum()), "tgt tokens", int(tgt_len.sum()),
          "infer sents", len(inf_len), "infer src tokens", int(inf_len.sum()))


if __name__ == "__main__":
    main()
