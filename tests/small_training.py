"""Small, fast training set-ups for the tests of the training loop (trainer, best checkpoint, warm start).

Most of a tiny trainer's cost is fixed: generating the problem's examples in Python (100,000 for an
algorithmic problem) and tracing the step functions (proportional to the number of layers). These tests
are about the loop's bookkeeping, not what it learns, so they train one layer each side of width 16 on a
few thousand examples; the bugs they guard against do not depend on the model's size.
"""
import t2t_lite.problems  # noqa: F401  (registers the algorithmic problems)
from t2t_lite.registry import problems

# 1+1 layers of width 16, no dropout (runs are deterministic); batches of 256 tokens, at most 32 per side
# (the reverse problem's examples have at most 21), so the memory probe's largest batch is small too.
TINY = ("vocab_size=12,d_model=16,d_ff=32,num_heads=2,num_encoder_layers=1,num_decoder_layers=1,dropout=0,"
        "attention_dropout=0,relu_dropout=0,train.batch_size=256,train.max_length=32")


def small_problem(name: str = "algorithmic_reverse", train_examples: int = 2000, dev_examples: int = 200):
    """The registered algorithmic problem `name` with fewer generated examples (same generator and seeds)."""
    problem = problems.get(name)()
    problem.split_sizes = {"train": train_examples, "dev": dev_examples}
    return problem
