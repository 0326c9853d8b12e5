"""Where the time goes: TensorFlow's profiler around decoding or training, summed by op type.

  python benchmarks/profile_ops.py decode            # 2 batches of the decode protocol (beam 4, batch 32, 60 tokens)
  python benchmarks/profile_ops.py train             # 3 transformer_base steps on the training protocol
  python benchmarks/profile_ops.py decode_run --output_dir=RUN --source=test.en --sentences=200
                                                     # a trained run on real sentences, as the decoder batches them
  python benchmarks/profile_ops.py decode --top=30 --mixed_precision=mixed_bfloat16
  python benchmarks/profile_ops.py decode_run ... --by=name   # by op name: which layer's which op

Prints the work's wall time, then one line per op type: the time its kernels
ran (summed over threads, a kernel's inner threads not counted twice), its
share of all kernel time, the calls, and the mean per call; and how much of
the executors' time ran no kernel (scheduling between ops). For decoding, also
the products' share (every MatMul kind: the weights' and attention's) and the
bound it sets: the sentences per second if nothing but the products took
time. The trace is TensorFlow's own XPlane, read with the protobuf TensorFlow
ships; nothing to install. The profiled work is the benchmarks' own.
"""
import argparse
import collections
import glob
import os
import tempfile
import time

import numpy as np

from common import decode_inputs

EXECUTOR_EVENT = "ExecutorState::Process"
PIPELINE = "Iterator::"  # tf.data's traced iterators


def profile(work, logdir: str) -> float:
    """Runs work() under the profiler, every kernel traced; returns its wall seconds."""
    import tensorflow as tf

    # Level 3 traces every kernel; the default (2) only the ones TensorFlow deems expensive.
    options = tf.profiler.experimental.ProfilerOptions(host_tracer_level=3, python_tracer_level=0)
    tf.profiler.experimental.start(logdir, options=options)
    start = time.perf_counter()
    work()
    seconds = time.perf_counter() - start
    tf.profiler.experimental.stop()
    return seconds


def kernel_events(logdir: str, by_name: bool = False):
    """Yields (thread name, op type, start ps, duration ps) of every kernel and executor event in logdir's trace.

    by_name: the op's name and type ("while/body/.../MatMul:MatMul") instead of its type alone.
    """
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    for path in glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True):
        space = xplane_pb2.XSpace()
        with open(path, "rb") as f:
            space.ParseFromString(f.read())
        for plane in space.planes:
            if not plane.name.startswith("/host"):
                continue
            for line in plane.lines:
                for event in line.events:
                    meta = plane.event_metadata[event.metadata_id]
                    # A kernel is traced as "op name:op type", its display name the type.
                    kind = meta.display_name or (EXECUTOR_EVENT if meta.name == EXECUTOR_EVENT else None)
                    if by_name and kind and kind != EXECUTOR_EVENT:
                        kind = meta.name
                    if kind:
                        yield line.name, kind, line.timestamp_ns * 1000 + event.offset_ps, event.duration_ps


def op_type_table(logdir: str, by_name: bool = False) -> tuple[list[tuple[str, float, int]], float]:
    """([(op type, kernel ms, calls)] largest first, executor ms) from logdir's trace (by op name if by_name).

    A kernel's time is its self time: a kernel running inside another on the same thread (a function
    call op) is counted once, in the inner one. tf.data's iterators are traced like kernels, as
    "Iterator::..." types, on the input pipeline's own threads.
    """
    totals, counts = collections.Counter(), collections.Counter()
    executor_ms = 0.0
    by_thread = collections.defaultdict(list)
    for thread, kind, start, duration in kernel_events(logdir, by_name):
        if kind == EXECUTOR_EVENT:
            executor_ms += duration / 1e9
        else:
            by_thread[thread].append((start, duration, kind))
    for events in by_thread.values():
        events.sort(key=lambda e: (e[0], -e[1]))
        open_events = []  # [end, kind, child ps] of the enclosing kernels
        for start, duration, kind in events + [(float("inf"), 0, None)]:
            while open_events and open_events[-1][0] <= start:
                end, outer, children = open_events.pop()
                totals[outer[1]] += (end - outer[0] - children) / 1e9  # ps -> ms
                if open_events:
                    open_events[-1][2] += end - outer[0]
            if kind is not None:
                open_events.append([start + duration, (start, kind), 0])
                counts[kind] += 1
    return [(kind, ms, counts[kind]) for kind, ms in totals.most_common()], executor_ms


