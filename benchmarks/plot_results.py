"""Plots the figures of one benchmark sitting: training target tokens/s and decoding sentences/s by configuration.

  python benchmarks/plot_results.py benchmarks/logs/2026-11-22.txt benchmarks/throughput.png

The log is the benchmarks' own output lines, concatenated: "train ..." lines
from bench_train.py, "decode: ..." lines from bench_decode.py, and "peer ..."
lines written by hand from the peers' logs of the same sitting, in the form
"peer <tool> train|decode <precision>: <value> target tokens/s|sentences/s".
"""
import re
import sys

TRAIN = re.compile(r"^train (\S+) \(.*\), (\S+): .*?([\d,]+) target tokens/s")
DECODE = re.compile(r"^decode: (\d+) sentences, beam (\d+), batch (\d+), (\d+) output tokens, (\S+): .*?([\d.]+) sentences/s")
PEER = re.compile(r"^peer (.+) (train|decode) (\S+): ([\d.,]+) (target tokens/s|sentences/s)")


def read_figures(path: str):
    """({label: target tokens/s} for training, {label: sentences/s} for decoding), in file order."""
    train, decode = {}, {}
    for line in open(path, encoding="utf-8"):
        if match := TRAIN.match(line):
            train[f"t2t-lite\n{match[1]}\n{match[2]}"] = float(match[3].replace(",", ""))
        elif match := DECODE.match(line):
            sentences, beam, batch, length, precision, speed = match.groups()
            if length == "60":  # the protocol's forced length; the length sweep is reported as a table
                decode[f"t2t-lite\nbeam {beam}\nbatch {batch}\n{precision}"] = float(speed)
        elif match := PEER.match(line):
            tool, kind, precision, value, _ = match.groups()
            (train if kind == "train" else decode)[f"{tool}\n(same sitting)\n{precision}"] = float(value.replace(",", ""))
    return train, decode


def main():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    log_path, png_path = sys.argv[1], sys.argv[2]
    train, decode = read_figures(log_path)
    figure, (left, right) = plt.subplots(1, 2, figsize=(15, 5.5))
    for axis, figures, unit in ((left, train, "target tokens/s (training)"), (right, decode, "sentences/s (decoding)")):
        colours = ["tab:blue" if label.startswith("t2t-lite") else "tab:gray" for label in figures]
        bars = axis.bar(range(len(figures)), list(figures.values()), color=colours)
        axis.bar_label(bars, fmt="%.1f" if unit.startswith("sentences") else "%.0f")
        axis.set_xticks(range(len(figures)), list(figures), fontsize=8)
        axis.set_ylabel(unit)
    figure.suptitle(f"transformer_base on the peers' protocol, 2 cores ({log_path.rsplit('/', 1)[-1]})")
    figure.tight_layout()
    figure.savefig(png_path, dpi=100)
    print(f"wrote {png_path}")


if __name__ == "__main__":
    main()
