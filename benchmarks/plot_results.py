"""Plots the figures of one benchmark sitting: training target tokens/s and decoding sentences/s by configuration.

  python benchmarks/plot_results.py benchmarks/logs/2026-11-22.txt benchmarks/throughput.png [--sitting=1]

The log is the benchmarks' own output lines, concatenated: "train ..." lines
from bench_train.py, "decode: ..." lines from bench_decode.py, and "peer ..."
lines written by hand from the peers' logs of the same sitting, in the form
"peer <tool> train|decode <precision>: <value> target tokens/s|sentences/s".
A line "# ... sitting ... started ..." begins a sitting; only the chosen one is plotted.
When a sitting has a later run of the same configuration, the later figure is the one shown.
"""
import argparse
import re

TRAIN = re.compile(r"^train (\S+) \(.*?\), ([^:]+): .*?([\d,]+) target tokens/s")
DECODE = re.compile(r"^decode: (\d+) sentences, beam (\d+), batch (\d+), (?:(\d+) in flight, )?(\d+) output tokens, "
                    r"(\S+): .*?([\d.]+) sentences/s")
PEER = re.compile(r"^peer (.+) (train|decode) (\S+): ([\d.,]+) (target tokens/s|sentences/s)")


SITTING = re.compile(r"^# .*sitting.* started")


def sitting_lines(path: str, sitting: int) -> list[str]:
    """The lines of the sitting-th sitting (1-based) of the log."""
    sittings = []
    for line in open(path, encoding="utf-8"):
        if SITTING.match(line):
            sittings.append([])
        if sittings:
            sittings[-1].append(line)
    return sittings[sitting - 1]


def read_figures(lines: list[str]):
    """({label: target tokens/s} for training, {label: sentences/s} for decoding), in log order."""
    train, decode = {}, {}
    for line in lines:
        if match := TRAIN.match(line):
            configuration = match[2].replace(", ", "\n")  # "mixed_bfloat16, float32 output projection"
            train[f"t2t-lite\n{match[1]}\n{configuration}"] = float(match[3].replace(",", ""))
        elif match := DECODE.match(line):
            sentences, beam, batch, in_flight, length, precision, speed = match.groups()
            if length == "60":  # the protocol's forced length; the length sweep is reported as a table
                parallel = f" x{in_flight}" if in_flight and in_flight != "1" else ""  # logs before it say nothing
                decode[f"t2t-lite\nbeam {beam}\nbatch {batch}{parallel}\n{precision}"] = float(speed)
        elif match := PEER.match(line):
            tool, kind, precision, value, _ = match.groups()
            label = tool.replace(", ", "\n")  # "OpenNMT-tf 2.32, oneDNN on": a setting on its own line
            (train if kind == "train" else decode)[f"{label}\n(same sitting)\n{precision}"] = float(value.replace(",", ""))
    return train, decode


def main():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log")
    parser.add_argument("png")
    parser.add_argument("--sitting", type=int, default=1)
    args = parser.parse_args()
    train, decode = read_figures(sitting_lines(args.log, args.sitting))
    # A sitting may have measured only training or only decoding: one panel per kind measured.
    panels = [(figures, unit) for figures, unit in ((train, "target tokens/s (training)"),
                                                    (decode, "sentences/s (decoding)")) if figures]
    if not panels:
        raise SystemExit(f"{args.log}: sitting {args.sitting} has no train, decode or peer lines to plot")
    figure, axes = plt.subplots(1, len(panels), figsize=(7.5 * len(panels), 5.5), squeeze=False)
    for axis, (figures, unit) in zip(axes[0], panels):
        colours = ["tab:blue" if label.startswith("t2t-lite") else "tab:gray" for label in figures]
        bars = axis.bar(range(len(figures)), list(figures.values()), color=colours)
        axis.bar_label(bars, fmt="%.1f" if unit.startswith("sentences") else "%.0f")
        axis.set_xticks(range(len(figures)), list(figures), fontsize=8)
        axis.set_ylabel(unit)
    figure.suptitle(f"transformer_base on the peers' protocol, 2 cores ({args.log.rsplit('/', 1)[-1]}, "
                    f"sitting {args.sitting})")
    figure.tight_layout()
    figure.savefig(args.png, dpi=100)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
