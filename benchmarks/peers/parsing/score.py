"""Scores linearised parse trees with t2t-lite's own parsing scorer, the lines `t2t-lite-decoder --decode_reference`
prints for a parsing problem (problems/wsj_parsing.py: EVALB-equal bracket F1, malformed outputs repaired, the
share of outputs well-formed before repair, exact tree match). Runs in t2t-lite's environment; the same scorer for
t2t-lite's output and the peer's.

  python benchmarks/peers/parsing/score.py WORDS TREES HYPOTHESES [--json] [--problem=parsing_ptb_sample_words]

WORDS, TREES: the dev split as parsing_quality.sh writes it (dev.words, dev.trees), HYPOTHESES: one linearised tree
per line, in the target form of --problem (default parsing_ptb_sample_words); only the first len(HYPOTHESES) lines
of WORDS and TREES are scored (curves decode a prefix).
--json prints one JSON object (f1, well_formed, exact, sentences) instead of the report.
"""
import json
import sys

import t2t_lite.problems  # noqa: F401  (registers the problems)
from t2t_lite.problems.wsj_parsing import score_linearized
from t2t_lite.registry import problems


def scores(words: list[str], trees: list[str], outputs: list[str], form) -> dict:
    words, trees = words[: len(outputs)], trees[: len(outputs)]
    counts, repaired = score_linearized(outputs, trees, words, form)
    exact = sum(output.split() == tree.split() for output, tree in zip(outputs, trees))
    total = max(len(outputs), 1)
    return dict(sentences=len(outputs), f1=counts.f1, recall=counts.recall, precision=counts.precision,
                well_formed=100 * (len(outputs) - repaired) / total, exact=100 * exact / total, repaired=repaired)


def read(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def main(argv: list[str]) -> None:
    as_json = "--json" in argv
    names = [a.split("=", 1)[1] for a in argv if a.startswith("--problem=")]
    paths = [a for a in argv if a != "--json" and not a.startswith("--problem=")]
    if len(paths) != 3:
        sys.exit(__doc__.strip().splitlines()[4].strip())
    problem = problems.get(names[-1] if names else "parsing_ptb_sample_words")(None)
    words, trees, outputs = (read(p) for p in paths)
    result = scores(words, trees, outputs, problem.form)
    if as_json:
        print(json.dumps(result))
        return
    # The problem's own report, as the decoder prints it.
    for line in problem.score(outputs, trees[: len(outputs)], words[: len(outputs)]):
        print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
