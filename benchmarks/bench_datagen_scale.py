"""Full-size datagen rehearsal: a WMT14-sized corpus made from the shared real text, through the real t2t-lite-datagen.

  python benchmarks/bench_datagen_scale.py --pairs=4500000 --kill_at=random    # WMT14 En-De's size
  python benchmarks/bench_datagen_scale.py --pairs=20000 --vocab_size=8000 --kill_at=random

Runnable from any directory. It reads ../shared/data beside the checkout
(T2T_LITE_SHARED_DATA overrides) and works in a temporary directory that it
deletes, unless --work_dir names one to keep (the corpus there is reused by a
rerun of the same --pairs and --seed).

The corpus has WMT14 En-De's three parts in their shares, each made from real
text: "europarl" (42%) from Europarl v7 fr-en, "crawl" (53%) from the WMT
En-De training sample and Multi30k, "news" (5%) from newstest2012/2013 En-De.
Each pair is a sentence pair of its part, sometimes joined with a second one,
perturbed (a word dropped, two words swapped, a number added, the first letter's
case flipped), so the corpus is not copies of a few files; it is written as it
is made, never held in memory. The dev split is newstest2013 En-De.

Then, per --problems (translate_files, and wmt_ende reading the same local
files), one `t2t-lite-datagen` subprocess, measured from its log lines and /proc:
- vocabulary: its training time (datagen's own "vocabulary trained in" line)
  and the process's peak RSS when it ends (VmHWM: the input scan, the
  max_vocab_sentences sample and SentencePiece's trainer);
- encoding: train pairs / seconds from the vocabulary's end to the last
  "examples encoded" line (tokenizing on all cores, the scatter pass);
- shuffle: seconds writing the shards from the scattered buckets;
- total wall time, the run's peak RSS (wait4's ru_maxrss of the child), the
  data_dir's size on disk.
--kill_at=SECONDS|random also runs the first problem into a second data_dir,
SIGKILLs it at that time (random: uniform over 5-95% of the uninterrupted run's
wall time, from --seed), reruns it to the end and compares every file with the
uninterrupted run's by sha256.

One result line per measurement, then one JSON line for benchmarks/logs.
"""
import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("T2T_LITE_SHARED_DATA") or REPO.parent / "shared" / "data")
CORPUS_RECIPE = 1  # bump when the corpus recipe changes, so a kept --work_dir corpus is rebuilt
# WMT14 En-De's training parts (Europarl v7 1.92M, CommonCrawl 2.40M, News Commentary v9 0.20M pairs).
PART_SHARES = {"europarl": 0.42, "crawl": 0.53, "news": 0.05}
PART_FILES = {
    "europarl": [("europarl_fr_en_sample20k/europarl-v7.fr-en.sample20k.en",
                  "europarl_fr_en_sample20k/europarl-v7.fr-en.sample20k.fr")],
    "crawl": [("wmt_ende_train_sample10k/src-train.txt", "wmt_ende_train_sample10k/tgt-train.txt"),
              ("multi30k/raw/train.en", "multi30k/raw/train.de")],
    "news": [("newstest2012/newstest2012.en", "newstest2012/newstest2012.de")],
}
DEV_FILES = ("newstest2013/newstest2013.en", "newstest2013/newstest2013.de")
GIB = 2**30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=500_000, help="training pairs in the corpus")
    parser.add_argument("--work_dir", help="keep the corpus and data_dirs here (default: a temporary directory)")
    parser.add_argument("--problems", default="translate_files,wmt_ende", help="comma-separated problems to run")
    parser.add_argument("--vocab_size", type=int, default=37_000, help="datagen --vocab_size (the paper's En-De)")
    parser.add_argument("--num_shards", type=int, default=10, help="datagen --num_shards")
    parser.add_argument("--max_vocab_sentences", type=int, default=1_000_000, help="datagen --max_vocab_sentences")
    parser.add_argument("--kill_at", help="SECONDS or 'random': kill the first problem's datagen then, rerun, compare")
    parser.add_argument("--seed", type=int, default=1, help="seed of the corpus and of --kill_at=random")
    args = parser.parse_args()
    if not SHARED.is_dir():
        sys.exit(f"bench_datagen_scale: shared data {SHARED} not found; set T2T_LITE_SHARED_DATA")

    work = Path(args.work_dir).resolve() if args.work_dir else Path(tempfile.mkdtemp(prefix="datagen_scale_"))
    try:
        result = run(args, work)
    finally:
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, sort_keys=True))


