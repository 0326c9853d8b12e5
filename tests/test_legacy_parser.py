"""A parser made before decoder-input features were plug-ins (tests/data/legacy_parser/make.py: the word
pointer and open phrases were two ModelHParams booleans then) still opens, and decodes to the lines it gave
then; its .keras file reloads to the same model. All in float32, which every CPU computes alike: `auto` would
be bfloat16 on one CPU and float32 on another, and a 40-step model's lines follow every rounding."""
import json
import pathlib
import shutil

import keras
import numpy as np
import pytest

from tiny_parsers import linearised

LEGACY = pathlib.Path(__file__).parent / "data" / "legacy_parser"
pytestmark = pytest.mark.isa  # lines decoded on one CPU, checked on each (test_forced_isa.py)


def legacy_run(tmp_path) -> tuple[str, str]:
    """A copy of the legacy run (the trainer's output directory) and its data directory."""
    run, data = tmp_path / "run", tmp_path / "data"
    shutil.copytree(LEGACY / "run", run)
    shutil.copytree(LEGACY / "data", data)
    return str(run), str(data)


def test_a_parser_run_from_before_the_features_decodes_its_old_lines(tmp_path):
    from t2t_lite.inference.translator import Translator

    run, data = legacy_run(tmp_path)
    expected = json.loads((LEGACY / "outputs.json").read_text())
    for constrained in (True, False):
        translator = Translator.from_run(run, data_dir=data, beam_size=3, constrained_decoding=constrained,
                                         extra_length=20, mixed_precision="none")
        assert linearised(translator, expected["sentences"]) == expected["constrained" if constrained else "free"]


def test_a_parser_keras_file_from_before_the_features_reloads_as_its_run(tmp_path):
    from t2t_lite.decoding.request import DecodeRequest
    from t2t_lite.run import RunRequest, open_run

    run, data = legacy_run(tmp_path)
    from_run = open_run(RunRequest(output_dir=run, data_dir=data, decode=DecodeRequest(mixed_precision="none"))).model
    reloaded = keras.saving.load_model(str(LEGACY / "parser.keras"))
    def settings(model):
        return {key: value for key, value in model.get_config().items() if key != "name"}

    assert settings(reloaded) == settings(from_run)
    assert len(reloaded.weights) == len(from_run.weights)
    for mine, theirs in zip(reloaded.weights, from_run.weights):
        assert mine.path.split("/", 1)[1] == theirs.path.split("/", 1)[1]  # below the model's own name
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    rng = np.random.default_rng(0)
    batch = {"inputs": rng.integers(3, 500, (2, 7)).astype(np.int32),
             "targets": rng.integers(3, 500, (2, 9)).astype(np.int32)}
    np.testing.assert_array_equal(reloaded(batch).numpy(), from_run(batch).numpy())
