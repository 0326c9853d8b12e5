"""Opening a run (t2t_lite/run.py): which checkpoint, its hparams.json, the refusals, the restored model."""
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import t2t_lite.hparams  # noqa: F401
import t2t_lite.problems  # noqa: F401
from t2t_lite import config, precision
from t2t_lite.errors import UserError
from t2t_lite.registry import hparams_sets
from t2t_lite.decoding.request import DecodeRequest
from t2t_lite.run import RunRequest, find_checkpoint, name_partners, open_run, spec_beside
from t2t_lite.run_dir import (AVERAGED_SUBDIR, BEST_SUBDIR, HPARAMS_FILE, RunDir, RunSpec, load_spec, save_spec,
                               spec_json)

from saved_runs import save_run

TINY = "d_model=32,d_ff=64,num_heads=4,num_encoder_layers=1,num_decoder_layers=1"
REVERSE_VOCAB_SIZE = 12  # algorithmic_reverse: 10 digits, PAD and EOS


def tiny_spec(vocab_size: int = REVERSE_VOCAB_SIZE) -> RunSpec:
    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(), f"{TINY},vocab_size={vocab_size}")
    return RunSpec("algorithmic_reverse", "transformer_tiny", TINY, hparams)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run with ckpt-100 and ckpt-200, the in-memory model they hold, and an averaged/ckpt-200."""
    output_dir = str(tmp_path_factory.mktemp("run"))
    model = save_run(output_dir, tiny_spec(), (100, 200))
    save_run(os.path.join(output_dir, AVERAGED_SUBDIR), tiny_spec(), (200,), seed=1)
    return output_dir, model


def test_the_averaged_checkpoint_wins_over_the_newest_and_an_explicit_path_over_both(run, tmp_path):
    output_dir, _ = run
    assert find_checkpoint(RunDir(output_dir), None) == os.path.join(output_dir, AVERAGED_SUBDIR, "ckpt-200")
    explicit = os.path.join(output_dir, "ckpt-100")
    assert find_checkpoint(RunDir(output_dir), explicit) == explicit
    assert find_checkpoint(None, explicit) == explicit
    without_average = tmp_path / "run"
    shutil.copytree(output_dir, without_average, ignore=shutil.ignore_patterns(AVERAGED_SUBDIR))
    assert find_checkpoint(RunDir(str(without_average)), None) == str(without_average / "ckpt-200")
    with pytest.raises(UserError, match="^no checkpoint in `output_dir` .*; train first or pass `checkpoint_path`$"):
        find_checkpoint(RunDir(str(tmp_path / "empty")), None)
    with pytest.raises(UserError, match=r"^no checkpoint at `checkpoint_path` '.*ckpt-7' "
                                        r"\(expected .*ckpt-7.index, or a run directory\)$"):
        find_checkpoint(RunDir(output_dir), os.path.join(output_dir, "ckpt-7"))
    with pytest.raises(UserError, match="^give `output_dir`"):
        find_checkpoint(None, None)


def test_a_reopened_run_gives_the_logits_of_the_model_that_was_saved(run):
    output_dir, saved = run
    opened = open_run(RunRequest(checkpoint_path=os.path.join(output_dir, "ckpt-200"), decode=DecodeRequest(mixed_precision="none")))
    assert opened.spec == tiny_spec() and opened.problem_name == "algorithmic_reverse"
    assert opened.decode_hparams == tiny_spec().hparams.decode
    features = {"inputs": np.array([[3, 4, 5, 1], [6, 7, 1, 0]], np.int32),
                "targets": np.array([[5, 4, 3, 1], [7, 6, 1, 0]], np.int32)}
    expected = saved(features).numpy()  # [B, T, V]
    np.testing.assert_array_equal(opened.model(features).numpy(), expected)
    # The averaged checkpoint holds other weights (seed 1): the default choice really opened it.
    averaged = open_run(RunRequest(output_dir=output_dir, decode=DecodeRequest(mixed_precision="none"))).model(features).numpy()
    assert np.abs(averaged - expected).max() > 1e-3


def test_a_reduced_precision_run_keeps_the_float32_weights_and_unknown_precisions_are_refused(run):
    output_dir, saved = run
    checkpoint = os.path.join(output_dir, "ckpt-200")
    opened = open_run(RunRequest(checkpoint_path=checkpoint, decode=DecodeRequest(mixed_precision="mixed_bfloat16")))
    assert opened.model.compute_dtype == "bfloat16"
    for reduced, full in zip(opened.model.weights, saved.weights):
        assert reduced.dtype == "float32"
        np.testing.assert_array_equal(reduced.numpy(), full.numpy())
    with pytest.raises(UserError, match="^`mixed_precision` must be one of auto, none, mixed_float16, mixed_bfloat16; "
                                        "got 'bfloat16'$"):
        DecodeRequest(mixed_precision="bfloat16")


@pytest.mark.parametrize("flags, has_gpu, chosen, dtype", [
    ({"avx512_bf16"}, False, "mixed_bfloat16", "bfloat16"), ({"amx_bf16"}, False, "mixed_bfloat16", "bfloat16"),
    ({"avx512f"}, False, "none", "float32"), ({"avx512_bf16"}, True, "none", "float32")])
def test_by_default_a_run_decodes_in_bfloat16_only_on_a_cpu_that_multiplies_it_natively(run, monkeypatch, flags,
                                                                                        has_gpu, chosen, dtype):
    output_dir, _ = run
    monkeypatch.delenv(precision.ISA_CAP_VARIABLE, raising=False)  # the CPU's flags decide here, not a cap
    monkeypatch.setattr(precision, "cpu_flags", lambda: flags)
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: ["GPU:0"] if has_gpu and kind == "GPU" else [])
    opened = open_run(RunRequest(checkpoint_path=os.path.join(output_dir, "ckpt-200")))  # the default: auto
    assert opened.mixed_precision == chosen and opened.model.compute_dtype == dtype


def test_a_vocabulary_of_another_size_is_refused(tmp_path):
    output_dir = str(tmp_path / "run")
    save_run(output_dir, tiny_spec(vocab_size=REVERSE_VOCAB_SIZE + 3), (1,))
    with pytest.raises(UserError) as refusal:
        open_run(RunRequest(output_dir=output_dir))
    assert str(refusal.value) == (f"the vocabulary of `data_dir` None has {REVERSE_VOCAB_SIZE} ids but the model was "
                                  f"trained with {REVERSE_VOCAB_SIZE + 3}; pass the run's `data_dir`")


def test_the_hparams_set_guard_and_a_checkpoint_outside_a_run(run, tmp_path):
    output_dir, _ = run
    checkpoint = os.path.join(output_dir, "ckpt-100")
    assert spec_beside(checkpoint, "transformer_tiny") == spec_beside(checkpoint, None) == tiny_spec()
    with pytest.raises(UserError, match="was trained with hparams set 'transformer_tiny', not 'transformer_base'; "
                                        "drop `hparams_set` or pick the matching checkpoint$"):
        open_run(RunRequest(output_dir=output_dir, hparams_set="transformer_base"))
    bare = tmp_path / "bare"
    shutil.copytree(output_dir, bare, ignore=shutil.ignore_patterns(AVERAGED_SUBDIR, HPARAMS_FILE))
    with pytest.raises(UserError, match="it is not a t2t-lite run directory$"):
        open_run(RunRequest(output_dir=str(bare)))


def test_hparams_json_round_trips_and_extra_entries_sit_beside_the_spec(tmp_path):
    spec = tiny_spec()
    save_spec(RunDir(str(tmp_path)), spec)
    assert load_spec(RunDir(str(tmp_path))) == spec
    assert load_spec(RunDir(str(tmp_path / "nothing"))) is None
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / HPARAMS_FILE).write_text(spec_json(spec, export={"model_name": "m"}))
    assert load_spec(RunDir(str(tmp_path / "extra"))) == spec
    (tmp_path / HPARAMS_FILE).write_text("{}")
    with pytest.raises(UserError, match="is unreadable or not a t2t-lite hparams file"):
        load_spec(RunDir(str(tmp_path)))


def test_checkpoint_choices_pick_the_averaged_best_or_latest_checkpoint(run, tmp_path):
    output_dir, _ = run
    assert find_checkpoint(RunDir(output_dir), None, "averaged") == os.path.join(output_dir, AVERAGED_SUBDIR, "ckpt-200")
    assert find_checkpoint(RunDir(output_dir), None, "latest") == os.path.join(output_dir, "ckpt-200")
    with pytest.raises(UserError, match=r"^no best checkpoint in `output_dir` .*best'\); pick another `checkpoint`$"):
        find_checkpoint(RunDir(output_dir), None, "best")
    best_run = tmp_path / "best_run"
    shutil.copytree(output_dir, best_run)
    save_run(str(best_run / BEST_SUBDIR), tiny_spec(), (100,))
    assert find_checkpoint(RunDir(str(best_run)), None, "best") == str(best_run / BEST_SUBDIR / "ckpt-100")
    with pytest.raises(UserError, match="^`checkpoint` must be one of averaged, best, latest; got 'newest'"):
        find_checkpoint(RunDir(output_dir), None, "newest")


def test_several_checkpoints_open_an_ensemble_only_where_the_caller_takes_one(run, tmp_path):
    output_dir, model = run
    paths = f"{output_dir}/ckpt-100,{output_dir}/{AVERAGED_SUBDIR}/ckpt-200"
    request = RunRequest(checkpoint_path=paths)
    with pytest.raises(UserError, match="^`checkpoint_path` names 2 checkpoints but this command opens one"):
        open_run(request)
    opened = open_run(request, ensemble=True)
    assert opened.checkpoints == tuple(paths.split(","))
    assert opened.checkpoint == opened.checkpoints[0] and opened.model is opened.models[0]
    for reopened, original in zip(opened.models[0].weights, model.weights):
        np.testing.assert_array_equal(reopened.numpy(), original.numpy())
    assert not np.array_equal(opened.models[1].weights[0].numpy(), model.weights[0].numpy())  # seed 1, not 0

    # Runs named as members stand for the checkpoint `checkpoint` picks in each.
    second = tmp_path / "second"
    save_run(str(second), tiny_spec(), (300,), seed=2)
    by_runs = open_run(RunRequest(checkpoint_path=f"{output_dir},{second}"), ensemble=True)
    assert by_runs.checkpoints == (f"{output_dir}/{AVERAGED_SUBDIR}/ckpt-200", f"{second}/ckpt-300")
    latest = open_run(RunRequest(checkpoint_path=f"{output_dir},{second}", checkpoint="latest"), ensemble=True)
    assert latest.checkpoints == (f"{output_dir}/ckpt-200", f"{second}/ckpt-300")

    other = tmp_path / "other_vocab"
    save_run(str(other), tiny_spec(vocab_size=20), (100,))
    with pytest.raises(UserError, match="has a vocabulary of 20 ids but .* has 12; an ensemble's models must share"):
        open_run(RunRequest(checkpoint_path=f"{output_dir}/ckpt-100,{other}/ckpt-100"), ensemble=True)


@pytest.fixture
def partnered(run, tmp_path):
    """A copy of `run` and a second run beside it (seed 2, ckpt-300), the copy naming the second as its partner."""
    output_dir, _ = run
    first, second = tmp_path / "runs" / "first", tmp_path / "runs" / "second"
    shutil.copytree(output_dir, first)
    second_model = save_run(str(second), tiny_spec(), (300,), seed=2)
    name_partners(str(first), [str(second)])
    return first, second, second_model


def test_a_run_with_partners_opens_with_them_as_one_ensemble_and_alone_when_named(partnered):
    first, second, second_model = partnered
    opened = open_run(RunRequest(output_dir=str(first)), ensemble=True)
    assert opened.checkpoints == (f"{first}/{AVERAGED_SUBDIR}/ckpt-200", f"{second}/ckpt-300")
    for reopened, original in zip(opened.models[1].weights, second_model.weights):
        np.testing.assert_array_equal(reopened.numpy(), original.numpy())
    latest = open_run(RunRequest(output_dir=str(first), checkpoint="latest"), ensemble=True)
    assert latest.checkpoints == (f"{first}/ckpt-200", f"{second}/ckpt-300")
    # A checkpoint_path opens what it names: the run alone.
    alone = open_run(RunRequest(output_dir=str(first), checkpoint_path=str(first)), ensemble=True)
    assert alone.checkpoints == (f"{first}/{AVERAGED_SUBDIR}/ckpt-200",)
    # One model's commands are refused rather than given one member silently.
    with pytest.raises(UserError, match=r"^`output_dir` '.*first' decodes as an ensemble with '.*second' "
                                        r"\(t2t-lite-ensemble\); this command opens one model: pass `checkpoint_path`"):
        open_run(RunRequest(output_dir=str(first)))

    # The partners are kept relative to the run: the directory holding both can move.
    moved = first.parent.parent / "moved"
    first.parent.rename(moved)
    assert open_run(RunRequest(output_dir=str(moved / "first")), ensemble=True).checkpoints == (
        f"{moved}/first/{AVERAGED_SUBDIR}/ckpt-200", f"{moved}/second/ckpt-300")

    name_partners(str(moved / "first"), [])
    assert not (moved / "first" / "ensemble.json").exists()
    assert open_run(RunRequest(output_dir=str(moved / "first"))).checkpoints == (
        f"{moved}/first/{AVERAGED_SUBDIR}/ckpt-200",)


def test_partners_that_cannot_join_are_refused_and_nothing_is_recorded(run, tmp_path):
    output_dir, _ = run
    first = tmp_path / "first"
    shutil.copytree(output_dir, first)
    other_vocab = tmp_path / "other_vocab"
    save_run(str(other_vocab), tiny_spec(vocab_size=20), (100,))
    for partners, message in [([str(tmp_path / "nowhere")], r"^partner '.*nowhere' is not a t2t-lite run directory"),
                              ([str(first)], r"is named twice or is the run itself"),
                              ([output_dir, output_dir], r"is named twice or is the run itself"),
                              ([str(other_vocab)], r"^partner '.*other_vocab' has a vocabulary of 20 ids but run "
                                                   r"'.*first' has 12; an ensemble's models must share one")]:
        with pytest.raises(UserError, match=message):
            name_partners(str(first), partners)
        assert not (first / "ensemble.json").exists()
    with pytest.raises(UserError, match=r"^`output_dir` '.*nowhere' is not a t2t-lite run directory"):
        name_partners(str(tmp_path / "nowhere"), [output_dir])


def test_a_partner_gone_or_an_unreadable_record_is_one_clear_error(partnered):
    first, second, _ = partnered
    (first / "ensemble.json").write_text("{not json")
    with pytest.raises(UserError, match=r"ensemble.json is unreadable .*; name the run's partners again"):
        open_run(RunRequest(output_dir=str(first)), ensemble=True)
    name_partners(str(first), [str(second)])
    shutil.rmtree(second)
    with pytest.raises(UserError, match=r"^`output_dir` '.*first' names '.*second' as an ensemble partner, but it "
                                        r"is not a run directory"):
        open_run(RunRequest(output_dir=str(first)), ensemble=True)