def is_product(kind: str) -> bool:
    """Whether a row's op (a type, or "name:type") multiplies matrices: MatMul, BatchMatMulV2, their oneDNN forms."""
    return "MatMul" in kind.rsplit(":", 1)[-1]


def products_bound(rows, sentences: int) -> str:
    """A line: the products' kernel time, its share, and the sentences/s if only they took time."""
    total = sum(ms for _, ms, _ in rows)
    products = sum(ms for kind, ms, _ in rows if is_product(kind))
    return (f"products {products:,.0f} ms of {total:,.0f} ms in kernels ({products / total:.0%}): "
            f"with nothing else, at most {sentences / (products / 1000):.2f} sentences/s")


def decode_work(args):
    import bench_decode

    decode_args = argparse.Namespace(beam_size=args.beam_size, mixed_precision=args.mixed_precision)
    decoder = bench_decode.build_decoder(decode_args, forced_length=60)
    sentences = decode_inputs()[:64]
    batches = [sentences[i:i + 32] for i in range(0, 64, 32)]
    padded = [np.array([s + [0] * (max(map(len, b)) - len(s)) for s in b], np.int32) for b in batches]
    decoder.decode(padded[0])[0].numpy()  # trace outside the profile
    return (lambda: [decoder.decode(batch)[0].numpy() for batch in padded]), len(sentences)


def decode_run_work(args):
    """A trained run's Translator over the first --sentences lines of --source, as t2t-lite-decoder batches them."""
    from t2t_lite.inference.translator import Translator

    with open(args.source, encoding="utf-8") as f:
        sentences = [line.rstrip("\n") for line in f][: args.sentences]
    translator = Translator.from_run(args.output_dir, mixed_precision=args.mixed_precision,
                                     beam_size=args.beam_size, batch_size=args.batch_size)
    translator.translate(sentences[:8])  # trace outside the profile
    return (lambda: translator.translate(sentences)), len(sentences)


def train_work(args):
    import bench_train

    return bench_train.profiled_steps(args.mixed_precision, steps=3), None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["decode", "decode_run", "train"])
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--by", choices=["type", "name"], default="type",
                        help="sum kernels by op type, or by op name (which layer's MatMul)")
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--mixed_precision", default="none", choices=["none", "auto", "mixed_bfloat16", "bfloat16"])
    parser.add_argument("--output_dir", help="decode_run: the trained run")
    parser.add_argument("--source", help="decode_run: a file of source sentences, one per line")
    parser.add_argument("--sentences", type=int, default=200, help="decode_run: how many of them")
    parser.add_argument("--batch_size", type=int, default=None, help="decode_run: sentences a batch (the run's)")
    args = parser.parse_args()
    if args.what == "decode_run" and not (args.output_dir and args.source):
        parser.error("decode_run needs --output_dir and --source")
    # The work, and how many sentences it decodes (None: training).
    work, sentences = {"decode": decode_work, "decode_run": decode_run_work, "train": train_work}[args.what](args)
    with tempfile.TemporaryDirectory() as logdir:
        seconds = profile(work, logdir)
        rows, executor_ms = op_type_table(logdir, by_name=args.by == "name")
    pipeline = sum(ms for name, ms, _ in rows if name.startswith(PIPELINE))
    rows = [row for row in rows if not row[0].startswith(PIPELINE)]
    total = sum(ms for _, ms, _ in rows)
    print(f"{args.what} ({args.mixed_precision}): {seconds * 1000:,.0f} ms wall under the profiler; "
          f"{total:,.0f} ms in kernels (both cores), {max(executor_ms - total, 0.0):,.0f} ms of executor time "
          f"between them" + (f"; tf.data iterators {pipeline:,.0f} ms on their own threads" if pipeline else ""))
    width = 32 if args.by == "type" else 100
    print(f"  {'op ' + args.by:{width}s} {'ms':>9s}  {'share':>6s}  {'calls':>8s}  {'us/call':>8s}")
    for name, ms, count in rows[: args.top]:
        print(f"  {name[-width:]:{width}s} {ms:9,.0f}  {ms / total:6.1%}  {count:8,d}  {ms * 1000 / count:8.1f}")
    if sentences:
        print(products_bound(rows, sentences))


if __name__ == "__main__":
    main()
