"""The first request to a loaded SavedModel, with and without running its TF Serving warmup records first.

  python benchmarks/serving_warmup.py EXPORT_VERSION_DIR [--rounds=3] [--batch_size=8]

Each measurement is a fresh interpreter (as a model server starting): it loads the export, runs the records of
assets.extra/tf_serving_warmup_requests as TF Serving does at load (or not), then times one serving_default
request of --batch_size sentences of other lengths than the warmup's, and a second one.
"""
import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, sys, time
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SentencePiece ops, as TF Serving links them)
from t2t_lite.export.warmup import read_warmup_requests

path, warm, batch = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
start = time.perf_counter()
model = tf.saved_model.load(path)
loaded = time.perf_counter() - start
start = time.perf_counter()
if warm:
    for record in read_warmup_requests(path):
        request = record.predict_log.request
        model.signatures[request.model_spec.signature_name](inputs=tf.constant(tf.make_ndarray(request.inputs["inputs"])))
warmed = time.perf_counter() - start
sentences = tf.constant([" ".join(["A man in a blue shirt is standing"] * (1 + i % 3)) for i in range(batch)])
times = []
for _ in range(2):
    start = time.perf_counter()
    model.signatures["serving_default"](inputs=sentences)["outputs"].numpy()
    times.append(time.perf_counter() - start)
print(json.dumps({"load": loaded, "warmup": warmed, "first": times[0], "second": times[1]}))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=8)
    args = parser.parse_args()
    for round_ in range(args.rounds):
        for warm in ("0", "1"):  # in turns
            done = subprocess.run([sys.executable, "-c", CHILD, args.export, warm, str(args.batch_size)],
                                  capture_output=True, text=True, env={"TF_CPP_MIN_LOG_LEVEL": "3",
                                                                       **__import__("os").environ})
            if done.returncode != 0:
                sys.exit(done.stderr[-2000:])
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"round {round_ + 1} {'with' if warm == '1' else 'without'} warmup: load {figures['load']:.2f} s, "
                  f"warmup records {figures['warmup']:.2f} s, first request {figures['first']:.3f} s, "
                  f"second {figures['second']:.3f} s", flush=True)


if __name__ == "__main__":
    main()
