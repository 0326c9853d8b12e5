"""Attention maps for t2t-lite-visualize: proper distributions, causal where they must be, PNGs written."""
import numpy as np

import t2t_lite.hparams  # noqa: F401
import t2t_lite.problems  # noqa: F401
from t2t_lite import config
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.models import build_model
from t2t_lite.registry import hparams_sets, problems
from t2t_lite.visualize import _teacher_forced_pass, attention_maps, visualize_sentence


def tiny_model():
    hp = config.apply_overrides(hparams_sets.get("transformer_tiny")(),
                                "vocab_size=12,d_model=16,d_ff=32,num_heads=4,dropout=0")
    return build_model(hp), hp


def test_maps_are_distributions_and_decoder_self_attention_is_causal():
    model, _ = tiny_model()
    inputs, outputs = [3, 4, 5, 6, 1], [6, 5, 4, 1]
    maps = attention_maps(model, inputs, outputs)
    assert maps["encoder_self"].shape == (2, 4, 5, 5)
    assert maps["encoder_decoder"].shape == (2, 4, 4, 5)
    assert maps["decoder_self"].shape == (2, 4, 4, 4)
    for weights in maps.values():
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    future = np.triu(np.ones((4, 4), bool), k=1)
    assert np.all(maps["decoder_self"][..., future] == 0.0)


def test_the_layer_by_layer_pass_is_the_models_own():
    """The maps come from a walk of the stacks beside the model's: it must reach the model's decoder states."""
    model, _ = tiny_model()
    inputs, targets = np.array([[3, 4, 5, 6, 1, 0]], np.int32), np.array([[6, 5, 4, 1]], np.int32)
    _, states = _teacher_forced_pass(model, inputs, targets)
    expected = model.decoder_states({"inputs": inputs, "targets": targets}, training=False)
    np.testing.assert_allclose(np.asarray(states), np.asarray(expected), atol=1e-5)


def test_visualize_sentence_writes_one_png_per_kind_and_layer(tmp_path):
    model, hp = tiny_model()
    problem = problems.get("algorithmic_reverse")()
    paths = visualize_sentence(problem, model, Decoder(model, hp.decode), "0123", str(tmp_path))
    assert len(paths) == 3 * 2
    for path in paths:
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob("*.incomplete*"))


def test_visualize_cli_opens_the_run_and_prints_one_path_per_plot(tmp_path):
    import tensorflow as tf

    from cli_helpers import run_tools
    from t2t_lite.run_dir import RunDir, RunSpec, save_spec

    model, hp = tiny_model()
    run = tmp_path / "run"
    run.mkdir()
    save_spec(RunDir(str(run)), RunSpec("algorithmic_reverse", "transformer_tiny", "", hp))
    tf.train.Checkpoint(model=model).save(str(run / "ckpt"))
    # Both commands at once.
    results = run_tools({"plots": ("visualize", [f"--output_dir={run}", "--sentence=0123",
                                                 f"--plot_dir={tmp_path / 'plots'}"]),
                         "refused": ("visualize", [f"--output_dir={run}", "--sentence=01x3",
                                                   f"--plot_dir={tmp_path / 'other'}"])}, max_running=2)
    result, refused = results["plots"], results["refused"]
    assert result.returncode == 0, result.stderr
    paths = result.stdout.split()
    assert len(paths) == 3 * 2 and sorted(paths) == sorted(map(str, (tmp_path / "plots").glob("*.png")))
    assert refused.returncode == 2 and refused.error.startswith("--sentence: "), refused.stderr
