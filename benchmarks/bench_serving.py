"""Latency and throughput of an exported model, called in process as TF Serving calls it (no RPC).

  python benchmarks/bench_serving.py --saved_model=/models/translate/1
  python benchmarks/bench_serving.py --quick

Reports request latency p50 / p99 and sentences/s for one request at a time,
for --threads concurrent clients, and for batched requests. Without
--saved_model it exports a throwaway model of --hparams_set with random
weights (transformer_tiny under --quick): a random model never emits EOS
early, so every output runs to input length + extra_length, the worst case.
Sentences come from --sentences (default Multi30k's test_2016_flickr.en, read gzipped or not from
$MULTI30K_DIR, default /tmp/t2t_lite_multi30k/tmp where benchmarks/multi30k_quality.sh keeps the release
files; downloaded there by translate_multi30k's own code when missing).
"""
import argparse
import concurrent.futures
import gzip
import os
import sys
import tempfile
import time

import numpy as np

_MULTI30K_DIR = os.environ.get("MULTI30K_DIR", "/tmp/t2t_lite_multi30k/tmp")


def multi30k_test_sources() -> str:
    """The path of Multi30k's test_2016_flickr.en in $MULTI30K_DIR (maybe .gz), downloaded there when missing."""
    from t2t_lite.errors import UserError
    from t2t_lite.problems.multi30k import download, local_file

    os.makedirs(_MULTI30K_DIR, exist_ok=True)
    try:
        return local_file(_MULTI30K_DIR, "test_2016_flickr.en") or download("test_2016_flickr.en", _MULTI30K_DIR)
    except UserError as error:
        sys.exit(f"bench_serving.py: {error}; or pass --sentences=FILE")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--saved_model", help="An export's version directory; default a throwaway random model.")
    parser.add_argument("--sentences", help="Source sentences, one per line (plain or .gz); default Multi30k's "
                        "test_2016_flickr.en from $MULTI30K_DIR.")
    parser.add_argument("--hparams_set", default="transformer_base", help="For the throwaway model.")
    parser.add_argument("--requests", type=int, default=200, help="Requests per measurement.")
    parser.add_argument("--threads", type=int, default=8, help="Concurrent clients.")
    parser.add_argument("--batch_size", type=int, default=32, help="Sentences per batched request.")
    parser.add_argument("--quick", action="store_true", help="transformer_tiny, 40 requests: a smoke run.")
    args = parser.parse_args()
    if args.quick:
        args.hparams_set, args.requests = "transformer_tiny", 40
    return args


def throwaway_export(hparams_set: str, sentences: list[str], directory: str) -> str:
    """Exports a random-weight model of hparams_set with a SentencePiece vocabulary trained on sentences."""
    import t2t_lite.hparams  # noqa: F401  (registers the sets)
    from t2t_lite import config, registry
    from t2t_lite.data.vocabulary import Vocabulary, train_sentencepiece
    from t2t_lite.export import layout
    from t2t_lite.export.exporter import save_module
    from t2t_lite.decoding.request import run_decode
    from t2t_lite.export.serving import ServingModule
    from t2t_lite.models import build_model
    from t2t_lite.run import OpenedRun
    from t2t_lite.run_dir import RunSpec

    vocabulary = Vocabulary(train_sentencepiece(sentences, vocab_size=1000))
    hparams = config.apply_overrides(registry.hparams_sets.get(hparams_set)(), f"vocab_size={vocabulary.vocab_size}")
    decode = run_decode(hparams.decode)
    module = ServingModule(build_model(hparams), None, vocabulary, decode, max_input_length=256)
    run = OpenedRun((), RunSpec("benchmark", hparams_set, "", hparams), "benchmark", None, decode, ())
    model_dir = layout.make_model_dir(directory, "benchmark")
    return layout.publish(model_dir, lambda path: save_module(module, path, run, vocabulary, {}))


def measure(call, requests: list[list[str]], threads: int) -> tuple[np.ndarray, float]:
    """Sends every request from `threads` clients; returns (latencies in s, wall time in s)."""
    def timed(lines):
        start = time.perf_counter()
        call(lines)
        return time.perf_counter() - start

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        latencies = np.array(list(pool.map(timed, requests)))
    return latencies, time.perf_counter() - start


def report(name: str, latencies: np.ndarray, wall: float, sentences: int) -> None:
    p50, p99 = np.percentile(latencies, [50, 99]) * 1000
    print(f"{name:<26} {len(latencies):4d} requests  latency p50 {p50:8.1f} ms  p99 {p99:8.1f} ms  "
          f"{sentences / wall:8.1f} sentences/s")


def main() -> None:
    args = parse_args()
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    source = args.sentences or multi30k_test_sources()
    with (gzip.open(source, "rt", encoding="utf-8") if source.endswith(".gz") else open(source, encoding="utf-8")) as f:
        sentences = [line.rstrip("\n") for line in f if line.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        path = args.saved_model or throwaway_export(args.hparams_set, sentences, tmp)
        signature = tf.saved_model.load(path).signatures["serving_default"]

        def call(lines):
            return signature(inputs=tf.constant(lines))

        call(sentences[:1])  # first call: graph optimisation, not serving
        print(f"export {path if args.saved_model else args.hparams_set + ' (random weights)'}, "
              f"{os.cpu_count()} CPUs, {len(sentences)} sentences")
        singles = [[sentences[i % len(sentences)]] for i in range(args.requests)]
        report("one request at a time", *measure(call, singles, 1), len(singles))
        report(f"{args.threads} concurrent clients", *measure(call, singles, args.threads), len(singles))
        batches = [[sentences[(i * args.batch_size + j) % len(sentences)] for j in range(args.batch_size)]
                   for i in range(max(4, args.requests // args.batch_size))]
        report(f"batches of {args.batch_size}", *measure(call, batches, 1), len(batches) * args.batch_size)


if __name__ == "__main__":
    sys.exit(main())
