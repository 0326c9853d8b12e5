"""Time-to-BLEU curve: val sacreBLEU of every kept checkpoint of both side-by-side runs against wall-clock minutes.

  python benchmarks/plot_quality_curve.py --ours=WORK/t2t_lite [--ours=LABEL=WORK2 ...] --peer=WORK/opennmt_tf \\
      --raw=RAW_DIR [--sentences=300] [--out=curve.png] [--venv=$PEERS_DIR/onmt]

--ours may be given several times (runs of t2t-lite with other seeds or settings); LABEL= names a
run in the legend (default: t2t-lite, then its directory's name).

Each checkpoint's time is its index file's modification time less the launch of its training
process (WORK/train.start), start-up included, the same clock for both toolkits. Each is decoded on
the first --sentences val sentences (beam 4, alpha 0.6 for both) and scored with sacreBLEU 13a,
cased; the averaged checkpoint is drawn as a marker at the end of its run. Points also go to
<out>.csv. Decoding every checkpoint takes a while: about a minute per checkpoint and toolkit for 300
sentences on 2 cores.
"""
import argparse
import csv
import glob
import os
import re
import subprocess
import tempfile

import sacrebleu

# The peer's protocol files (benchmarks/peers/multi30k); its data, paths.yml and checkpoints are in --peer.
PEER_SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers", "multi30k")


def checkpoints(run_dir: str) -> list[tuple[int, str]]:
    """(step, prefix) of every ckpt-<step> in run_dir, by step."""
    found = []
    for index in glob.glob(os.path.join(run_dir, "ckpt-*.index")):
        match = re.search(r"ckpt-(\d+)\.index$", index)
        if match:
            found.append((int(match.group(1)), index[: -len(".index")]))
    return sorted(found)


def minutes_since_start(prefix: str, work: str) -> float:
    start = float(open(os.path.join(work, "train.start")).read())
    return (os.path.getmtime(prefix + ".index") - start) / 60


def score(hypotheses: list[str], references: list[str]) -> float:
    return sacrebleu.corpus_bleu(hypotheses, [references]).score


