"""docs/extending.md's worked examples, run as a user would: a usr dir with a problem, a set and a model, and a
decoder-input feature in a file of its own.

The package is written from the documentation's own code blocks, so the page cannot drift from what works.
"""
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import run_tool, run_tools
from precisions import BOTH_PRECISIONS, full_pass_logits, log_softmax, score_tolerance
from trained_runs import REVERSE_TINY

DOC = Path(__file__).resolve().parents[1] / "docs" / "extending.md"
STEPS = 4


def write_usr_dir(root: Path) -> Path:
    """The files docs/extending.md marks with <!-- file: NAME -->, each the concatenation of its blocks, written
    under root; returns the package's directory (the feature's file is beside it)."""
    files = {}
    for name, code in re.findall(r"<!-- file: (\S+) -->\n```python\n(.*?)```", DOC.read_text(encoding="utf-8"),
                                 flags=re.S):
        files[name] = files.get(name, "") + code + "\n\n"
    assert list(files) == ["my_t2t/__init__.py", "tokens_left.py"], files.keys()
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root / "my_t2t"


def tsv_pairs(count: int, seed: int) -> str:
    """Word sequences and their reversal, one "source<TAB>target" line each."""
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]
    lines = []
    for i in range(count):
        sentence = [words[(seed + i * 7 + j * 3) % len(words)] for j in range(2 + (i + seed) % 5)]
        lines.append(" ".join(sentence) + "\t" + " ".join(reversed(sentence)))
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def usr_run(tmp_path_factory):
    """A run of the example trained through t2t-lite-trainer --usr_dir; returns its directories."""
    root = tmp_path_factory.mktemp("extending")
    usr_dir = write_usr_dir(root)
    (root / "train.tsv").write_text(tsv_pairs(300, 0), encoding="utf-8")
    (root / "dev.tsv").write_text(tsv_pairs(20, 1), encoding="utf-8")
    datagen = run_tool("datagen", f"--usr_dir={usr_dir}", "--problem=translate_tsv", f"--data_dir={root / 'data'}",
                       f"--train_files={root / 'train.tsv'}", f"--dev_files={root / 'dev.tsv'}", "--vocab_size=300",
                       "--num_shards=1")
    assert datagen.returncode == 0, datagen.stderr[-3000:]
    trainer = run_tool("trainer", f"--t2t_usr_dir={usr_dir}", "--problem=translate_tsv",
                       "--hparams_set=transformer_tsv_tiny", f"--data_dir={root / 'data'}",
                       f"--output_dir={root / 'run'}", f"--train_steps={STEPS}", f"--save_checkpoints_steps={STEPS}",
                       "--eval_steps=1", "--eval_bleu_sentences=0", "--memory_probe=false",
                       "--mixed_precision=none")
    assert trainer.returncode == 0, trainer.stderr[-3000:]
    (root / "test.src").write_text("alpha beta gamma\ndelta omega\n", encoding="utf-8")
    return {"root": root, "usr_dir": usr_dir, "run": root / "run"}


def test_the_run_records_its_usr_dir_data_dir_and_the_users_set_and_model(usr_run):
    spec = json.loads((usr_run["run"] / "hparams.json").read_text())
    assert spec["usr_dir"] == str(usr_run["usr_dir"])
    assert spec["data_dir"] == str(usr_run["root"] / "data")
    assert spec["problem"] == "translate_tsv" and spec["hparams_set"] == "transformer_tsv_tiny"
    assert spec["hparams"]["model_name"] == "transformer_relative"
    assert spec["hparams"]["model"]["d_model"] == 64