def run(args, work: Path) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    corpus = build_corpus(work / "corpus", args.pairs, args.seed)
    corpus_bytes = sum(f.stat().st_size for f in (work / "corpus").glob("train.*"))
    report(f"corpus: {args.pairs:,} pairs ({', '.join(f'{s:.0%} {p}' for p, s in PART_SHARES.items())}), "
           f"{corpus_bytes / 2**20:,.1f} MiB, {'reused' if corpus['reused'] else 'built'} in "
           f"{time.monotonic() - start:.1f} s")
    result = {"bench": "datagen_scale", "pairs": args.pairs, "vocab_size": args.vocab_size,
              "num_shards": args.num_shards, "max_vocab_sentences": args.max_vocab_sentences,
              "corpus_mib": round(corpus_bytes / 2**20, 1), "cpus": os.cpu_count(), "runs": {}}
    flags = [f"--train_files={corpus['train_files']}", f"--dev_files={corpus['dev_files']}",
             f"--vocab_size={args.vocab_size}", f"--num_shards={args.num_shards}",
             f"--max_vocab_sentences={args.max_vocab_sentences}"]
    problems = [p for p in args.problems.split(",") if p]
    for problem in problems:
        data_dir = fresh_dir(work / problem)
        measured = datagen(problem, data_dir, flags)
        if measured.returncode != 0:
            sys.exit(f"bench_datagen_scale: datagen --problem={problem} failed ({measured.returncode}):\n"
                     + "\n".join(line for _, line in measured.lines[-20:]))
        result["runs"][problem] = summarise(problem, measured, data_dir, args.pairs)
    if args.kill_at:
        result["kill_and_rerun"] = kill_and_rerun(problems[0], work, flags, args, result["runs"][problems[0]])
    return result


def report(line: str) -> None:
    print(f"datagen_scale: {line}", flush=True)


# The corpus.

def build_corpus(directory: Path, pairs: int, seed: int) -> dict:
    """Writes train.{src,tgt} (`pairs` lines) and points at newstest2013 for dev; reuses a matching earlier build."""
    manifest = directory / "manifest.json"
    files = {"train_files": f"{directory / 'train.src'},{directory / 'train.tgt'}",
             "dev_files": ",".join(str(SHARED / f) for f in DEV_FILES)}
    wanted = {"pairs": pairs, "seed": seed, "recipe": CORPUS_RECIPE}
    if manifest.exists() and json.loads(manifest.read_text()) == wanted:
        return {**files, "reused": True}
    fresh_dir(directory)
    pools = {part: load_pool(part) for part in PART_SHARES}
    rng = random.Random(seed)
    parts = list(PART_SHARES)
    weights = [PART_SHARES[p] for p in parts]
    with open(directory / "train.src", "w", encoding="utf-8") as src, \
            open(directory / "train.tgt", "w", encoding="utf-8") as tgt:
        for _ in range(pairs):
            # Parts interleave at random in the file; datagen's shuffled order must not depend on
            # that, so test_shuffled_order checks a corpus of concatenated parts.
            pool = pools[rng.choices(parts, weights)[0]]
            s, t = perturbed_pair(pool, rng)
            src.write(s + "\n")
            tgt.write(t + "\n")
    manifest.write_text(json.dumps(wanted) + "\n")
    return {**files, "reused": False}


def load_pool(part: str) -> list[tuple[str, str]]:
    """The part's real sentence pairs with two non-empty sides."""
    pool = []
    for src_file, tgt_file in PART_FILES[part]:
        sources = (SHARED / src_file).read_text(encoding="utf-8").split("\n")
        targets = (SHARED / tgt_file).read_text(encoding="utf-8").split("\n")
        pool += [(s.strip(), t.strip()) for s, t in zip(sources, targets) if s.strip() and t.strip()]
    return pool


