"""Old runs open: a run, its .keras file and its SavedModel made at e4c00ea, before the layers and the decoding
step were refactored (tests/data/e4c00ea_run/make.py), restore with today's code and decode to the lines they
gave then. All in float32, which every CPU computes alike: a 90-step model's lines follow every rounding."""
import dataclasses
import json
import pathlib
import shutil

import keras
import numpy as np
import pytest

OLD = pathlib.Path(__file__).parent / "data" / "e4c00ea_run"
EXPECTED = json.loads((OLD / "outputs.json").read_text())
SENTENCES = EXPECTED["sentences"]
EXTRA_LENGTH = 8  # make.py's
pytestmark = pytest.mark.isa  # lines decoded on one CPU, checked on each (test_forced_isa.py)


@pytest.fixture(scope="module")
def old(tmp_path_factory) -> pathlib.Path:
    """A copy of tests/data/e4c00ea_run (run/, data/, model.keras, saved_model/), so nothing writes into tests/."""
    copy = tmp_path_factory.mktemp("e4c00ea") / "e4c00ea_run"
    shutil.copytree(OLD, copy)
    return copy


@pytest.fixture(scope="module")
def translator(old):
    """The old run opened as t2t-lite-decoder would (its newest checkpoint), at beam 3 in float32."""
    from t2t_lite.inference.translator import Translator

    return Translator.from_run(str(old / "run"), data_dir=str(old / "data"), beam_size=3, extra_length=EXTRA_LENGTH,
                               mixed_precision="none")


def test_an_old_run_decodes_its_old_lines(translator):
    assert translator.run.checkpoint.endswith("ckpt-90")
    assert translator.translate(SENTENCES) == EXPECTED["run_beam3"]
    assert translator.translate(SENTENCES, beam_size=1) == EXPECTED["run_greedy"]


def test_an_old_runs_best_checkpoint_restores_its_last_steps_weights(old, translator):
    """best/ holds the model's weights alone: the trainer's copy of its best step, here the last."""
    from t2t_lite.decoding.request import DecodeRequest
    from t2t_lite.run import RunRequest, open_run

    best = open_run(RunRequest(output_dir=str(old / "run"), data_dir=str(old / "data"), checkpoint="best",
                               decode=DecodeRequest(mixed_precision="none")))
    assert best.checkpoint.endswith("best/ckpt-90")
    def below_the_models_name(model):
        return [weight.path.split("/", 1)[1] for weight in model.weights]

    assert below_the_models_name(best.model) == below_the_models_name(translator.run.model)
    for mine, theirs in zip(best.model.weights, translator.run.model.weights):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


def test_an_old_keras_file_reloads_as_its_run(old, translator):
    from t2t_lite.inference.run_backend import RunBackend
    from t2t_lite.inference.translator import Translator
    from t2t_lite.ops.step_matmul import StepMatmulSettings

    from_run = translator.run.model
    reloaded = keras.saving.load_model(str(old / "model.keras"))
    assert reloaded.compute_dtype == from_run.compute_dtype == "float32"
    rng = np.random.default_rng(0)
    vocab_size = from_run.get_config()["vocab_size"]
    batch = {"inputs": rng.integers(3, vocab_size, (3, 7)).astype(np.int32),
             "targets": rng.integers(3, vocab_size, (3, 9)).astype(np.int32)}
    logits = reloaded(batch, training=False).numpy()  # [B, T_tgt, V]
    assert logits.shape == (3, 9, vocab_size) and logits.dtype == np.float32
    np.testing.assert_allclose(logits, from_run(batch, training=False).numpy(), rtol=1e-5, atol=1e-5)
    # The reloaded model in the run's place: the same problem, vocabulary and decode settings.
    run = dataclasses.replace(translator.run, models=(reloaded,))
    from_keras = Translator(RunBackend(run, StepMatmulSettings()), decode=translator.decode)
    assert from_keras.translate(SENTENCES) == EXPECTED["run_beam3"]


def test_an_old_saved_model_decodes_its_old_lines(old):
    from t2t_lite.inference.export_reader import read_export
    from t2t_lite.inference.translator import Translator

    export = read_export(str(old / "saved_model"))
    assert (export.decode_hparams.beam_size, export.info["mixed_precision"]) == (3, "none")
    assert Translator.from_export(export.path).translate(SENTENCES) == EXPECTED["saved_model_beam3"]
