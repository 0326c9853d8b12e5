"""A model variant decodes as it trains: for each part a variant may override (the self-attention's `call`, the
cross-attention's, the feed-forward network's, `DecoderLayer.call`, the output projection), a usr dir file
holding the override and its registration, trained 30 steps; every hypothesis the beam search, the Translator
and the SavedModel give scores as the variant's own full pass, under both kernel layouts.

In float32 (`mixed_precision="none"`): there the step and the full pass differ by reduction order only.
"""
import dataclasses
import json

import numpy as np
import pytest

from precisions import full_pass_logits, log_softmax
from trained_runs import REVERSE_TINY, made_once

STEPS = 30
WORDS = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]
SOURCES = ["alpha beta gamma", "omega sigma", "kappa theta delta delta beta"]
EXTRA_LENGTH = 3
SAME_ARITHMETIC = 1e-5  # |beam score - full-pass score|: the two differ by reduction order only
MOVES_SCORES = 1e-2  # what each override must change, so that decoding the bundled arithmetic would be seen

HEADER = '''import dataclasses

from keras import ops

from t2t_lite.layers.attention import MultiHeadAttention
from t2t_lite.layers.feed_forward import FeedForward
from t2t_lite.layers.transformer_layers import DecoderLayer
from t2t_lite.models.transformer import Transformer
from t2t_lite.registry import hparams_sets, models


def halved(output):
    """A sub-layer's output halved, and the cache beside it if it returned one."""
    return (output[0] * 0.5, output[1]) if isinstance(output, tuple) else output * 0.5
'''
# Each variant's override: the classes it replaces, ending in VariantTransformer.
OVERRIDES = {
    "self_attention": '''
class HalvedAttention(MultiHeadAttention):
    def call(self, query, **kwargs):
        return halved(super().call(query, **kwargs))


class VariantLayer(DecoderLayer):
    self_attention_class = HalvedAttention


class VariantTransformer(Transformer):
    decoder_layer_class = VariantLayer
''',
    "cross_attention": '''
class HalvedAttention(MultiHeadAttention):
    def call(self, query, **kwargs):
        return halved(super().call(query, **kwargs))


class VariantLayer(DecoderLayer):
    cross_attention_class = HalvedAttention


class VariantTransformer(Transformer):
    decoder_layer_class = VariantLayer
''',
    "feed_forward": '''
class HalvedFeedForward(FeedForward):
    def call(self, x, **kwargs):
        return halved(super().call(x, **kwargs))


class VariantLayer(DecoderLayer):
    feed_forward_class = HalvedFeedForward


class VariantTransformer(Transformer):
    decoder_layer_class = VariantLayer
''',
    "decoder_layer": '''
class VariantLayer(DecoderLayer):
    def call(self, x, *args, **kwargs):  # tanh of its output: a final LayerNorm would undo a scale
        output = super().call(x, *args, **kwargs)
        return (ops.tanh(output[0]), output[1]) if isinstance(output, tuple) else ops.tanh(output)


class VariantTransformer(Transformer):
    decoder_layer_class = VariantLayer
''',
    "output_projection": '''
class VariantTransformer(Transformer):
    def logits(self, states, columns=None, products=None):
        return super().logits(states, columns, products) * 1.5
''',
}
REGISTRATION = '''

@models.register("variant_{kind}")
def variant(hp):
    model = VariantTransformer(**dataclasses.asdict(hp))
    model.build()
    return model


@hparams_sets.register("variant_{kind}_tiny")
def variant_tiny():
    return dataclasses.replace(hparams_sets.get("transformer_tiny")(), model_name="variant_{kind}")
'''


def reversals(count: int, seed: int) -> tuple[str, str]:
    """Word sequences and their reversal: (sources, targets), a line each."""
    rng = np.random.default_rng(seed)
    sentences = [list(rng.choice(WORDS, size=rng.integers(2, 7))) for _ in range(count)]
    return ("".join(" ".join(words) + "\n" for words in sentences),
            "".join(" ".join(reversed(words)) + "\n" for words in sentences))


