"""The generated algorithmic problems are right and deterministic."""
import pytest

import t2t_lite.problems  # noqa: F401
from t2t_lite.data.problem import EOS_ID
from t2t_lite.registry import problems


def examples(name, split="dev", count=50):
    problem = problems.get(name)()
    rows = [(ex["inputs"].numpy().tolist(), ex["targets"].numpy().tolist()) for ex in problem.dataset(split).take(count)]
    return problem, rows


@pytest.mark.parametrize("name, relation", [
    ("algorithmic_reverse", lambda text: text[::-1]),
    ("algorithmic_copy", lambda text: text),
    ("algorithmic_addition", lambda text: str(sum(int(n) for n in text.split("+")))),
])
def test_targets_follow_from_inputs(name, relation):
    problem, rows = examples(name)
    for inputs, targets in rows:
        assert inputs[-1] == EOS_ID and targets[-1] == EOS_ID and 0 not in inputs + targets
        assert problem.decode(targets) == relation(problem.decode(inputs))
        assert problem.encode(problem.decode(inputs)) == inputs[:-1]
    if name != "algorithmic_addition":  # symbol sequences of every length allowed, and no other
        _, many = examples(name, count=1000)
        lengths = {len(inputs) - 1 for inputs, _ in many}
        assert lengths == set(range(problem.min_length, problem.max_length + 1))


def test_generation_is_deterministic_and_splits_differ():
    _, first = examples("algorithmic_reverse")
    _, again = examples("algorithmic_reverse")
    _, train = examples("algorithmic_reverse", split="train")
    assert first == again and first != train


def test_unknown_split_and_bad_text_are_rejected():
    problem = problems.get("algorithmic_reverse")()
    with pytest.raises(ValueError, match="splits"):
        problem.dataset("test")
    with pytest.raises(ValueError, match="alphabet"):
        problem.encode("12a")
