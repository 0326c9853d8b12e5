"""CTranslate2's decode time against output length, to set beside `bench_decode.py --length_sweep --quick`.

Runs in the peers' CTranslate2 venv (`bash benchmarks/peers/setup.sh $PEERS_DIR`), on the
model `bash benchmarks/peers/protocol.sh export` writes, with the peers' threads (inter 1, intra 2):

  $PEERS_DIR/ct2/bin/python benchmarks/ct2_length_sweep.py [MODEL_DIR] [INPUTS]

MODEL_DIR defaults to $PEERS_DIR/run/ct2_model and INPUTS to $PEERS_DIR/data/infer_src.txt (protocol.sh data),
PEERS_DIR to /tmp/peers.

The first 64 of the protocol's 500 sentences, beam 4, batches of 32 examples,
fp32, every output forced to the length (min = max decoding length) as in
bench_decode.py; one warm-up, then one timed pass per length. Not a test and
not imported by the project: ctranslate2 is not one of its dependencies.
"""
import os
import sys
import time

import ctranslate2

LENGTHS = (32, 64, 128, 256)


def main():
    peers = os.environ.get("PEERS_DIR", "/tmp/peers")
    model_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(peers, "run", "ct2_model")
    inputs = sys.argv[2] if len(sys.argv) > 2 else os.path.join(peers, "data", "infer_src.txt")
    for path, made_by in ((model_dir, "export"), (inputs, "data")):
        if not os.path.exists(path):
            sys.exit(f"ct2_length_sweep.py: no {path}: run bash benchmarks/peers/protocol.sh {made_by} first")
    sentences = [line.split() for line in open(inputs, encoding="utf-8")][:64]
    translator = ctranslate2.Translator(model_dir, device="cpu", compute_type="float32",
                                        inter_threads=1, intra_threads=2)
    options = dict(beam_size=4, max_batch_size=32, batch_type="examples", num_hypotheses=1)
    translator.translate_batch(sentences[:32], max_decoding_length=32, min_decoding_length=32, **options)
    previous = None
    for length in LENGTHS:
        start = time.perf_counter()
        results = translator.translate_batch(sentences, max_decoding_length=length, min_decoding_length=length,
                                             **options)
        seconds = time.perf_counter() - start
        if any(len(result.hypotheses[0]) != length for result in results):
            raise SystemExit(f"an output was not forced to {length} tokens: the timings would not compare")
        # Decode steps of a batch: one per output token; two batches of 32 here.
        steps_per_second = len(sentences) / 32 * length / seconds
        doubling = f", x{seconds / previous:.2f} per doubling" if previous else ""
        print(f"ct2 sweep: {length} tokens, {seconds:.1f} s for {len(sentences)} sentences, "
              f"{steps_per_second:.1f} decode steps/s{doubling}", flush=True)
        previous = seconds


if __name__ == "__main__":
    main()
