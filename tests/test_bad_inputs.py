"""Bad input handed to the commands: each gets exactly one line '<program>: error: <what and how to fix>',
exit code 2, no traceback, and nothing written or changed on disk.

The rows of docs/errors.md's bad-input table that no other test
file covers. The commands run as a user runs them (a process each, cli_helpers.py),
all from one fixture; each still builds what the command builds, so the
variants of a check already shown from the command line are tested on the
function the command calls.
"""
import json
import os
import random
import shutil

import pytest

from cli_helpers import run_tool, run_tools, snapshot

TINY = "d_model=32,d_ff=64,num_heads=4,num_encoder_layers=1,num_decoder_layers=1"
DATA_VOCAB_SIZE = 300  # the prepared data's vocabulary
RUN_VOCAB_SIZE = 310  # the vocabulary the run was "trained" with: not the data's
TWO_WORKERS = {"worker": ["127.0.0.1:2222", "127.0.0.1:2223"]}
TF_CONFIG_EXAMPLE = ('{"cluster": {"worker": ["host1:2222", "host2:2222"]}, '
                     '"task": {"type": "worker", "index": 0}}')


def synthetic_corpus(seed: int, count: int) -> str:
    """count lines of made-up words: enough text for a small BPE vocabulary, no shared data needed."""
    rng = random.Random(seed)
    syllables = [a + b for a in "bdfgklmnprstvz" for b in "aeiou"]
    words = ["".join(rng.choices(syllables, k=rng.randint(1, 3))) for _ in range(300)]
    return "".join(" ".join(rng.choices(words, k=rng.randint(3, 10))) + "\n" for _ in range(count))


def make_world(tmp):
    """Everything the bad-input cases need: prepared data (good and damaged) and a run whose vocabulary differs."""
    import tensorflow as tf

    import t2t_lite.hparams  # noqa: F401
    import t2t_lite.problems  # noqa: F401
    from t2t_lite import config
    from t2t_lite.models import build_model
    from t2t_lite.registry import hparams_sets, problems
    from t2t_lite.run_dir import RunDir, RunSpec, save_spec

    corpus = tmp / "corpus"
    corpus.mkdir()
    for split, seed, count in (("train", 1, 200), ("dev", 2, 20)):
        (corpus / f"{split}.src").write_text(synthetic_corpus(seed, count))
        (corpus / f"{split}.tgt").write_text(synthetic_corpus(seed + 10, count))
    (corpus / "empty.src").write_text("")
    (corpus / "empty.tgt").write_text("")

    data = tmp / "data"
    problems.get("translate_files")(str(data)).generate_data(
        None, vocab_size=DATA_VOCAB_SIZE, num_shards=1, train_files=f"{corpus}/train.src,{corpus}/train.tgt",
        dev_files=f"{corpus}/dev.src,{corpus}/dev.tgt", log=lambda line: None)
    for name in ("data_corrupt_vocab", "data_no_vocab", "data_bad_config"):
        shutil.copytree(data, tmp / name)
    (tmp / "data_corrupt_vocab" / "vocab.model").write_text("not a SentencePiece model\n")
    (tmp / "data_no_vocab" / "vocab.model").unlink()
    config_path = tmp / "data_bad_config" / "problem_config.json"
    config_path.write_text(config_path.read_text()[:40])  # cut off, as by a full disk

    # A run of translate_files "trained" (initialised, saved) with a vocabulary of another size.
    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(), f"{TINY},vocab_size={RUN_VOCAB_SIZE}")
    spec = RunSpec("translate_files", "transformer_tiny", TINY, hparams)
    run = tmp / "run"
    run.mkdir()
    save_spec(RunDir(str(run)), spec)
    tf.train.Checkpoint(model=build_model(hparams)).save(str(run / "ckpt"))
    bare = tmp / "checkpoint_without_hparams"  # a checkpoint directory that is no t2t-lite run
    shutil.copytree(run, bare)
    (bare / "hparams.json").unlink()
    resume = tmp / "resume"  # what a run leaves before its first checkpoint: hparams.json
    resume.mkdir()
    save_spec(RunDir(str(resume)), spec)

    decode = tmp / "decode"
    decode.mkdir()
    (decode / "two.txt").write_text("bada kelo\nmunu\n")
    (decode / "one.txt").write_text("bada kelo\n")
    return {"corpus": corpus, "data": data, "run": run, "bare": bare, "resume": resume, "decode": decode}