def test_the_pages_relative_attention_decodes_every_beam_as_its_full_pass_scores_it(usr_run):
    """The page's variant changes eq. 1 itself: each beam the search returns scores as the full pass over its
    ids, where each query sees all its keys at their distances, so the step's cached positions are the keys'."""
    from t2t_lite.config import DecodeHParams
    from t2t_lite.decoding.batching import encode_lines, pad_ids
    from t2t_lite.decoding.decoder import Decoder
    from t2t_lite.decoding.request import DecodeRequest
    from t2t_lite.run import RunRequest, open_run

    run = open_run(RunRequest(output_dir=str(usr_run["run"]), decode=DecodeRequest(mixed_precision="none")))
    model = run.models[0]
    assert type(model).__name__ == "RelativeTransformer"
    assert type(model.decoder_layers[0].self_attention).__name__ == "RelativeAttention"
    assert np.abs(model.decoder_layers[0].self_attention.relative_keys.numpy()).max() > 0
    sources = encode_lines(run.problem, ["alpha beta gamma delta omega", "sigma kappa", "theta"])
    ids, scores = (t.numpy() for t in Decoder(model, DecodeHParams(beam_size=3, alpha=0.0, extra_length=4)).decode(
        pad_ids(sources)))  # [B, K, T], [B, K]
    checked = 0
    for b, source in enumerate(sources):
        for k in range(ids.shape[1]):
            hypothesis = list(ids[b, k][:len(source) + 4])
            hypothesis = hypothesis[:hypothesis.index(1) + 1] if 1 in hypothesis else hypothesis
            logits = full_pass_logits(model, source, hypothesis)  # [T, V]
            expected = log_softmax(logits)[np.arange(len(hypothesis)), hypothesis].sum()
            assert abs(scores[b, k] - expected) <= 1e-5, (b, k)
            checked += 1
    assert checked == 9


def test_decoder_and_exporter_open_the_run_without_usr_dir_or_data_dir(usr_run):
    root, run = usr_run["root"], usr_run["run"]
    results = run_tools({
        "decoder": ("decoder", (f"--output_dir={run}", f"--decode_from_file={root / 'test.src'}",
                                f"--decode_to_file={root / 'test.hyp'}", "--beam_size=2")),
        "exporter": ("exporter", (f"--output_dir={run}", f"--export_dir={root / 'exports'}", "--model_name=tsv")),
    })
    for name, result in results.items():
        assert result.returncode == 0, f"{name}: {result.stderr[-3000:]}"
    assert len((root / "test.hyp").read_text(encoding="utf-8").splitlines()) == 2
    assert (root / "exports" / "tsv" / "1" / "saved_model.pb").exists()