@pytest.fixture(scope="session")
def reversal_data(tmp_path_factory) -> str:
    """translate_files prepared on word reversals (a SentencePiece vocabulary: the SavedModel takes text)."""
    from t2t_lite.registry import problems

    def make(root):
        files = {}
        for split, count, seed in (("train", 400, 0), ("dev", 20, 1)):
            for side, text in zip(("src", "tgt"), reversals(count, seed)):
                (root / f"{split}.{side}").write_text(text, encoding="utf-8")
            files[split] = f"{root / split}.src,{root / split}.tgt"
        problems.get("translate_files")(str(root / "data")).generate_data(
            None, vocab_size=300, num_shards=1, train_files=files["train"], dev_files=files["dev"],
            log=lambda line: None)

    return str(made_once(tmp_path_factory, "reversal_data", make) / "data")


@pytest.fixture(scope="module", params=sorted(OVERRIDES))
def variant_run(request, reversal_data, tmp_path_factory):
    """(kind, the run directory) of word reversal trained STEPS steps with the variant of `kind`, from its own
    usr dir file."""
    import t2t_lite

    kind = request.param
    root = tmp_path_factory.mktemp(kind)
    usr_file = root / f"variant_{kind}.py"
    usr_file.write_text(HEADER + OVERRIDES[kind] + REGISTRATION.format(kind=kind), encoding="utf-8")
    # A short warmup: at step 30 of the set's 1,000 the model still emits PAD, which a Hypothesis leaves out.
    t2t_lite.train("translate_files", f"variant_{kind}_tiny", str(root / "run"), data_dir=reversal_data,
                   hparams=f"{REVERSE_TINY},train.warmup_steps=10", usr_dir=str(usr_file), train_steps=STEPS,
                   save_checkpoints_steps=STEPS, eval_steps=1, eval_bleu_sentences=0, memory_probe=False,
                   mixed_precision="none", log=lambda line: None)
    return kind, root


def opened(run_dir):
    from t2t_lite.decoding.request import DecodeRequest
    from t2t_lite.run import RunRequest, open_run

    return open_run(RunRequest(output_dir=str(run_dir), decode=DecodeRequest(mixed_precision="none")))


def full_pass_score(model, source, target) -> float:
    """log P(target | source), both ids, by the model's teacher-forced pass, in float64."""
    logits = full_pass_logits(model, source, list(target))
    return float(log_softmax(logits)[np.arange(len(target)), target].sum())


def searched(source, hypothesis_ids) -> list[int]:
    """What the search scored of a hypothesis' ids (EOS and PAD removed): the ids and EOS, unless as long as the
    search let it be (the source's ids, its EOS included, + EXTRA_LENGTH)."""
    return list(hypothesis_ids) + ([1] if len(hypothesis_ids) < len(source) + EXTRA_LENGTH else [])


def source_ids(run, sentence):
    return list(run.problem.encode(sentence)) + [1]


def test_each_override_moves_the_full_pass_and_the_run_records_the_variant(variant_run):
    from t2t_lite.models.transformer import Transformer

    kind, root = variant_run
    spec = json.loads((root / "run" / "hparams.json").read_text())
    assert spec["hparams"]["model_name"] == f"variant_{kind}"
    run = opened(root / "run")
    model = run.models[0]
    assert type(model) is not Transformer and type(model).__name__ == "VariantTransformer"
    bundled = Transformer(**dataclasses.asdict(run.spec.hparams.model))
    bundled.build()
    bundled.set_weights(model.get_weights())  # the same weights through the bundled layers
    ids = source_ids(run, SOURCES[0])
    target = ids[:-1][::-1] + [1]
    moved = abs(full_pass_score(model, ids, target) - full_pass_score(bundled, ids, target))
    assert moved >= MOVES_SCORES


