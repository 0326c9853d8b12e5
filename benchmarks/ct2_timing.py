"""Times one CTranslate2 model on given sentences, the protocol's way; run by bench_ctranslate2.py.

  python ct2_timing.py MODEL_DIR SOURCES.json RUNS THREADS    # prints one JSON line

Imports nothing but CTranslate2, so it runs in any Python that has it (the peers' ct2 venv, say), and
CTranslate2 runs as a server would run it, without TensorFlow's thread pools in the same process.
"""
import json
import statistics
import sys
import time

import ctranslate2


def main(model_dir: str, sources_path: str, runs: int, threads: int) -> dict:
    with open(sources_path, encoding="utf-8") as f:
        sources = json.load(f)
    translator = ctranslate2.Translator(model_dir, device="cpu", compute_type="default", inter_threads=1,
                                        intra_threads=threads)
    settings = dict(beam_size=4, max_decoding_length=60, min_decoding_length=60, max_batch_size=32,
                    batch_type="examples", num_hypotheses=1)
    translator.translate_batch(sources[:32], **settings)  # warm-up
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        results = translator.translate_batch(sources, **settings)
        seconds.append(time.perf_counter() - start)
    return {"ctranslate2": ctranslate2.__version__, "python": sys.executable, "seconds": seconds,
            "sentences_per_second": len(sources) / statistics.median(seconds),
            "output_lengths": sorted({len(r.hypotheses[0]) for r in results}),
            "peak_rss_gib": peak_rss_gib()}


def peak_rss_gib() -> float:
    """This process's own peak resident memory (VmHWM: getrusage's ru_maxrss keeps the forking parent's)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 2**20


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
