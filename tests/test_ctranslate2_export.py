"""The CTranslate2 export: the same network as t2t-lite's, the decoder's outputs from CTranslate2's search.

Untrained models of every architecture setting score given pairs as the
Keras model does; the tiny Multi30k run, exported in float32, decodes its dev
sentences to t2t-lite-decoder's outputs, greedy and with beam search; what
CTranslate2 cannot hold is refused before anything is written.
"""
import dataclasses
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

import t2t_lite.hparams  # noqa: F401
from t2t_lite import Translator, config
from t2t_lite.errors import UserError
from t2t_lite.export import ctranslate2_export
from t2t_lite.export_format import require_ctranslate2
from t2t_lite.inference.ctranslate2_backend import CTranslate2Export, gnmt_score
from t2t_lite.inference.export_reader import read_export
from t2t_lite.models import build_model
from t2t_lite.registry import hparams_sets
from t2t_lite.decoding.request import DecodeRequest
from t2t_lite.run import RunRequest, open_run
from cli_helpers import run_tool
from ct2_model_bin import read_variables

ctranslate2 = pytest.importorskip("ctranslate2")

EXTRA_LENGTH = 10
DEV_SENTENCES = 30
UNTRAINED = "vocab_size=40,num_encoder_layers=2,num_decoder_layers=2,d_model=32,d_ff=64,num_heads=4"


@pytest.mark.parametrize("overrides", [
    "norm_position=pre", "norm_position=post,layer_norm_epsilon=0.1", "position_encoding=learned,max_position=32",
    "share_embeddings=false", "key_dim=16,value_dim=16"])
def test_untrained_model_scores_pairs_as_keras_does(tmp_path, overrides):
    hparams = config.apply_overrides(hparams_sets.get("transformer_tiny")(), f"{UNTRAINED},{overrides}")
    tf.random.set_seed(0)
    model = build_model(hparams)
    for weight in model.weights:  # LayerNorms away from gamma 1, beta 0, so a misplaced one shows
        if "norm" in weight.path:
            weight.assign(weight + tf.random.normal(weight.shape, stddev=0.3))
    pieces = ["<pad>", "</s>", "<unk>"] + [f"p{i}" for i in range(3, 40)]
    spec = ctranslate2_export.transformer_spec(model, hparams, pieces, max_positions=32)
    spec.validate()
    spec.optimize()
    spec.save(str(tmp_path))
    translator = ctranslate2.Translator(str(tmp_path))
    rng = np.random.default_rng(0)
    sources = [rng.integers(3, 40, size=n).tolist() for n in (5, 9, 1)]
    targets = [rng.integers(3, 40, size=n).tolist() for n in (4, 7, 12)]
    scored = translator.score_batch([[pieces[i] for i in s] for s in sources], [[pieces[i] for i in t] for t in targets])
    for source, target, result in zip(sources, targets, scored):
        logits = model({"inputs": tf.constant([source + [1]]), "targets": tf.constant([target + [1]])})[0]  # [T, V]
        log_probs = tf.nn.log_softmax(logits).numpy()[np.arange(len(target) + 1), target + [1]]  # EOS scored too
        np.testing.assert_allclose(result.log_probs, log_probs, atol=1e-5)


def test_gnmt_score_undoes_ctranslate2_penalty():
    log_prob, length, alpha = -7.5, 9, 0.6
    assert gnmt_score(log_prob / length**alpha, length, alpha) == pytest.approx(log_prob / ((5 + length) / 6) ** alpha)


@pytest.fixture(scope="module")
def exported(multi30k_run, tmp_path_factory):
    """The float32 export of the tiny Multi30k run, its backend, its Translator and the dev sentences."""
    request = RunRequest(output_dir=multi30k_run["output_dir"], data_dir=multi30k_run["data_dir"],
                         decode=DecodeRequest(extra_length=EXTRA_LENGTH, mixed_precision="none"))  # float32, as the export
    run = open_run(request)
    path = ctranslate2_export.export_ctranslate2(run, str(tmp_path_factory.mktemp("ct2")), "multi30k")
    with open(multi30k_run["raw"] / "val.en", encoding="utf-8") as f:
        sentences = f.read().splitlines()[:DEV_SENTENCES] + [""]
    return {"path": path, "export": Translator.from_export(path), "sentences": sentences, "run": run,
            "translator": Translator.from_request(request)}


def test_export_directory_holds_model_vocabulary_and_settings(exported):
    names = set(os.listdir(exported["path"]))
    assert {"model.bin", "config.json", "shared_vocabulary.json", "vocab.model", "hparams.json", "README.txt"} <= names
    assert read_export(exported["path"]).info["quantization"] == "none"
    assert exported["export"].decode.hparams.extra_length == EXTRA_LENGTH


@pytest.mark.isa
@pytest.mark.parametrize("beam_size", [1, 4])
def test_float32_export_decodes_as_the_decoder(exported, beam_size):
    ours = exported["translator"].hypotheses(exported["sentences"], beam_size=beam_size, nbest=beam_size)
    theirs = exported["export"].hypotheses(exported["sentences"], beam_size=beam_size, nbest=beam_size)
    assert [[h.text for h in hyps] for hyps in theirs] == [[h.text for h in hyps] for hyps in ours]
    for our_hyps, their_hyps in zip(ours, theirs):
        assert [h.ids for h in their_hyps] == [h.ids for h in our_hyps]
        np.testing.assert_allclose([h.score for h in their_hyps], [h.score for h in our_hyps], atol=1e-3)


