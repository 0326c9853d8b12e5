"""Decode speed of a CTranslate2 export through Translator.from_export, in a process without TensorFlow beside one
that has TensorFlow imported and its thread pools started (a server that also loads TensorFlow).

  python benchmarks/ct2_deployment.py --export_dir=exports/translate/1 --sentences=newstest2013.en
  python benchmarks/ct2_deployment.py --export_dir=... --sentences=... --count=500 --runs=3 --threads=2

Each side runs in a fresh interpreter of its own (this script with --side): one warm-up batch, then the median
of --runs passes over the sentences. Prints one JSON line and one summary line per side; the two sides must
give the same lines (checked).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SIDES = ("without", "with")


def side(args) -> dict:
    """Times the export in this process, TensorFlow imported first for the "with" side."""
    if args.side == "with":
        import tensorflow as tf

        (tf.constant(1.0) + 1.0).numpy()  # the first op starts TensorFlow's intra- and inter-op thread pools
    from ct2_timing import peak_rss_gib
    from t2t_lite import Translator

    with open(args.sentences, encoding="utf-8") as f:
        sentences = f.read().splitlines()[:args.count]
    translator = Translator.from_export(args.export_dir, threads=args.threads)
    translator.translate(sentences[:32])  # warm-up
    seconds = []
    for _ in range(args.runs):
        start = time.perf_counter()
        lines = translator.translate(sentences)
        seconds.append(time.perf_counter() - start)
    return {"side": args.side, "tensorflow_loaded": "tensorflow" in sys.modules, "seconds": seconds,
            "sentences_per_second": len(sentences) / statistics.median(seconds), "peak_rss_gib": peak_rss_gib(),
            "lines": lines}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--export_dir", required=True, help="a CTranslate2 export t2t-lite-exporter wrote")
    parser.add_argument("--sentences", required=True, help="source text, one sentence per line")
    parser.add_argument("--count", type=int, default=500, help="the first this many sentences")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="CTranslate2's intra_threads")
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(side(args)))
        return
    results = {}
    for name in SIDES:
        flags = [f"--export_dir={args.export_dir}", f"--sentences={args.sentences}", f"--count={args.count}",
                 f"--runs={args.runs}", f"--threads={args.threads}", f"--side={name}"]
        done = subprocess.run([sys.executable, __file__, *flags], check=True, capture_output=True, text=True)
        results[name] = json.loads(done.stdout.splitlines()[-1])
        assert results[name]["tensorflow_loaded"] == (name == "with"), results[name]["tensorflow_loaded"]
        print(json.dumps({k: v for k, v in results[name].items() if k != "lines"}))
        print(f"decode: CTranslate2 export via Translator.from_export, {name} TensorFlow in the process: "
              f"{results[name]['sentences_per_second']:.2f} sentences/s (median of {args.runs}, {args.threads} "
              f"threads), peak RSS {results[name]['peak_rss_gib']:.2f} GiB", flush=True)
    assert results["with"]["lines"] == results["without"]["lines"], "the two sides decoded differently"


if __name__ == "__main__":
    main()