def cases(tmp, world):
    """name -> (tool, flags, env, the exact error message, directories that must stay as they were)."""
    corpus, data, run, decode = world["corpus"], world["data"], world["run"], world["decode"]
    reverse = ["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny", f"--hparams={TINY},vocab_size=12"]
    new_run = lambda name: tmp / f"new_run_{name}"  # noqa: E731  (an output_dir a refused trainer must not create)
    exports = tmp / "exports"
    outputs = tmp / "outputs"  # each decoder case's own (existing, empty) directory for --decode_to_file
    (outputs / "vocab").mkdir(parents=True)
    tf_config = lambda value: {"TF_CONFIG": value if isinstance(value, str) else json.dumps(value)}  # noqa: E731
    return {
        # t2t-lite-trainer
        "trainer TF_CONFIG not JSON": (
            "trainer", [*reverse, f"--output_dir={new_run('tf_config')}"], tf_config("{cluster: workers}"),
            "TF_CONFIG is not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 "
            f"(char 1)): '{{cluster: workers}}'; set it like {TF_CONFIG_EXAMPLE}", [new_run("tf_config")]),
        "trainer data_dir without datagen": (
            "trainer", ["--problem=translate_files", "--hparams_set=transformer_tiny", f"--data_dir={tmp / 'no_data'}",
                        f"--output_dir={new_run('no_data')}"], {},
            f"no problem_config.json in --data_dir '{tmp / 'no_data'}'; run t2t-lite-datagen "
            f"--problem=translate_files --data_dir={tmp / 'no_data'} first", [new_run("no_data"), tmp / "no_data"]),
        "trainer corrupt vocabulary": (
            "trainer", ["--problem=translate_files", "--hparams_set=transformer_tiny",
                        f"--data_dir={tmp / 'data_corrupt_vocab'}", f"--output_dir={new_run('vocab')}"], {},
            f"{tmp / 'data_corrupt_vocab' / 'vocab.model'} is not a SentencePiece model (26 bytes that do not parse "
            "as one); regenerate it with t2t-lite-datagen into a new --data_dir",
            [new_run("vocab"), tmp / "data_corrupt_vocab"]),
        "trainer resume with another vocabulary": (
            "trainer", ["--problem=translate_files", "--hparams_set=transformer_tiny", f"--data_dir={data}",
                        f"--output_dir={world['resume']}"], {},
            f"--output_dir '{world['resume']}' was trained with other hparams (model.vocab_size: {RUN_VOCAB_SIZE} -> "
            f"{DATA_VOCAB_SIZE}); use a new --output_dir or the original --hparams", [world["resume"]]),
        # t2t-lite-datagen
        "datagen empty corpus": (
            "datagen", ["--problem=translate_files", f"--data_dir={tmp / 'new_data'}",
                        f"--train_files={corpus}/empty.src,{corpus}/empty.tgt",
                        f"--dev_files={corpus}/dev.src,{corpus}/dev.tgt"], {},
            f"the training text (--train_files={corpus}/empty.src,{corpus}/empty.tgt) holds no pair with two "
            "non-empty sides (0 pairs with an empty side); pass non-empty parallel files", [tmp / "new_data"]),
        # t2t-lite-decoder
        "decoder vocabulary of another size": (
            "decoder", [f"--output_dir={run}", f"--data_dir={data}", f"--decode_from_file={decode / 'one.txt'}",
                        f"--decode_to_file={outputs / 'vocab' / 'out.txt'}"], {},
            f"the vocabulary of --data_dir '{data}' has {DATA_VOCAB_SIZE} ids but the model was trained with "
            f"{RUN_VOCAB_SIZE}; pass the run's --data_dir", [outputs / "vocab", run]),
        # t2t-lite-exporter
        "exporter vocabulary of another size": (
            "exporter", [f"--output_dir={run}", f"--data_dir={data}", f"--export_dir={exports}"], {},
            f"the vocabulary of --data_dir '{data}' has {DATA_VOCAB_SIZE} ids but the model was trained with "
            f"{RUN_VOCAB_SIZE}; pass the run's --data_dir", [exports, run]),
    }


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad_inputs")
    return {"tmp": tmp, **make_world(tmp)}


@pytest.fixture(scope="module")
def refused(world):
    """Every command-line case run once, together; name -> (Result, expected message, snapshots before, after)."""
    tmp = world["tmp"]
    all_cases = cases(tmp, world)
    before = {name: [snapshot(path) for path in case[4]] for name, case in all_cases.items()}
    results = run_tools({name: case[:3] for name, case in all_cases.items()}, max_running=2)
    return {name: (results[name], case[3], before[name], [snapshot(path) for path in case[4]])
            for name, case in all_cases.items()}, tmp


