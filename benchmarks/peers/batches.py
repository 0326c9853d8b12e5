"""Deterministic token-based batching that mirrors OpenNMT-tf 2.32's training pipeline
(batch_type=tokens, batch_size=4096, length_bucket_width=1, no pad_to_bucket_boundary):

  * examples are visited in a random order (np.random.default_rng(1234).permutation)
  * bucket key L = max(src_len, tgt_len + 1)   (target side counts </s>, like ONMT's labels length)
  * a bucket emits a batch as soon as it holds max(4096 // L, 1) examples
    (== tf.data group_by_window with OpenNMT's _window_size_func)
  * batches are padded (id 0) to the longest source / target sequence in the batch
  * the first `n_batches` emitted batches are used, in emission order

Used by mg_train.py (Model Garden). Model ids: 0 = pad, 1 = <s>, 2 = </s>, 3..32767 = words (see gen_data.py).
Each batch is a dict: src [B,S] int32, tgt_in [B,T] (<s> + y), tgt_out [B,T] (y + </s>),
src_tokens (non-pad source tokens), tgt_tokens (non-pad target positions = words + </s>).
"""
import numpy as np

PAD, BOS, EOS = 0, 1, 2


def make_batches(npz_path, n_batches=40, batch_tokens=4096,
                 seed=1234, max_len=100):
    d = np.load(npz_path)
    src_len, tgt_len = d["src_len"], d["tgt_len"]
    src_off = np.concatenate([[0], np.cumsum(src_len)])
    tgt_off = np.concatenate([[0], np.cumsum(tgt_len)])
    src_ids, tgt_ids = d["src_ids"], d["tgt_ids"]
    order = np.random.default_rng(seed).permutation(len(src_len))
    buckets = {}
    batches = []
    for i in order:
        if src_len[i] > max_len or tgt_len[i] + 1 > max_len:
            continue
        key = int(max(src_len[i], tgt_len[i] + 1))
        b = buckets.setdefault(key, [])
        b.append(i)
        if len(b) == max(batch_tokens // key, 1):
            batches.append(_pad(b, src_ids, tgt_ids, src_off, tgt_off, src_len, tgt_len))
            buckets[key] = []
            if len(batches) == n_batches:
                break
    return batches


def _pad(idx, src_ids, tgt_ids, src_off, tgt_off, src_len, tgt_len):
    B = len(idx)
    S = int(max(src_len[i] for i in idx))
    T = int(max(tgt_len[i] for i in idx)) + 1
    src = np.zeros((B, S), np.int32)
    tin = np.zeros((B, T), np.int32)
    tout = np.zeros((B, T), np.int32)
    for r, i in enumerate(idx):
        s = src_ids[src_off[i]:src_off[i + 1]]
        t = tgt_ids[tgt_off[i]:tgt_off[i + 1]]
        src[r, :len(s)] = s
        tin[r, 0] = BOS
        tin[r, 1:len(t) + 1] = t
        tout[r, :len(t)] = t
        tout[r, len(t)] = EOS
    return dict(src=src, tgt_in=tin, tgt_out=tout,
                src_tokens=int(sum(src_len[i] for i in idx)),
                tgt_tokens=int(sum(tgt_len[i] + 1 for i in idx)),
                rows=B, src_pad_len=S, tgt_pad_len=T)


if __name__ == "__main__":
    import sys
    if len(sys.argv) != 2:
        sys.exit("usage: python batches.py CORPUS.npz   (gen_data.py's corpus.npz): prints the first 40 batches")
    bs = make_batches(sys.argv[1])
    for k, b in enumerate(bs):
        print(k + 1, b["rows"], b["src_pad_len"], b["tgt_pad_len"], b["src_tokens"], b["tgt_tokens"],
              b["rows"] * b["tgt_pad_len"])
    print("mean src tokens %.1f tgt tokens %.1f" % (np.mean([b["src_tokens"] for b in bs]),
                                                   np.mean([b["tgt_tokens"] for b in bs])))
