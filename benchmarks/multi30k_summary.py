"""Prints the side-by-side table of benchmarks/multi30k_side_by_side.sh from the two work directories.

  python benchmarks/multi30k_summary.py OURS_WORK_DIR PEER_WORK_DIR RAW_DIR [MORE_OURS_WORK_DIR ...]

RAW_DIR holds the plain references (val.de, test_2016_flickr.de): multi30k_side_by_side.sh's WORK_DIR/raw, which
benchmarks/peers/multi30k_raw.py writes.
Steps, target tokens seen, throughput, peak RSS of training, and sacreBLEU (13a, cased) of each
toolkit's averaged checkpoint on val and test_2016_flickr, both scored here the same way against the
raw references. Target tokens include the end-of-sentence token (the loss positions): ours from the
trainer's final line, the peer's from its log (steps x its time-weighted tokens per step, as
benchmarks/peers/multi30k/parse_train_log.py estimates them).
"""
import json
import os
import re
import sys

import sacrebleu

SPLITS = ("val", "test_2016_flickr")


def peak_rss_gib(time_file: str) -> float | None:
    """'Maximum resident set size (kbytes)' of /usr/bin/time -v, in GiB."""
    if not os.path.exists(time_file):
        return None
    found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(time_file).read())
    return int(found.group(1)) / 2**20 if found else None


def wall_seconds(time_file: str) -> float | None:
    """'Elapsed (wall clock) time' of /usr/bin/time -v, in seconds."""
    if not os.path.exists(time_file):
        return None
    found = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", open(time_file).read())
    if not found:
        return None
    hours, minutes, seconds = found.groups()
    return int(hours or 0) * 3600 + int(minutes) * 60 + float(seconds)


def bleu(hypotheses: str, raw_dir: str, split: str) -> float | None:
    if not os.path.exists(hypotheses):
        return None
    hyps = open(hypotheses, encoding="utf-8").read().splitlines()
    refs = open(os.path.join(raw_dir, f"{split}.de"), encoding="utf-8").read().splitlines()
    if len(hyps) != len(refs):
        return None
    return sacrebleu.corpus_bleu(hyps, [refs]).score


def ours(work: str, label: str = "t2t-lite") -> dict:
    log = open(os.path.join(work, "train.log"), encoding="utf-8").read()
    found = re.findall(r"trained steps \d+-(\d+): ([\d,]+) target tokens; (\d+):(\d\d):(\d\d) of training", log)
    row = {"toolkit": label}
    if found:
        step, tokens, h, m, s = found[-1]
        row.update(steps=int(step), tokens=int(tokens.replace(",", "")),
                   train_seconds=int(h) * 3600 + int(m) * 60 + int(s))
    return row


def peer(work: str) -> dict:
    row = {"toolkit": "OpenNMT-tf 2.32"}
    path = os.path.join(work, "train_summary.json")
    if os.path.exists(path):
        summary = json.load(open(path))
        step, per_step = summary.get("final_checkpoint_step"), summary.get("target_tokens_per_step(span estimate)")
        row.update(steps=step, train_seconds=summary.get("deadline_info", {}).get("stop_s"))
        if step and per_step:
            row["tokens"] = int(step * per_step)
    return row


def table(rows: list[dict]) -> str:
    def cell(value, spec):
        return "n/a" if value is None else format(value, spec)

    lines = ["| toolkit | steps | target tokens seen | target tokens/s | training s | process wall s "
             "| peak RSS GiB | val BLEU | test_2016_flickr BLEU |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        seconds, tokens = r.get("train_seconds"), r.get("tokens")
        rate = tokens / seconds if tokens and seconds else None
        lines.append(f"| {r['toolkit']} | {cell(r.get('steps'), 'd')} | {cell(tokens, ',d')} | {cell(rate, ',.0f')} "
                     f"| {cell(seconds, '.0f')} | {cell(r.get('wall'), '.0f')} | {cell(r.get('rss'), '.2f')} "
                     f"| {cell(r.get('val'), '.2f')} | {cell(r.get('test_2016_flickr'), '.2f')} |")
    return "\n".join(lines)


def main(ours_work: str, peer_work: str, raw_dir: str, *more_ours: str) -> None:
    rows = []
    runs = [(ours_work, ours(ours_work, f"t2t-lite ({os.path.basename(ours_work)})" if more_ours else "t2t-lite")),
            (peer_work, peer(peer_work))]
    runs += [(work, ours(work, f"t2t-lite ({os.path.basename(work)})")) for work in more_ours]
    for work, row in runs:
        row["rss"] = peak_rss_gib(os.path.join(work, "train.time"))
        row["wall"] = wall_seconds(os.path.join(work, "train.time"))
        for split in SPLITS:
            row[split] = bleu(os.path.join(work, f"{split}.hyp.de"), raw_dir, split)
        rows.append(row)
    print(table(rows))
    print("BLEU: sacreBLEU 13a, cased, of each toolkit's averaged checkpoint; training s: the budget's clock "
          "(ours: training loop; OpenNMT-tf: from process launch, start-up included).")


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    main(*sys.argv[1:])