def check_refused(refused, name):
    results, tmp = refused
    result, message, before, after = results[name]
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert result.error == message
    assert after == before  # nothing created, written, changed or removed
    assert not list(tmp.rglob(".tmp-*")) and not list(tmp.rglob("*.incomplete"))
    return result


def test_trainer_tf_config_not_json(refused):
    check_refused(refused, "trainer TF_CONFIG not JSON")
    assert not (refused[1] / "new_run_tf_config").exists()


@pytest.mark.parametrize("tf_config, message", [
    pytest.param({"cluster": TWO_WORKERS},
                 'TF_CONFIG has no "task": add this process\'s own entry, e.g. "task": {"type": "worker", "index": 0}, '
                 "a different one on each machine", id="no task"),
    pytest.param({"cluster": TWO_WORKERS, "task": {"type": "worker", "index": 2}},
                 "TF_CONFIG's task index 2 is out of range: the cluster lists 2 'worker' tasks (index 0 to 1)",
                 id="index out of range"),
    pytest.param({"cluster": TWO_WORKERS, "task": {"type": "wroker", "index": 0}},
                 "TF_CONFIG's task type 'wroker' is not in its cluster; did you mean 'worker'? the cluster has "
                 "'worker'", id="unknown task type"),
    pytest.param({"cluster": {"ps": ["127.0.0.1:2222"], **TWO_WORKERS}, "task": {"type": "worker", "index": 0}},
                 "TF_CONFIG's cluster has tasks of type 'ps'; multi_worker training runs only chief and worker tasks",
                 id="ps tasks"),
    pytest.param(["127.0.0.1:2222"],
                 f"TF_CONFIG must be a JSON object, got '[\"127.0.0.1:2222\"]'; set it like {TF_CONFIG_EXAMPLE}",
                 id="not an object"),
])
def test_trainer_bad_tf_config_is_refused_before_tensorflow_reads_it(monkeypatch, tf_config, message):
    """What the trainer's make_strategy call refuses (the not-JSON case above shows the trainer's one line)."""
    from t2t_lite.errors import UserError
    from t2t_lite.training import distribution

    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    for name in ("auto", "multi_worker"):
        with pytest.raises(UserError) as refusal:
            distribution.make_strategy(name)
        assert str(refusal.value) == message


def test_trainer_data_dir_without_datagen(refused):
    check_refused(refused, "trainer data_dir without datagen")


def test_trainer_corrupt_vocabulary(refused):
    check_refused(refused, "trainer corrupt vocabulary")


@pytest.mark.parametrize("content", [pytest.param(b"", id="empty"), pytest.param(b"not a model\n", id="text"),
                                     pytest.param("half", id="truncated")])
