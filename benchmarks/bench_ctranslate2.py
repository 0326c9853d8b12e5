"""Decoding speed of t2t-lite's CTranslate2 export on the peers' protocol, beside bench_decode.py's TensorFlow figure.

  python benchmarks/bench_ctranslate2.py                      # float32 and int8
  python benchmarks/bench_ctranslate2.py --quantization=int8 --runs=1

The protocol of ../shared/peers/ct2_translate.py, which timed OpenNMT-tf's model in CTranslate2: a
transformer_base (random weights, shared vocabulary 32,768) exported as t2t-lite-exporter
--export_format=ctranslate2 does; 500 sentences of 20-30 tokens, beam 4, batches of 32 examples, every
output forced to 60 tokens (min = max decoding length), inter_threads 1, intra_threads = the cores; one
warm-up batch, then the median of --runs passes over all 500.
"""
import argparse
import json
import os
import statistics
import tempfile
import time

from common import PROTOCOL_VOCAB, decode_inputs, peak_rss_gib


def export(directory: str, quantization: str) -> str:
    """A random-weight transformer_base in CTranslate2's format, pieces "t<id>" for ids."""
    import ctranslate2

    import t2t_lite.hparams  # noqa: F401
    from t2t_lite import config
    from t2t_lite.export.ctranslate2_export import transformer_spec
    from t2t_lite.models import build_model
    from t2t_lite.registry import hparams_sets

    hp = config.apply_overrides(hparams_sets.get("transformer_base")(), f"vocab_size={PROTOCOL_VOCAB}")
    pieces = [f"t{i}" for i in range(PROTOCOL_VOCAB)]
    spec = transformer_spec(build_model(hp), hp, pieces)

    class Converter(ctranslate2.converters.Converter):
        def _load(self):
            return spec

    return Converter().convert(os.path.join(directory, quantization), quantization=None if quantization == "none"
                               else quantization)


def time_decoding(model_dir: str, compute_type: str, runs: int, threads: int) -> dict:
    import ctranslate2

    sources = [[f"t{i}" for i in ids] for ids in decode_inputs()]
    translator = ctranslate2.Translator(model_dir, device="cpu", compute_type=compute_type, inter_threads=1,
                                        intra_threads=threads)
    settings = dict(beam_size=4, max_decoding_length=60, min_decoding_length=60, max_batch_size=32,
                    batch_type="examples", num_hypotheses=1)
    translator.translate_batch(sources[:32], **settings)  # warm-up
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        results = translator.translate_batch(sources, **settings)
        seconds.append(time.perf_counter() - start)
    lengths = {len(r.hypotheses[0]) for r in results}
    median = statistics.median(seconds)
    return {"compute_type": compute_type, "ctranslate2": ctranslate2.__version__, "seconds": seconds,
            "sentences_per_second": len(sources) / median, "output_lengths": sorted(lengths),
            "peak_rss_gib": peak_rss_gib()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quantization", nargs="+", default=["none", "int8"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_ct2_") as directory:
        for quantization in args.quantization:
            model_dir = export(directory, quantization)
            result = time_decoding(model_dir, "default", args.runs, args.threads)
            result["quantization"] = quantization
            print(json.dumps(result))
            print(f"t2t-lite export in CTranslate2, {quantization}: {result['sentences_per_second']:.2f} sentences/s "
                  f"(median of {args.runs}), peak RSS {result['peak_rss_gib']:.2f} GiB", flush=True)


if __name__ == "__main__":
    main()
