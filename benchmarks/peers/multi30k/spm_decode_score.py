"""Detokenize SentencePiece pieces (space-separated) and score with sacreBLEU (13a, cased).
Runs in the OpenNMT-tf venv (average_decode_score.sh calls it).
Usage: spm_decode_score.py <spm.model> <hyp.pieces> <hyp.out.txt> <raw reference>"""
import sys, sentencepiece as spm
from sacrebleu.metrics import BLEU

if len(sys.argv) != 5:
    sys.exit("usage: spm_decode_score.py SPM_MODEL HYP_PIECES HYP_OUT RAW_REFERENCE")
spm_model, pieces_file, out_file, ref_file = sys.argv[1:5]
sp = spm.SentencePieceProcessor(model_file=spm_model)
n_unk = 0
hyps = []
with open(pieces_file, encoding="utf-8") as f:
    for line in f:
        toks = line.split()
        n_unk += sum(t == "<unk>" for t in toks)
        hyps.append(sp.decode_pieces(toks))
with open(out_file, "w", encoding="utf-8") as f:
    f.write("\n".join(hyps) + "\n")
with open(ref_file, encoding="utf-8") as f:
    refs = [l.rstrip("\n") for l in f]
assert len(hyps) == len(refs), (len(hyps), len(refs))
bleu = BLEU()  # defaults: tokenize 13a, cased, smooth exp
score = bleu.corpus_score(hyps, [refs])
print(f"{out_file}: {score}")
print(f"signature: {bleu.get_signature()}")
print(f"<unk> tokens in output: {n_unk}")