def decode_ours(work: str, checkpoint: str, source: str, scratch: str) -> list[str]:
    output = os.path.join(scratch, "ours.hyp")
    subprocess.run(["t2t-lite-decoder", f"--output_dir={work}/run", f"--data_dir={work}/data",
                    f"--checkpoint_path={checkpoint}", "--beam_size=4", "--alpha=0.6",
                    f"--decode_from_file={source}", f"--decode_to_file={output}"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return open(output, encoding="utf-8").read().splitlines()


def decode_peer(checkpoint: str, source_pieces: str, scratch: str, venv: str, peer_work: str) -> list[str]:
    import sentencepiece as spm

    output = os.path.join(scratch, "peer.hyp")
    subprocess.run([f"{venv}/bin/onmt-main", "--model", f"{PEER_SCRIPTS}/model_transformer_small.py",
                    "--config", f"{PEER_SCRIPTS}/config.yml", f"{peer_work}/paths.yml", "--intra_op_parallelism_threads", "2",
                    "--inter_op_parallelism_threads", "2", "--checkpoint_path", checkpoint, "infer",
                    "--features_file", source_pieces, "--predictions_file", output],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pieces = spm.SentencePieceProcessor(model_file=f"{peer_work}/data/spm.model")
    return [pieces.decode_pieces(line.split()) for line in open(output, encoding="utf-8").read().splitlines()]


def ours_runs(values: list[str]) -> list[tuple[str, str]]:
    """(legend label, work directory) of each --ours value: DIR or LABEL=DIR."""
    runs = []
    for value in values:
        label, _, work = value.rpartition("=")
        runs.append((label or ("t2t-lite" if len(values) == 1 else f"t2t-lite ({os.path.basename(work)})"), work))
    return runs


def curve(args) -> list[dict]:
    references = open(os.path.join(args.raw, "val.de"), encoding="utf-8").read().splitlines()[: args.sentences]
    points = []
    with tempfile.TemporaryDirectory() as scratch:
        source = os.path.join(scratch, "val.en")
        with open(os.path.join(args.raw, "val.en"), encoding="utf-8") as f:
            lines = f.read().splitlines()[: args.sentences]
        open(source, "w", encoding="utf-8").write("\n".join(lines) + "\n")
        runs = [(label, work, os.path.join(work, "run"), glob.glob(f"{work}/run/averaged/ckpt-*.index"))
                for label, work in ours_runs(args.ours)]
        if args.peer:
            peer_run = open(os.path.join(args.peer, "model_dir")).read().strip()
            pieces = os.path.join(scratch, "val.sp.en")
            with open(f"{args.peer}/data/val.sp.en", encoding="utf-8") as f:
                open(pieces, "w", encoding="utf-8").write("".join(f.readlines()[: args.sentences]))
            averaged = os.path.join(os.path.dirname(peer_run), "avg5")
            runs.append(("OpenNMT-tf", args.peer, peer_run, [averaged] if os.path.isdir(averaged) else []))
        for toolkit, work, run_dir, averaged in runs:
            kept = checkpoints(run_dir)
            for step, prefix in kept:
                decode = (decode_peer(prefix, pieces, scratch, args.venv, args.peer) if toolkit == "OpenNMT-tf"
                          else decode_ours(work, prefix, source, scratch))
                points.append(dict(toolkit=toolkit, checkpoint=f"step {step}", step=step,
                                   minutes=minutes_since_start(prefix, work), bleu=score(decode, references)))
                print(f"{toolkit} step {step}: {points[-1]['minutes']:.1f} min, val BLEU {points[-1]['bleu']:.2f}",
                      flush=True)
            if averaged and kept:
                path = averaged[0][: -len(".index")] if averaged[0].endswith(".index") else averaged[0]
                decode = (decode_peer(path, pieces, scratch, args.venv, args.peer) if toolkit == "OpenNMT-tf"
                          else decode_ours(work, path, source, scratch))
                points.append(dict(toolkit=toolkit, checkpoint="averaged", step=kept[-1][0],
                                   minutes=minutes_since_start(kept[-1][1], work), bleu=score(decode, references)))
                print(f"{toolkit} averaged: val BLEU {points[-1]['bleu']:.2f}", flush=True)
    return points


def plot(points: list[dict], out: str, sentences: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    toolkits = list(dict.fromkeys(p["toolkit"] for p in points))
    colors = iter(["tab:blue", "tab:green", "tab:purple", "tab:red", "tab:brown"])
    for toolkit in toolkits:
        color = "tab:orange" if toolkit == "OpenNMT-tf" else next(colors)
        line = [p for p in points if p["toolkit"] == toolkit and p["checkpoint"] != "averaged"]
        if line:
            axes.plot([p["minutes"] for p in line], [p["bleu"] for p in line], "o-", color=color, label=toolkit)
        for p in points:
            if p["toolkit"] == toolkit and p["checkpoint"] == "averaged":
                axes.plot([p["minutes"]], [p["bleu"]], "*", color=color, markersize=14,
                          label=f"{toolkit}, averaged")
    axes.set_xlabel("wall-clock minutes since the training process started")
    axes.set_ylabel(f"val sacreBLEU (first {sentences} sentences)")
    axes.set_title("Multi30k En-De: BLEU against training time, 2 CPU cores")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(out, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--ours", required=True, action="append",
                        help="multi30k_quality.sh's work directory, or LABEL=DIR; may be repeated")
    parser.add_argument("--peer", help="multi30k_peer.sh's work directory")
    parser.add_argument("--raw", required=True, help="the raw Multi30k files (val.en, val.de)")
    parser.add_argument("--sentences", type=int, default=300, help="val sentences decoded per checkpoint")
    parser.add_argument("--venv", default=os.path.join(os.environ.get("PEERS_DIR", "/tmp/peers"), "onmt"),
                        help="the OpenNMT-tf venv (default $PEERS_DIR/onmt, PEERS_DIR defaulting to /tmp/peers)")
    parser.add_argument("--out", default="quality_curve.png")
    args = parser.parse_args()
    points = curve(args)
    with open(os.path.splitext(args.out)[0] + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["toolkit", "checkpoint", "step", "minutes", "bleu"])
        writer.writeheader()
        writer.writerows(points)
    plot(points, args.out, args.sentences)
    print(f"wrote {args.out} and {os.path.splitext(args.out)[0]}.csv")


if __name__ == "__main__":
    main()
