"""Decoding speed of t2t-lite's CTranslate2 export on the peers' protocol, beside bench_decode.py's TensorFlow figure.

  python benchmarks/bench_ctranslate2.py                      # float32 and int8
  python benchmarks/bench_ctranslate2.py --quantization=int8 --runs=1
  python benchmarks/bench_ctranslate2.py --peer_model_dir /tmp/peers/run/ct2_int8_model \\
      --python /tmp/peers/ct2/bin/python   # and OpenNMT-tf's (benchmarks/peers/protocol.sh export), timed by the peers' CTranslate2

The protocol of benchmarks/peers/ct2_translate.py, which times OpenNMT-tf's model in CTranslate2: a
transformer_base (random weights, shared vocabulary 32,768) exported as t2t-lite-exporter
--export_format=ctranslate2 does; 500 sentences of 20-30 tokens, beam 4, batches of 32 examples, every
output forced to 60 tokens (min = max decoding length), inter_threads 1, intra_threads = the cores; one
warm-up batch, then the median of --runs passes over all 500.

--peer_model_dir also times a CTranslate2 model that OpenNMT-tf exported from the peers' protocol model
(onmt-main export --format ctranslate2_int8, vocabulary <blank> <s> </s> w0 w1 ...) on the same sentences,
with the compute type its weights were saved in. Every model is timed by ct2_timing.py in a process of its
own that never loads TensorFlow (--python chooses whose CTranslate2).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from common import PROTOCOL_VOCAB, decode_inputs


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


def time_decoding(model_dir: str, sources: list[list[str]], args) -> dict:
    """ct2_timing.py in a new process of args.python: without TensorFlow (which export() loads), in the
    CTranslate2 asked for."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(sources, f)
        f.flush()
        timing = subprocess.run([args.python, os.path.join(os.path.dirname(__file__), "ct2_timing.py"), model_dir,
                                 f.name, str(args.runs), str(args.threads)], check=True, capture_output=True, text=True)
    return json.loads(timing.stdout.splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quantization", nargs="+", default=["none", "int8"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="64 sentences, one pass")
    parser.add_argument("--python", default=sys.executable,
                        help="the Python whose CTranslate2 times the models (e.g. the peers' ct2 venv's)")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--peer_model_dir", nargs="*", default=[],
                        help="also time these CTranslate2 models of OpenNMT-tf's")
    args = parser.parse_args()
    if args.quick:
        args.runs = 1
    inputs = [ids[:-1] for ids in decode_inputs()[:64 if args.quick else None]]  # CTranslate2 appends the EOS
    for peer_model_dir in args.peer_model_dir:
        report(f"OpenNMT-tf's export in CTranslate2 ({peer_model_dir})",
               time_decoding(peer_model_dir, [[f"w{i - 3}" for i in ids] for ids in inputs], args))
    with tempfile.TemporaryDirectory(prefix="bench_ct2_") as directory:
        for quantization in args.quantization:
            model_dir = export(directory, quantization)
            report(f"t2t-lite's export in CTranslate2, {quantization}",
                   time_decoding(model_dir, [[f"t{i}" for i in ids] for ids in inputs], args))


def report(what: str, result: dict) -> None:
    print(json.dumps(result))
    print(f"decode: {what}: {result['sentences_per_second']:.2f} sentences/s (median of {len(result['seconds'])}), "
          f"peak RSS {result['peak_rss_gib']:.2f} GiB", flush=True)

if __name__ == "__main__":
    main()
