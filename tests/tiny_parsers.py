"""A tiny parser trained on a slice of the shared PTB sample, for the tests that decode with one."""
from pathlib import Path

import pytest

from t2t_lite.registry import problems
from shared_data import require_shared
from trained_runs import made_once


def train_tiny_parser(root, problem_name: str, overrides: str = "", data_dir: str | None = None):
    """problem_name prepared offline under root from a slice of the shared files, a tiny parser trained 40 steps
    (with `overrides` to its hparams) into root/run.

    data_dir: problem_name's data prepared already by an earlier call (its data_dir); then only the training runs
    (a second parser of one problem need not prepare the same data again).

    Returns:
      (output_dir, data_dir, the slice's directory).
    """
    import t2t_lite
    import t2t_lite.problems  # noqa: F401  (registers the problems)

    output_dir = str(root / "run")
    if data_dir is not None:
        train_parser(problem_name, data_dir, output_dir, overrides)
        return output_dir, data_dir, str(Path(data_dir).parent / "nltk")
    mrg = require_shared("ptb_wsj_sample/mrg")
    # A slice of the sample (train wsj_0001-0040, dev 0160-0163): enough to train a little and decode.
    combined = root / "nltk"
    combined.mkdir()
    for number in [*range(1, 41), *range(160, 164)]:
        (combined / f"wsj_{number:04d}.mrg").symlink_to(mrg / f"wsj_{number:04d}.mrg")
    combined = str(combined)
    data_dir = str(root / "data")
    problem = problems.get(problem_name)(data_dir)
    problem.generate_data(combined, vocab_size=500, num_shards=1, log=lambda line: None)
    train_parser(problem_name, data_dir, output_dir, overrides)
    return output_dir, data_dir, combined


@pytest.fixture(scope="session")
def words_parser(tmp_path_factory) -> tuple[str, str, str]:
    """A tiny parsing_ptb_sample_words parser (train_tiny_parser), trained once per session for the modules that
    parse with one: (output_dir, data_dir, the slice's directory). Read-only, as trained_runs.py's runs."""
    root = made_once(tmp_path_factory, "words_parser", lambda directory: train_tiny_parser(directory,
                                                                                           "parsing_ptb_sample_words"))
    return str(root / "run"), str(root / "data"), str(root / "nltk")


def train_parser(problem_name: str, data_dir: str, output_dir: str, overrides: str) -> None:
    """The tiny parser trained 40 steps on data_dir. No memory probe: it changes nothing trained (test_trainer.py
    checks), and its pass on the largest batch shapes costs more than the 40 steps."""
    import t2t_lite

    t2t_lite.train(problem=problem_name, hparams_set="transformer_wsj_parsing_tiny", output_dir=output_dir,
                   data_dir=data_dir,
                   hparams="d_model=32,d_ff=64,num_encoder_layers=1,num_decoder_layers=1,train.batch_size=2048"
                   + (overrides and "," + overrides),
                   train_steps=40, eval_steps=1, save_checkpoints_steps=40, log_every_steps=40,
                   eval_bleu_sentences=0, mixed_precision="none", memory_probe=False, log=lambda _: None)


def linearised(translator, sentences) -> list[str]:
    """The best output of each sentence as the model wrote it (translate gives a parser's as trees); the sentences
    are the treebank's tokens, parsed as they are."""
    return [hyps[0].text if hyps else "" for hyps in translator.hypotheses(sentences, input_tokenized=True)]
