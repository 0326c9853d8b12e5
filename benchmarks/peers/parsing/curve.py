"""Dev bracket F1 against training minutes, t2t-lite and the OpenNMT-tf peer, for benchmarks/parsing_side_by_side.sh.

  python benchmarks/peers/parsing/curve.py --ours=WORK/t2t_lite --peer=WORK/opennmt_tf [--sentences=100]
      [--venv=$PEERS_DIR/onmt] [--decode_flags="..."] [--out=WORK/f1_curve.png]

Every kept checkpoint of both runs is decoded on the first --sentences dev sentences (each toolkit with its
run's decoding settings: the hparams set's beam, alpha and extra length; --decode_flags adds t2t-lite decoder
flags, as DECODE_FLAGS does in parsing_quality.sh) and scored by score.py, t2t-lite's parsing scorer, for both.
A checkpoint's time is its index file's modification time less the launch of its training process
(WORK/train.start), the same clock for both. Prints the table, writes <out>.csv and, if matplotlib is
installed, the PNG.
"""
import argparse
import csv
import os
import shlex
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))  # benchmarks/
from plot_quality_curve import checkpoints, minutes_since_start  # noqa: E402
from score import problems, read, scores  # noqa: E402


def decode_ours(work: str, checkpoint: str, source: str, scratch: str, flags: list[str]) -> list[str]:
    output = os.path.join(scratch, "ours.hyp")
    subprocess.run(["t2t-lite-decoder", f"--output_dir={work}/run", f"--checkpoint_path={checkpoint}",
                    f"--decode_from_file={source}", f"--decode_to_file={output}", "--input_tokenized", *flags],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return read(output)


def decode_peer(work: str, checkpoint: str, pieces_in: str, scratch: str, venv: str, spm_model: str) -> list[str]:
    import sentencepiece as spm

    output = os.path.join(scratch, "peer.hyp")
    subprocess.run([f"{venv}/bin/onmt-main", "--model", f"{work}/model.py", "--config", f"{work}/config.yml",
                    "--intra_op_parallelism_threads", "2", "--inter_op_parallelism_threads", "2",
                    "--checkpoint_path", checkpoint, "infer", "--features_file", pieces_in,
                    "--predictions_file", output], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sp = spm.SentencePieceProcessor(model_file=spm_model)
    return [sp.decode_pieces(line.split()) for line in read(output)]


def curve(args) -> list[dict]:
    words = read(os.path.join(args.ours, "dev.words"))[: args.sentences]
    trees = read(os.path.join(args.ours, "dev.trees"))[: args.sentences]
    spm_model = os.path.join(args.ours, "data", "vocab.model")
    form = problems.get(os.environ.get("PROBLEM", "parsing_ptb_sample_words"))(None).form
    points = []
    with tempfile.TemporaryDirectory() as scratch:
        source = os.path.join(scratch, "dev.words")
        open(source, "w", encoding="utf-8").write("\n".join(words) + "\n")
        pieces = os.path.join(scratch, "dev.sp.words")
        with open(os.path.join(args.peer, "data", "dev.sp.words"), encoding="utf-8") as f:
            open(pieces, "w", encoding="utf-8").write("".join(f.readlines()[: args.sentences]))
        for toolkit, work, run_dir in (("t2t-lite", args.ours, os.path.join(args.ours, "run")),
                                       ("OpenNMT-tf", args.peer, os.path.join(args.peer, "model", "run"))):
            for step, prefix in checkpoints(run_dir):
                if toolkit == "t2t-lite":
                    outputs = decode_ours(work, prefix, source, scratch, shlex.split(args.decode_flags))
                else:
                    outputs = decode_peer(work, prefix, pieces, scratch, args.venv, spm_model)
                s = scores(words, trees, outputs, form)
                points.append(dict(toolkit=toolkit, step=step, minutes=round(minutes_since_start(prefix, work), 2),
                                   f1=round(s["f1"], 2), well_formed=round(s["well_formed"], 1),
                                   exact=round(s["exact"], 1)))
                print(f"{toolkit} step {step}: {points[-1]['minutes']:.1f} min, dev F1 {s['f1']:.2f}, "
                      f"well-formed {s['well_formed']:.1f} %", flush=True)
    return points


def table(points: list[dict], sentences: int) -> str:
    lines = [f"dev F1 against training minutes (first {sentences} dev sentences; minutes since the training "
             f"process started)", "| toolkit | step | minutes | dev F1 | well-formed % | exact % |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {p['toolkit']} | {p['step']} | {p['minutes']:.1f} | {p['f1']:.2f} | {p['well_formed']:.1f} "
              f"| {p['exact']:.1f} |" for p in points]
    return "\n".join(lines)


def plot(points: list[dict], out: str, sentences: int) -> bool:
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    for toolkit, color in (("t2t-lite", "tab:blue"), ("OpenNMT-tf", "tab:orange")):
        line = [p for p in points if p["toolkit"] == toolkit]
        if line:
            axes.plot([p["minutes"] for p in line], [p["f1"] for p in line], "o-", color=color, label=toolkit)
    axes.set_xlabel("wall-clock minutes since the training process started")
    axes.set_ylabel(f"dev bracket F1 (first {sentences} sentences)")
    axes.set_title(f"{os.environ.get('PROBLEM', 'parsing_ptb_sample_words')}: dev F1 against training time")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(out, dpi=120)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--ours", required=True, help="parsing_quality.sh's work directory")
    parser.add_argument("--peer", required=True, help="parsing_side_by_side.sh's OpenNMT-tf work directory")
    parser.add_argument("--sentences", type=int, default=100, help="dev sentences decoded per checkpoint")
    parser.add_argument("--venv", default=os.path.join(os.environ.get("PEERS_DIR", "/tmp/peers"), "onmt"))
    parser.add_argument("--decode_flags", default="", help="extra t2t-lite-decoder flags")
    parser.add_argument("--out", default="f1_curve.png")
    args = parser.parse_args()
    points = curve(args)
    with open(os.path.splitext(args.out)[0] + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["toolkit", "step", "minutes", "f1", "well_formed", "exact"])
        writer.writeheader()
        writer.writerows(points)
    print(table(points, args.sentences))
    drawn = plot(points, args.out, args.sentences)
    print(f"wrote {os.path.splitext(args.out)[0]}.csv" + (f" and {args.out}" if drawn else " (no matplotlib: no PNG)"))


if __name__ == "__main__":
    main()