@pytest.mark.parametrize("setting, value, named", [("key_dim", 4, "key_dim"),
                                                   ("decoder_features", ("word_pointer",), "word_pointer"),
                                                   ("decoder_features", ("open_phrases",), "open_phrases")])
def test_unrepresentable_setting_is_refused_before_writing(exported, tmp_path, setting, value, named):
    run = exported["run"]
    model = dataclasses.replace(run.spec.hparams.model, **{setting: value})
    odd = dataclasses.replace(run, spec=dataclasses.replace(run.spec, hparams=dataclasses.replace(
        run.spec.hparams, model=model)))
    with pytest.raises(UserError, match=named):
        ctranslate2_export.export_ctranslate2(odd, str(tmp_path / "exports"))
    with pytest.raises(UserError, match="`quantization`"):
        ctranslate2_export.export_ctranslate2(run, str(tmp_path / "exports"), quantization="int4")
    assert not (tmp_path / "exports").exists()


def test_missing_ctranslate2_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import ctranslate2 now raises ImportError
    with pytest.raises(UserError, match=r'pip install "\.\[ctranslate2\]"'):
        require_ctranslate2()


@pytest.mark.isa
def test_exporter_cli_writes_int8_export_and_refuses_quantized_saved_model(multi30k_run, exported, tmp_path):
    run_flags = [f"--output_dir={multi30k_run['output_dir']}", f"--data_dir={multi30k_run['data_dir']}",
                 f"--export_dir={tmp_path}", "--model_name=m"]
    result = run_tool("exporter", *run_flags, "--export_format=ctranslate2", "--quantization=int8")
    assert result.returncode == 0, result.stderr[-2000:]
    path = result.stdout.strip()
    assert path == str(tmp_path / "m" / "1")
    assert read_export(path).info["quantization"] == "int8"
    # What CTranslate2 itself reads from the files: opened in the type the weights were saved in, the int8
    # model computes in int8 and the float32 one in float32; the int8 model.bin is the smaller (its float32
    # sinusoid table and vocabulary are the same size in both).
    assert ctranslate2.Translator(path).compute_type.startswith("int8")
    assert ctranslate2.Translator(exported["path"]).compute_type == "float32"
    int8_bytes, float32_bytes = (os.path.getsize(os.path.join(p, "model.bin")) for p in (path, exported["path"]))
    assert int8_bytes < float32_bytes, (int8_bytes, float32_bytes)
    # What the export holds, on any CPU: each weight CTranslate2 multiplies in int8 is the float32 export's,
    # quantized per output row as numpy does it here (scale 127 / the row's largest magnitude).
    int8_weights, float32_weights = (read_variables(os.path.join(p, "model.bin")) for p in (path, exported["path"]))
    scales = [name for name in int8_weights if name.endswith("weight_scale")]
    assert len(scales) >= 12, scales  # every linear layer of the 1+1 layers, and the embeddings
    for name in scales:
        weight = float32_weights[name.removesuffix("_scale")]
        scale = np.float32(127) / np.abs(weight).max(axis=1)
        np.testing.assert_allclose(int8_weights[name], scale, rtol=1e-6, err_msg=name)
        np.testing.assert_array_equal(int8_weights[name.removesuffix("_scale")],
                                      np.rint(weight * scale[:, None]).astype(np.int8), err_msg=name)
    # What the CPU makes of it: int8 moves each token's log-probability, scoring the float32 export's outputs
    # with both. How far depends on the CPU's int8 products, not on the export: per token on average 0.004 with
    # AVX-512 VNNI, 0.075 with AVX2 alone, whose u8 x s8 products saturate in 16 bits (largest 0.018 and 0.85;
    # docs/serving.md). The bound holds both with a 2x margin; float32 itself scores the pairs within ~1e-5.
    sentences = exported["sentences"][:20]
    outputs = [hyps[0].ids for hyps in exported["export"].hypotheses(sentences)]
    backend = CTranslate2Export(exported["path"])
    pieces = backend.pieces
    sources = [[pieces[i] for i in backend.vocabulary.encode(s)] for s in sentences]
    targets = [[pieces[i] for i in ids] for ids in outputs]
    int8 = CTranslate2Export(path).translator.score_batch(sources, targets)
    float32 = backend.translator.score_batch(sources, targets)
    differences = np.concatenate([np.abs(np.subtract(a.log_probs, b.log_probs)) for a, b in zip(int8, float32)])
    assert 1e-3 < differences.mean() < 0.15, differences.mean()
    refused = run_tool("exporter", *run_flags, "--quantization=int8")
    assert refused.returncode == 2 and "--quantization" in refused.error
    assert sorted(os.listdir(tmp_path / "m")) == ["1"]


def test_translator_and_decoder_open_a_ctranslate2_export_and_decode_as_the_run(multi30k_run, exported, tmp_path):
    sentences = exported["sentences"][:8]
    from_export = Translator.from_export(exported["path"])
    expected = exported["translator"].translate(sentences)
    assert from_export.translate(sentences) == expected
    assert [len(h) for h in from_export.hypotheses(sentences[:2], nbest=3)] == [3, 3]
    with pytest.raises(UserError, match="an export holds beam search only"):
        from_export.score(sentences[:1], sentences[:1])
    (tmp_path / "src.en").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    decoded = run_tool("decoder", f"--export_dir={exported['path']}", f"--decode_from_file={tmp_path / 'src.en'}",
                       f"--decode_to_file={tmp_path / 'out.de'}")
    assert decoded.returncode == 0, decoded.stderr[-3000:]
    assert (tmp_path / "out.de").read_text(encoding="utf-8").splitlines() == expected
    assert len(set(expected)) > 1
