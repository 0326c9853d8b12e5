"""Where a decoder's cold start goes: tracing the search, the first call's fixed cost, a first and a second call
on the longest batch of a file.

  python benchmarks/decode_cold_start.py RUN_DIR SOURCE [BEAM] [BATCH]

Environment: GRAPPLER_OFF=1 turns TensorFlow's graph optimizer off; TINY_FIRST=1 makes a 2-sentence call before
the long batch (its time is the first call's fixed cost). SOURCE holds one tokenized sentence per line (a parser's
dev.words from benchmarks/parsing_quality.sh).
"""
import os
import sys
import time

import tensorflow as tf
if os.environ.get("GRAPPLER_OFF"):
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
from t2t_lite import Translator
from t2t_lite.decoding.batching import encode_lines, longest_first, pad_ids

run, source = sys.argv[1], sys.argv[2]
beam, batch_size = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (6, 128)
words = [line.rstrip("\n") for line in open(source, encoding="utf-8")]
tr = Translator.from_run(run, beam_size=beam, batch_size=batch_size)
backend = tr._backend
decoder = backend.decoder(tr.decode)
encoded = encode_lines(backend.run.problem, words)
batch = pad_ids([encoded[i] for i in longest_first([len(ids) for ids in encoded], batch_size)[0]])  # the longest


def timed(call):
    start = time.time()
    result = call()
    return result, time.time() - start


concrete, trace = timed(decoder.decode.get_concrete_function)
if os.environ.get("TINY_FIRST"):
    # Two short rows (cut to 8 ids): what the first call costs whatever the batch.
    _, tiny = timed(lambda: decoder.decode(batch[-2:, :8])[0].numpy())
    print(f"tiny first call {tiny:.2f} s")
first_ids, first = timed(lambda: decoder.decode(batch)[0].numpy())
second_ids, second = timed(lambda: decoder.decode(batch)[0].numpy())
assert (first_ids == second_ids).all()
print(f"trace {trace:.2f} s ({len(concrete.graph.get_operations())} ops)  first call {first:.2f} s  "
      f"second call {second:.2f} s  grappler {'off' if os.environ.get('GRAPPLER_OFF') else 'on'}")
