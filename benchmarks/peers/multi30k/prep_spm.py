"""The Multi30k peer's data: one shared SentencePiece BPE model on train.en + train.de, every split encoded as
space-separated pieces, and OpenNMT-tf's vocabulary file made from the SentencePiece vocabulary.

Runs in the OpenNMT-tf venv (benchmarks/peers/setup.sh), called by benchmarks/multi30k_peer.sh:

  $PEERS_DIR/onmt/bin/python prep_spm.py RAW_DIR OUT_DIR [VOCAB_SIZE=8000]

RAW_DIR holds the plain text files {train,val,test_2016_flickr}.{en,de} (benchmarks/peers/multi30k_raw.py makes
them). Writes OUT_DIR/spm.model, spm.vocab, {split}.sp.{en,de} and vocab.onmt.txt.
"""
import os
import subprocess
import sys

import sentencepiece as spm

if len(sys.argv) not in (3, 4):
    sys.exit("usage: prep_spm.py RAW_DIR OUT_DIR [VOCAB_SIZE=8000]")
RAW, OUT = sys.argv[1], sys.argv[2]
VOCAB = int(sys.argv[3]) if len(sys.argv) > 3 else 8000
for split in ("train", "val", "test_2016_flickr"):
    for lang in ("en", "de"):
        if not os.path.isfile(f"{RAW}/{split}.{lang}"):
            sys.exit(f"prep_spm.py: no {RAW}/{split}.{lang} (benchmarks/peers/multi30k_raw.py writes the plain files)")
os.makedirs(OUT, exist_ok=True)

spm.SentencePieceTrainer.train(
    input=f"{RAW}/train.en,{RAW}/train.de",
    model_prefix=f"{OUT}/spm",
    vocab_size=VOCAB,
    model_type="bpe",
    character_coverage=1.0,
    num_threads=2,
    # everything else default (normalization_rule_name=nmt_nfkc, unk=0, bos=1, eos=2, no pad)
)
sp = spm.SentencePieceProcessor(model_file=f"{OUT}/spm.model")
for split in ("train", "val", "test_2016_flickr"):
    for lang in ("en", "de"):
        with open(f"{RAW}/{split}.{lang}", encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f]
        pieces = sp.encode(lines, out_type=str)
        with open(f"{OUT}/{split}.sp.{lang}", "w", encoding="utf-8") as f:
            for p in pieces:
                f.write(" ".join(p) + "\n")

# OpenNMT-tf vocab: <blank>, <s>, </s> first, then all SentencePiece pieces except
# SentencePiece's own <unk>,<s>,</s>; OpenNMT-tf appends <unk> as the OOV bucket at
# id = vocab_size. This is exactly what `onmt-build-vocab --from_format sentencepiece` does.
subprocess.run(
    [os.path.join(os.path.dirname(sys.executable), "onmt-build-vocab"),
     "--from_vocab", f"{OUT}/spm.vocab", "--from_format", "sentencepiece",
     "--save_vocab", f"{OUT}/vocab.onmt.txt"],
    check=True,
)
with open(f"{OUT}/vocab.onmt.txt", encoding="utf-8") as f:
    v = [line.rstrip("\n") for line in f]
print("onmt vocab lines:", len(v), "first 5:", v[:5], "has <unk>:", "<unk>" in v)