def test_a_moved_usr_dir_is_named_and_a_new_usr_dir_wins(usr_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(usr_run["run"], run)
    spec = json.loads((run / "hparams.json").read_text())
    spec["usr_dir"] = str(tmp_path / "gone")
    (run / "hparams.json").write_text(json.dumps(spec))
    flags = (f"--output_dir={run}", f"--decode_from_file={usr_run['root'] / 'test.src'}",
             f"--decode_to_file={tmp_path / 'out.hyp'}", "--beam_size=1")
    moved = run_tool("decoder", *flags)
    assert moved.returncode == 2
    assert moved.error == (f"this run was trained with --usr_dir {str(tmp_path / 'gone')!r}, which no longer exists; "
                           f"pass --usr_dir=<where it is now>")
    given = run_tool("decoder", *flags, f"--usr_dir={usr_run['usr_dir']}")
    assert given.returncode == 0, given.stderr[-3000:]


def test_a_resumed_run_given_a_moved_usr_dir_records_the_new_place(usr_run, tmp_path):
    run, moved = tmp_path / "run", tmp_path / "moved" / "my_t2t"
    shutil.copytree(usr_run["run"], run)
    shutil.copytree(usr_run["usr_dir"], moved)
    spec = json.loads((run / "hparams.json").read_text())
    spec["usr_dir"] = str(tmp_path / "gone")
    (run / "hparams.json").write_text(json.dumps(spec))
    # The run has its steps already, so the trainer only resumes and records.
    trainer = run_tool("trainer", f"--output_dir={run}", f"--usr_dir={moved}", f"--train_steps={STEPS}",
                       "--eval_steps=1", "--eval_bleu_sentences=0", "--memory_probe=false", "--mixed_precision=none")
    assert trainer.returncode == 0, trainer.stderr[-3000:]
    assert json.loads((run / "hparams.json").read_text())["usr_dir"] == str(moved)


def test_a_usr_dir_that_is_not_a_package_is_one_clear_line(tmp_path):
    (tmp_path / "plain").mkdir()
    result = run_tool("trainer", f"--usr_dir={tmp_path / 'plain'}", "--registry_help")
    assert result.returncode == 2
    assert result.error == (f"--usr_dir {str(tmp_path / 'plain')!r} is neither a package (a directory with "
                            f"__init__.py) nor a .py file")


FEATURE_STEPS = 30


@pytest.fixture(scope="module")
def feature_run(tmp_path_factory):
    """algorithmic_reverse trained FEATURE_STEPS steps with the page's tokens_left feature, from its own file."""
    root = tmp_path_factory.mktemp("feature")
    write_usr_dir(root)
    trainer = run_tool("trainer", f"--usr_dir={root / 'tokens_left.py'}", "--problem=algorithmic_reverse",
                       "--hparams_set=transformer_tiny", f"--hparams={REVERSE_TINY},decoder_features=tokens_left",
                       f"--output_dir={root / 'run'}", f"--train_steps={FEATURE_STEPS}",
                       f"--save_checkpoints_steps={FEATURE_STEPS}", "--eval_steps=1", "--eval_bleu_sentences=0",
                       "--memory_probe=false", "--mixed_precision=none")
    assert trainer.returncode == 0, trainer.stderr[-3000:]
    return root


@pytest.mark.parametrize("mixed_precision", BOTH_PRECISIONS)
def test_a_feature_from_its_own_file_trains_and_the_beam_search_carries_its_state(feature_run, mixed_precision):
    """The run records the feature; every beam the search returns scores as the full pass over its ids, which
    computes the feature from the whole prefix: the step's context and per-beam state are the feature's."""
    from t2t_lite.config import DecodeHParams
    from t2t_lite.decoding.decoder import Decoder
    from t2t_lite.decoding.request import DecodeRequest
    from t2t_lite.run import RunRequest, open_run

    spec = json.loads((feature_run / "run" / "hparams.json").read_text())
    assert spec["hparams"]["model"]["decoder_features"] == ["tokens_left"]
    run = open_run(RunRequest(output_dir=str(feature_run / "run"),  # imports the recorded usr dir
                              decode=DecodeRequest(mixed_precision=mixed_precision)))
    model = run.models[0]
    assert model.decoder_features == ("tokens_left",) and model.tokens_left_embedding.built
    inputs = np.array([[5, 6, 7, 8, 9, 1], [4, 3, 1, 0, 0, 0]], np.int32)
    # alpha 0: a score is the hypothesis' log-probability.
    ids, scores = (t.numpy() for t in Decoder(model, DecodeHParams(beam_size=3, alpha=0.0, extra_length=2)).decode(
        inputs))  # [B, K, T], [B, K]
    checked = 0
    for b in range(ids.shape[0]):
        for k in range(ids.shape[1]):
            if not np.isfinite(scores[b, k]):
                continue
            ends = np.flatnonzero(ids[b, k] == 1)
            # An alive hypothesis (no EOS) runs to its sentence's max length, PAD after it.
            hypothesis = ids[b, k][:ends[0] + 1] if ends.size else ids[b, k][:np.count_nonzero(inputs[b]) + 2]
            logits = full_pass_logits(model, list(inputs[b]), list(hypothesis))  # [T, V]
            expected = log_softmax(logits)[np.arange(len(hypothesis)), hypothesis].sum()
            assert abs(scores[b, k] - expected) <= score_tolerance(mixed_precision, logits, alpha=0.0), (b, k)
            checked += 1
    assert checked >= 4


def test_the_ctranslate2_export_refuses_a_model_with_a_feature_naming_it(feature_run):
    result = run_tool("exporter", f"--output_dir={feature_run / 'run'}", f"--export_dir={feature_run / 'ct2'}",
                      "--export_format=ctranslate2")
    assert result.returncode == 2
    assert "decoder_features tokens_left cannot be exported for CTranslate2" in result.error
    assert not (feature_run / "ct2").exists()