@pytest.mark.parametrize("layout", ["in_out", "out_in"])
def test_every_beam_of_a_variant_scores_as_its_full_pass_in_the_beam_search(variant_run, layout):
    from t2t_lite.config import DecodeHParams
    from t2t_lite.decoding.batching import pad_ids
    from t2t_lite.decoding.decoder import Decoder
    from t2t_lite.ops.step_matmul import StepMatmulSettings

    _, root = variant_run
    run = opened(root / "run")
    model = run.models[0]
    sources = [source_ids(run, sentence) for sentence in SOURCES]
    decoder = Decoder(model, DecodeHParams(beam_size=3, alpha=0.0, extra_length=EXTRA_LENGTH),
                      step_matmul=StepMatmulSettings(layout=layout))
    ids, scores = (t.numpy() for t in decoder.decode(pad_ids(sources)))  # [B, K, T], [B, K]
    checked = 0
    for b, source in enumerate(sources):
        for k in range(ids.shape[1]):
            if not np.isfinite(scores[b, k]):
                continue
            hypothesis = list(ids[b, k][:len(source) + EXTRA_LENGTH])
            expected = full_pass_score(model, source, hypothesis[:hypothesis.index(1) + 1] if 1 in hypothesis
                                       else hypothesis)
            assert abs(scores[b, k] - expected) <= SAME_ARITHMETIC, (b, k)
            checked += 1
    assert checked >= 6


@pytest.mark.parametrize("layout", ["in_out", "out_in"])
def test_every_hypothesis_of_a_variant_scores_as_its_full_pass_in_the_translator_and_the_saved_model(
        variant_run, layout, tmp_path):
    from t2t_lite.decoding.request import DecodeRequest
    from t2t_lite.export.exporter import export_run
    from t2t_lite.export.request import ExportRequest
    from t2t_lite.inference.translator import Translator
    from t2t_lite.ops.step_matmul import StepMatmulSettings
    from t2t_lite.run import RunRequest

    _, root = variant_run
    run = opened(root / "run")
    model = run.models[0]
    settings = StepMatmulSettings(layout=layout)
    decode = DecodeRequest(beam_size=3, alpha=0.0, extra_length=EXTRA_LENGTH, nbest=3, mixed_precision="none")
    from_run = Translator.from_run(str(root / "run"), step_matmul=settings, **dataclasses.asdict(decode))
    path = export_run(ExportRequest(str(tmp_path / "exports"), RunRequest(output_dir=str(root / "run"),
                                                                          decode=decode), step_matmul=settings))
    from_export = Translator.from_export(path)
    for translator in (from_run, from_export):
        checked = 0
        for sentence, hypotheses in zip(SOURCES, translator.hypotheses(SOURCES, nbest=3)):
            for hypothesis in hypotheses:
                source = source_ids(run, sentence)
                expected = full_pass_score(model, source, searched(source, hypothesis.ids))
                assert abs(hypothesis.score - expected) <= SAME_ARITHMETIC, (translator, sentence, hypothesis)
                checked += 1
        assert checked >= 6


# Where each variant's first own class is, innermost first: the layer check_bundled_layers names.
FIRST_OWN = {"self_attention": ("decoder_0/self_attention", "HalvedAttention", "MultiHeadAttention"),
             "cross_attention": ("decoder_0/cross_attention", "HalvedAttention", "MultiHeadAttention"),
             "feed_forward": ("decoder_0/ffn", "HalvedFeedForward", "FeedForward"),
             "decoder_layer": ("decoder_0", "VariantLayer", "DecoderLayer"),
             "output_projection": (None, "VariantTransformer", "Transformer")}


def test_the_ctranslate2_export_refuses_a_variant_naming_its_first_own_layer(variant_run):
    from t2t_lite.errors import UserError
    from t2t_lite.export.ctranslate2_export import check_bundled_layers
    from t2t_lite.models.transformer import Transformer

    kind, root = variant_run
    model = opened(root / "run").models[0]
    with pytest.raises(UserError) as refused:
        check_bundled_layers(model)
    path, own, bundled = FIRST_OWN[kind]
    assert str(refused.value) == (f"{path or model.name} is a {own}, not t2t-lite's {bundled}: CTranslate2 would "
                                  "decode it as the bundled layer; export as a SavedModel")
    plain = Transformer(**dataclasses.asdict(opened(root / "run").spec.hparams.model))
    plain.build()
    check_bundled_layers(plain)  # the bundled model passes
