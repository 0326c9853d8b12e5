#!/usr/bin/env python3
"""TF Model Garden (tf-models-official 2.20.0, TF 2.20) Seq2SeqTransformer, Transformer-base sizes,
minimal training loop: tf.function (no XLA), tf_keras Adam(0.9, 0.98, 1e-9) + Noam schedule,
Model Garden's own label-smoothed loss (official.nlp.tasks.translation._padded_cross_entropy_loss, 0.1).
Layer settings = Model Garden translation-task defaults (dropout 0.1, attention dropout 0.1,
intermediate dropout 0.1, use_bias=False, norm_first=True (pre-LN), norm_epsilon 1e-6).
Embeddings: one OnDeviceEmbedding shared by encoder, decoder and the pre-softmax projection.

Optional peer: its venv is made by `bash benchmarks/peers/setup.sh DIR --model-garden`; no benchmark
in benchmarks/ runs it. Usage:
  $PEERS_DIR/mg/bin/python mg_train.py CORPUS.npz OUT.json [n_steps=40]     (CORPUS.npz: gen_data.py's)
"""
import json
import os
import sys
import time

import numpy as np
import psutil
import tensorflow as tf
import tf_keras

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from batches import make_batches  # noqa: E402

from official.nlp.modeling import models  # noqa: E402
from official.nlp.tasks.translation import _padded_cross_entropy_loss  # noqa: E402

if len(sys.argv) not in (3, 4):
    sys.exit("usage: mg_train.py CORPUS.npz OUT.json [n_steps=40]")
corpus_path, out_path = sys.argv[1], sys.argv[2]
n_steps = int(sys.argv[3]) if len(sys.argv) > 3 else 40
V = 32768
tf.random.set_seed(1234)
np.random.seed(1234)

layer_kw = dict(num_layers=6, num_attention_heads=8, intermediate_size=2048, activation="relu",
                dropout_rate=0.1, attention_dropout_rate=0.1, use_bias=False, norm_first=True,
                norm_epsilon=1e-6, intermediate_dropout=0.1)
model = models.Seq2SeqTransformer(
    vocab_size=V, embedding_width=512, dropout_rate=0.1, padded_decode=False,
    decode_max_length=None, beam_size=4, alpha=0.6,
    encoder_layer=models.TransformerEncoder(**layer_kw),
    decoder_layer=models.TransformerDecoder(**layer_kw), eos_id=2)


class Noam(tf_keras.optimizers.schedules.LearningRateSchedule):
    def __call__(self, step):
        step = tf.cast(step + 1, tf.float32)
        return 512.0 ** -0.5 * tf.minimum(tf.math.rsqrt(step), step * 4000.0 ** -1.5)


opt = tf_keras.optimizers.Adam(Noam(), beta_1=0.9, beta_2=0.98, epsilon=1e-9)


@tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)] * 2)
def train_step(src, tgt_out):
    # Seq2SeqTransformer shifts `targets` right internally (start symbol = id 0).
    with tf.GradientTape() as tape:
        logits = model({"inputs": src, "targets": tgt_out}, training=True)
        xent, weights = _padded_cross_entropy_loss(logits, tgt_out, 0.1, V)
        loss = tf.reduce_sum(xent) / tf.reduce_sum(weights)
    tvars = model.trainable_variables
    grads = tape.gradient(loss, tvars)
    opt.apply_gradients(zip(grads, tvars))
    return loss


batches = make_batches(corpus_path, n_batches=n_steps)
proc = psutil.Process()
records = []
t_prev = time.perf_counter()
t_start = t_prev
for k, b in enumerate(batches):
    loss = train_step(tf.constant(b["src"]), tf.constant(b["tgt_out"]))
    loss = float(loss.numpy())
    now = time.perf_counter()
    records.append(dict(step=k + 1, t=now, dt=now - t_prev, loss=loss, src_tokens=b["src_tokens"],
                        tgt_tokens=b["tgt_tokens"], rows=b["rows"], src_pad_len=b["src_pad_len"],
                        tgt_pad_len=b["tgt_pad_len"], rss_bytes=proc.memory_info().rss))
    print("[steptimer] step %d dt=%.3f src=%d tgt=%d loss=%.4f rss=%.2fGiB" % (
        k + 1, now - t_prev, b["src_tokens"], b["tgt_tokens"], loss, proc.memory_info().rss / 2**30),
        flush=True)
    t_prev = now

num_params = int(sum(np.prod(v.shape) for v in model.trainable_variables))
with open(out_path, "w") as f:
    json.dump(dict(tool="tf-models-official Seq2SeqTransformer", tf_version=tf.__version__,
                   num_params=num_params, records=records, t_start=t_start,
                   optimizer_jit_compile=bool(opt.jit_compile),
                   variables=[(v.name, list(v.shape)) for v in model.trainable_variables],
                   intra_op=tf.config.threading.get_intra_op_parallelism_threads(),
                   inter_op=tf.config.threading.get_inter_op_parallelism_threads()), f, indent=1)
print("num_params", num_params, "optimizer jit_compile", opt.jit_compile)
