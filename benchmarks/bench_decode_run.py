"""A trained run's decoding speed on real sentences, settings side by side in one process.

  python benchmarks/bench_decode_run.py --output_dir=RUN --source=test_2016_flickr.en \\
      --batch_sizes=32,64 --mixed_precisions=auto,none --exports=EXPORTS/ct2_int8/1 --rounds=3

Each setting (batch size x precision, and each export: a SavedModel or a
CTranslate2 export through Translator.from_export, at its own batch size) gets
its own Translator, which decodes a few sentences first (tracing, loading);
then the settings take turns decoding all of --source, round after round, so a
busy neighbour slows them alike. Prints each setting's median sentences/s
(tracing excluded, unlike the decoder's own rate) and how many outputs equal
the first setting's.
"""
import argparse
import statistics
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", required=True, help="the trained run")
    parser.add_argument("--source", required=True, help="source sentences, one per line")
    parser.add_argument("--batch_sizes", default="32", help="comma-separated sentences per batch")
    parser.add_argument("--mixed_precisions", default="auto", help="comma-separated: auto, none, mixed_bfloat16")
    parser.add_argument("--beam_size", type=int, default=None, help="default: the run's")
    parser.add_argument("--exports", default="", help="comma-separated export directories (a version, e.g. .../1)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from t2t_lite.inference.translator import Translator

    with open(args.source, encoding="utf-8") as f:
        sentences = [line.rstrip("\n") for line in f]
    translators = {}
    for precision in args.mixed_precisions.split(","):
        for batch in args.batch_sizes.split(","):
            translators[f"run, batch {batch}, {precision}"] = Translator.from_run(
                args.output_dir, mixed_precision=precision, batch_size=int(batch), beam_size=args.beam_size)
    for path in filter(None, args.exports.split(",")):
        translators[f"export {path}"] = Translator.from_export(path)
    for translator in translators.values():
        translator.translate(sentences[:8])  # traces or loads
    settings = list(translators)
    rates = {setting: [] for setting in settings}
    outputs = {}
    for round_ in range(args.rounds):
        for setting in settings:
            start = time.perf_counter()
            outputs[setting] = translators[setting].translate(sentences)
            rates[setting].append(len(sentences) / (time.perf_counter() - start))
            print(f"round {round_ + 1}: {setting}: {rates[setting][-1]:.1f} sentences/s", flush=True)
    print(f"{len(sentences)} sentences, median of {args.rounds} rounds:")
    first = outputs[settings[0]]
    for setting in settings:
        same = sum(a == b for a, b in zip(outputs[setting], first))
        print(f"  {setting:48s} {statistics.median(rates[setting]):7.1f} sentences/s  "
              f"{same}/{len(first)} outputs equal to the first setting's")


if __name__ == "__main__":
    main()
