"""Where the time goes: TensorFlow's profiler around decoding or training steps, summed by op type.

  python benchmarks/profile_ops.py decode            # 2 batches of the decode protocol (beam 4, batch 32, 60 tokens)
  python benchmarks/profile_ops.py train             # 3 transformer_base steps on the training protocol
  python benchmarks/profile_ops.py decode --top=30 --mixed_precision=mixed_bfloat16

Prints one line per op type: self time (host, all threads), its share, the
number of executions. Needs `pip install tensorboard-plugin-profile` (xprof)
to read the trace; the profiled work is the benchmarks' own.
"""
import argparse
import collections
import csv
import glob
import io
import json
import os
import tempfile

import numpy as np

from common import decode_inputs


def profile(work, logdir: str) -> None:
    import tensorflow as tf

    tf.profiler.experimental.start(logdir)
    work()
    tf.profiler.experimental.stop()


def op_type_table(logdir: str) -> list[tuple[str, float, int]]:
    """[(op type, self time in ms, occurrences)], largest first, from the profile in logdir."""
    from xprof.convert import raw_to_tool_data

    paths = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
    data, _ = raw_to_tool_data.xspace_to_tool_data(paths, "framework_op_stats", {})
    tables = json.loads(data)
    table = tables[0] if isinstance(tables, list) else tables
    columns = [c["id"] if isinstance(c, dict) else c for c in table["cols"]]
    totals, counts = collections.Counter(), collections.Counter()
    for row in table["rows"]:
        values = dict(zip(columns, [cell.get("v") if isinstance(cell, dict) else cell for cell in row["c"]]))
        if values.get("host_or_device") not in (None, "Host"):
            continue
        totals[values["type"]] += float(values["total_self_time"]) / 1000.0  # us -> ms
        counts[values["type"]] += int(values["occurrences"])
    return [(name, ms, counts[name]) for name, ms in totals.most_common()]


def decode_work(args):
    import bench_decode

    decode_args = argparse.Namespace(beam_size=args.beam_size, mixed_precision=args.mixed_precision)
    decoder = bench_decode.build_decoder(decode_args, forced_length=60)
    sentences = decode_inputs()[:64]
    batches = [sentences[i:i + 32] for i in range(0, 64, 32)]
    padded = [np.array([s + [0] * (max(map(len, b)) - len(s)) for s in b], np.int32) for b in batches]
    decoder.decode(padded[0])[0].numpy()  # trace outside the profile
    return lambda: [decoder.decode(batch)[0].numpy() for batch in padded]


def train_work(args):
    import bench_train

    return bench_train.profiled_steps(args.mixed_precision, steps=3)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["decode", "train"])
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--mixed_precision", default="none", choices=["none", "mixed_bfloat16", "bfloat16"])
    args = parser.parse_args()
    work = decode_work(args) if args.what == "decode" else train_work(args)
    with tempfile.TemporaryDirectory() as logdir:
        profile(work, logdir)
        rows = op_type_table(logdir)
    total = sum(ms for _, ms, _ in rows)
    print(f"{args.what}: {total:,.0f} ms of op self time (both cores), by op type")
    for name, ms, count in rows[: args.top]:
        print(f"  {name:32s} {ms:9,.0f} ms  {ms / total:6.1%}  x{count}")


if __name__ == "__main__":
    main()