def perturbed_pair(pool: list[tuple[str, str]], rng: random.Random) -> tuple[str, str]:
    """One pair of the pool, perhaps joined with another, then perturbed on both sides."""
    src, tgt = rng.choice(pool)
    if rng.random() < 0.25:
        more = rng.choice(pool)
        src, tgt = f"{src} {more[0]}", f"{tgt} {more[1]}"
    src_words, tgt_words = src.split(" "), tgt.split(" ")
    if rng.random() < 0.3:
        for words in (src_words, tgt_words):
            if len(words) > 3:
                del words[rng.randrange(len(words))]
    if rng.random() < 0.2 and len(src_words) > 2:
        i = rng.randrange(len(src_words) - 1)
        src_words[i], src_words[i + 1] = src_words[i + 1], src_words[i]
    if rng.random() < 0.3:
        number = str(rng.randrange(10 ** rng.randint(1, 6)))
        src_words.append(f"({number})")
        tgt_words.append(f"({number})")
    if rng.random() < 0.1:
        src_words[0] = src_words[0][:1].swapcase() + src_words[0][1:]
    return " ".join(src_words), " ".join(tgt_words)


def fresh_dir(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


# Running and measuring datagen.

class Measured:
    def __init__(self):
        self.lines: list[tuple[float, str]] = []  # (seconds since start, line), stdout and stderr
        self.vocab_peak_kib = 0
        self.returncode = None
        self.wall = 0.0
        self.peak_kib = 0


def datagen_command() -> list[str]:
    script = shutil.which("t2t-lite-datagen")
    return [script] if script else [sys.executable, "-m", "t2t_lite.bin.datagen"]


def datagen(problem: str, data_dir: Path, flags: list[str], kill_at: float | None = None) -> Measured:
    """Runs t2t-lite-datagen to its end (or until SIGKILL at `kill_at` seconds), timing its log lines."""
    measured = Measured()
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    start = time.monotonic()
    process = subprocess.Popen([*datagen_command(), f"--problem={problem}", f"--data_dir={data_dir}", *flags],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    def pump(stream):
        for line in stream:
            measured.lines.append((time.monotonic() - start, line.rstrip("\n")))
            if line.startswith("vocabulary trained in"):
                # VmHWM is the peak so far: the scan, the sample and the trainer.
                measured.vocab_peak_kib = proc_status(process.pid).get("VmHWM", 0)

    pumps = [threading.Thread(target=pump, args=(s,), daemon=True) for s in (process.stdout, process.stderr)]
    for thread in pumps:
        thread.start()
    while True:
        # wait4 rather than Popen.wait: it gives this child's own peak RSS.
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if kill_at is not None and time.monotonic() - start >= kill_at:
            os.kill(process.pid, signal.SIGKILL)
            kill_at = None
        time.sleep(0.05)
    measured.wall = time.monotonic() - start
    measured.returncode = process.returncode = os.waitstatus_to_exitcode(status)
    measured.peak_kib = usage.ru_maxrss
    for thread in pumps:
        thread.join()
    return measured


def proc_status(pid: int) -> dict[str, int]:
    """The kB fields of /proc/<pid>/status (VmRSS, VmHWM, ...); empty once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in f) if v.strip().endswith("kB")}
    except OSError:
        return {}


def last_time(measured: Measured, pattern: str) -> tuple[float, re.Match] | None:
    found = None
    for t, line in measured.lines:
        if match := re.search(pattern, line):
            found = (t, match)
    return found


def phase_at(measured: Measured, seconds: float) -> str:
    """What datagen was doing at `seconds`, from the last log line before it."""
    phase = "start-up and scan"
    for t, line in measured.lines:
        if t > seconds:
            break
        if "training a" in line and "vocabulary" in line:
            phase = "vocabulary"
        elif "examples encoded" in line or line.startswith("vocabulary trained"):
            phase = "encoding"
        elif "shuffled into shards" in line:
            phase = "shuffling into shards"
        elif line.startswith(("dev:", "test:")) and "examples," in line:
            phase = "dev/test shards"
    return phase


def summarise(problem: str, measured: Measured, data_dir: Path, pairs: int) -> dict:
    vocab = last_time(measured, r"vocabulary trained in ([\d.]+)s")
    sample = last_time(measured, r"training a (\w+) vocabulary of (\d+) on ([\d,]+) of ([\d,]+)")
    encoded = last_time(measured, r"train: ([\d,]+)/([\d,]+) examples encoded")
    shuffled = last_time(measured, r"train: [\d,]+/[\d,]+ examples shuffled into shards")
    disk = sum(f.stat().st_size for f in data_dir.rglob("*") if f.is_file())
    train_disk = sum(f.stat().st_size for f in data_dir.glob("train-*.tfrecord"))
    out = {"wall_s": round(measured.wall, 1), "peak_rss_gib": round(measured.peak_kib * 1024 / GIB, 3),
           "disk_mib": round(disk / 2**20, 1), "train_shards_mib": round(train_disk / 2**20, 1)}
    name = f"{problem}:"
    if vocab and sample:
        out.update(vocab_s=float(vocab[1].group(1)), vocab_peak_rss_gib=round(measured.vocab_peak_kib * 1024 / GIB, 3),
                   vocab_sentences=int(sample[1].group(3).replace(",", "")), until_vocab_s=round(sample[0], 1))
        report(f"{name} scan and sample: {sample[0]:.1f} s (start-up, reading and counting the text)")
        report(f"{name} vocabulary: {sample[1].group(1)} of {int(sample[1].group(2)):,} on "
               f"{out['vocab_sentences']:,} sentences: {out['vocab_s']:.1f} s, peak RSS by its end "
               f"{out['vocab_peak_rss_gib']:.2f} GiB")
    if vocab and encoded:
        seconds = encoded[0] - vocab[0]
        out.update(encode_s=round(seconds, 1), encode_pairs_per_s=round(pairs / max(seconds, 1e-9)))
        report(f"{name} encoding: {pairs:,} pairs in {seconds:.1f} s, {out['encode_pairs_per_s']:,} pairs/s")
    if encoded and shuffled:
        out.update(shuffle_s=round(shuffled[0] - encoded[0], 1))
        report(f"{name} shuffling into {data_dir.name}'s shards: {out['shuffle_s']:.1f} s")
    if shuffled:
        out.update(after_train_shards_s=round(measured.wall - shuffled[0], 1))
        report(f"{name} dev shards, the --max_length count and exit: {out['after_train_shards_s']:.1f} s")
    report(f"{name} total: {measured.wall:.1f} s wall, peak RSS {out['peak_rss_gib']:.2f} GiB, "
           f"disk {out['disk_mib']:,.1f} MiB (train shards {out['train_shards_mib']:,.1f} MiB)")
    return out


def kill_and_rerun(problem: str, work: Path, flags: list[str], args, uninterrupted: dict) -> dict:
    """SIGKILLs a second run at --kill_at, reruns it, and compares its files with the uninterrupted run's."""
    if args.kill_at == "random":
        kill_at = random.Random(args.seed).uniform(0.05, 0.95) * uninterrupted["wall_s"]
    else:
        kill_at = float(args.kill_at)
    data_dir = fresh_dir(work / f"{problem}_killed")
    killed = datagen(problem, data_dir, flags, kill_at=kill_at)
    phase = phase_at(killed, kill_at)
    if killed.returncode != -signal.SIGKILL:
        report(f"kill-and-rerun: datagen ended (exit {killed.returncode}) before the kill at {kill_at:.1f} s")
        return {"kill_at_s": round(kill_at, 1), "killed": False}
    left = sorted(p.name for p in data_dir.iterdir())
    rerun = datagen(problem, data_dir, flags)
    if rerun.returncode != 0:
        sys.exit("bench_datagen_scale: the rerun failed:\n" + "\n".join(line for _, line in rerun.lines[-20:]))
    reference, again = digests(work / problem), digests(data_dir)
    same = sorted(name for name in reference if again.get(name) == reference[name])
    identical = same == sorted(reference) and sorted(again) == sorted(reference)
    report(f"kill-and-rerun: SIGKILL at {kill_at:.1f} s ({phase}; left {len(left)} entries), rerun "
           f"{rerun.wall:.1f} s: {len(same)}/{len(reference)} files byte-identical to the uninterrupted run"
           f"{'' if identical else ' - DIFFERENT: ' + ', '.join(sorted(set(reference) ^ set(same)))}")
    return {"kill_at_s": round(kill_at, 1), "killed": True, "phase": phase, "rerun_s": round(rerun.wall, 1),
            "files": len(reference), "identical": identical}


def digests(directory: Path) -> dict[str, str]:
    """sha256 of every file under `directory`, by relative path."""
    found = {}
    for f in sorted(directory.rglob("*")):
        if f.is_file():
            with f.open("rb") as stream:
                found[str(f.relative_to(directory))] = hashlib.file_digest(stream, "sha256").hexdigest()
    return found


if __name__ == "__main__":
    main()