def test_vocabulary_that_is_not_a_sentencepiece_model(world, tmp_path, content):
    from t2t_lite.data.vocabulary import Vocabulary
    from t2t_lite.errors import UserError

    path = tmp_path / "vocab.model"
    good = (world["data"] / "vocab.model").read_bytes()
    path.write_bytes(good[:len(good) // 2] if content == "half" else content)
    with pytest.raises(UserError) as refusal:
        Vocabulary.from_file(str(path))
    assert str(refusal.value) == (f"{path} is not a SentencePiece model ({path.stat().st_size:,} bytes that do not "
                                  "parse as one); regenerate it with t2t-lite-datagen into a new `data_dir`")
    with pytest.raises(UserError, match=f"^cannot read the vocabulary {tmp_path / 'nope'}: No such file or directory$"):
        Vocabulary.from_file(str(tmp_path / "nope"))


def test_missing_vocabulary_is_refused_when_a_run_is_opened(world):
    """What the decoder, exporter and visualiser meet (run.py)."""
    from t2t_lite.errors import UserError
    from t2t_lite.run import RunRequest, open_run

    data_dir = world["tmp"] / "data_no_vocab"
    with pytest.raises(UserError) as refusal:
        open_run(RunRequest(output_dir=str(world["run"]), data_dir=str(data_dir)))
    assert str(refusal.value) == (f"{data_dir / 'vocab.model'} is missing, so the shards in {data_dir} cannot be "
                                  "read; regenerate the data into a new `data_dir`")


def test_trainer_resume_with_a_vocabulary_of_another_size(refused):
    check_refused(refused, "trainer resume with another vocabulary")


def test_datagen_empty_corpus(refused):
    check_refused(refused, "datagen empty corpus")
    assert not (refused[1] / "new_data").exists()


def test_decoder_refuses(refused):
    check_refused(refused, "decoder vocabulary of another size")
    assert not (refused[1] / "outputs/vocab/out.txt").exists()


def decoder_library_cases(tmp, world):
    """name -> (DecodeFileRequest settings, the exact error message, directories that must stay as they were)."""
    run, decode = world["run"], world["decode"]
    reference = tmp / "outputs" / "reference"
    reference.mkdir(parents=True, exist_ok=True)
    return {
        "reference line count": (
            {"decode_from_file": str(decode / "two.txt"), "decode_reference": str(decode / "one.txt"),
             "decode_to_file": str(reference / "out.txt")},
            "--decode_reference has 1 lines but --decode_from_file has 2", [reference, run]),
        "output directory missing": (
            {"decode_from_file": str(decode / "one.txt"), "decode_to_file": str(tmp / "no_dir" / "out.txt")},
            f"--decode_to_file '{tmp / 'no_dir' / 'out.txt'}': directory '{tmp / 'no_dir'}' does not exist; "
            "create it first", [tmp / "no_dir"]),
    }


@pytest.mark.parametrize("name", ["reference line count", "output directory missing"])
def test_decoder_library_refuses(world, name):
    """What decode_file, the decoder command's one call, refuses; the command's one-line form is shown above."""
    from t2t_lite.bin.lines import DecodeFileRequest, decode_file
    from t2t_lite.errors import UserError
    from t2t_lite.run import RunRequest

    tmp = world["tmp"]
    settings, message, directories = decoder_library_cases(tmp, world)[name]
    before = [snapshot(path) for path in directories]
    request = RunRequest(output_dir=str(world["run"]), data_dir=str(world["data"]))
    with pytest.raises(UserError) as refusal:
        decode_file(DecodeFileRequest(request, **settings))
    assert str(refusal.value) == message
    assert [snapshot(path) for path in directories] == before  # nothing created, written, changed or removed
    assert not os.path.exists(settings["decode_to_file"])
    assert not list(tmp.rglob(".tmp-*")) and not list(tmp.rglob("*.incomplete"))


def test_unparsable_problem_config(world):
    """What the trainer, decoder and exporter read first from a --data_dir (text_problem.py)."""
    from t2t_lite.errors import UserError
    from t2t_lite.registry import problems

    path = world["tmp"] / "data_bad_config" / "problem_config.json"
    with pytest.raises(UserError) as refusal:
        problems.get("translate_files")(str(path.parent)).vocab_size
    # The middle is json's own wording; the start and the fix are ours.
    assert str(refusal.value).startswith(f"{path} is unreadable or not JSON (Unterminated string")
    assert str(refusal.value).endswith("); regenerate the data with t2t-lite-datagen into a new `data_dir`")


def test_missing_checkpoint_path_and_checkpoint_outside_a_run(world):
    """What the decoder, exporter and visualiser all call first (run.py)."""
    from t2t_lite.run import find_checkpoint, spec_beside
    from t2t_lite.run_dir import RunDir
    from t2t_lite.errors import UserError

    missing = world["run"] / "ckpt-9"
    with pytest.raises(UserError) as refusal:
        find_checkpoint(None, str(missing))
    assert str(refusal.value) == (f"no checkpoint at `checkpoint_path` '{missing}' "
                                  f"(expected {missing}.index, or a run directory)")
    bare = find_checkpoint(RunDir(str(world["bare"])), None)
    with pytest.raises(UserError) as refusal:
        spec_beside(bare, None)
    assert str(refusal.value) == f"no hparams.json beside '{bare}': it is not a t2t-lite run directory"


def test_exporter_vocabulary_of_another_size(refused):
    check_refused(refused, "exporter vocabulary of another size")
    assert not (refused[1] / "exports").exists()


# t2t-lite-bleu imports no TensorFlow: fast enough to run on its own.
@pytest.mark.parametrize("hypotheses, message", [
    pytest.param("a b\nc d\ne f\n", "translation {hyp} has 3 lines but reference {ref} has 2; they must be "
                 "line-aligned", id="line counts"),
    pytest.param("", "translation {hyp} is empty: no sentences to score", id="empty"),
])
def test_bleu_refuses_unaligned_or_empty_files(tmp_path, hypotheses, message):
    hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
    hyp.write_text(hypotheses)
    ref.write_text("a b\nc d\n" if hypotheses else "")
    result = run_tool("bleu", f"--translation={hyp}", f"--reference={ref}", timeout=60)
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert result.error == message.format(hyp=hyp, ref=ref)
