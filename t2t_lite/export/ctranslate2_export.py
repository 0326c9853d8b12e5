"""A trained run -> a CTranslate2 model directory, built with CTranslate2's own specification API.

CTranslate2 (https://opennmt.net/CTranslate2) runs Transformers on CPUs and GPUs
in C++, with int8 and float16 weights. The directory holds CTranslate2's
model.bin, config.json and shared_vocabulary.json (source_vocabulary.json and
target_vocabulary.json for a model with a vocabulary per side), plus the run's
hparams.json (with an "export" entry), its SentencePiece vocab.model (and
source_vocab.model) and a README.txt.

How t2t-lite's model maps onto CTranslate2's TransformerSpec:
- post-norm (the paper) or pre-norm with a final LayerNorm (t2t v3), ReLU FFN,
  biased projections, embeddings scaled by sqrt(D) (CTranslate2's scale_embeddings);
- the softmax projection is the target embedding (t2t-lite has no output bias);
- positions: CTranslate2's built-in sinusoid starts at position 1 (OpenNMT-tf's
  convention) where t2t's `get_timing_signal_1d` starts at 0, so the signal is
  written as an explicit table of MAX_POSITIONS rows, as CTranslate2's OpenNMT-tf
  converter does for learned positions (a learned table is written as it is);
- ids map 1:1 onto the SentencePiece pieces (id i is piece i): PAD (0) is the
  decoder's start token (t2t shifts targets right with 0), EOS (1) ends outputs
  and is appended to every source (add_source_eos).
"""
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Callable

import keras
import numpy as np

from t2t_lite.config import HParams
from t2t_lite.data.ids import EOS_ID, PAD_ID
from t2t_lite.data.pieces import SentencePieceCodec
from t2t_lite.data.vocabulary import UNK_ID
from t2t_lite.decoding.request import Engine
from t2t_lite.errors import UserError
from t2t_lite.export import layout
from t2t_lite.export_format import CTRANSLATE2, problem_info, require_ctranslate2
from t2t_lite.files import atomic_write_text
from t2t_lite.export.request import ExportRequest, publish, text_vocabularies, write_export_files
from t2t_lite.layers.attention import MultiHeadAttention
from t2t_lite.layers.embedding import LearnedPosition, SharedEmbedding, SinusoidalPosition, timing_signal
from t2t_lite.layers.feed_forward import FeedForward
from t2t_lite.layers.transformer_layers import DecoderLayer, EncoderLayer, Residual
from t2t_lite.models.transformer import Transformer
from t2t_lite.run import OpenedRun, open_run

# What a CTranslate2 export can decode with: float32 weights restored (then quantized), a free search.
EXPORTING = Engine("a CTranslate2 export", samples=False, constrains=False, precision="none",
                   precision_hint="its weights are float32 or `quantization`'s (e.g. bfloat16), its computation "
                                  "the caller's compute_type")
# CTranslate2's weight types offered (its own names); "none" keeps float32.
QUANTIZATIONS = ("none", "int8", "int8_float32", "int8_float16", "float16", "bfloat16")
# Rows of the sinusoid table: the longest source (EOS included) and the longest output the export can decode.
MAX_POSITIONS = 1024
README_TEXT = """\
A t2t-lite model for CTranslate2 ({quantization} weights), written by t2t-lite-exporter (export format ctranslate2).

With t2t-lite (t2t-lite-decoder's tokenizer, beam size, n-best and length penalty; needs no TensorFlow:
pip install ctranslate2 sentencepiece, and t2t-lite without its dependencies, pip's no-deps option):
    from t2t_lite import Translator
    Translator.from_export("this/directory").translate(["A dog runs."])

With CTranslate2 and SentencePiece alone:
    import ctranslate2, sentencepiece
    sp = sentencepiece.SentencePieceProcessor(model_file="this/directory/vocab.model")
    source_sp = {source_sp}
    translator = ctranslate2.Translator("this/directory")
    source = source_sp.encode("A dog runs.", out_type=str)
    result = translator.translate_batch([source], beam_size={beam_size}, length_penalty={alpha},
                                        min_decoding_length=0, max_decoding_length=len(source) + 1 + {extra_length})
    print(sp.decode(result[0].hypotheses[0]))

EOS is appended to each source (add_source_eos) and decoding starts from {start!r} (id 0), as in t2t-lite.
Sources (with EOS) and outputs longer than {max_positions} tokens cannot be represented.
CTranslate2's length_penalty divides a hypothesis' log-probability by length**alpha where t2t-lite
divides by ((5 + length) / 6)**alpha (GNMT), so its beam search can pick differently; CTranslate2Export
re-ranks CTranslate2's hypotheses by t2t-lite's score.
"""


def check_representable(hparams: HParams) -> None:
    """Refuses, naming the setting, a model CTranslate2's TransformerSpec cannot hold."""
    model = hparams.model
    if hparams.model_name != "transformer":
        raise UserError(f"model_name {hparams.model_name!r} cannot be exported for CTranslate2; only t2t-lite's "
                        "'transformer' maps onto its TransformerSpec")
    if model.head_key_dim != model.head_value_dim:
        raise UserError(f"key_dim {model.head_key_dim} != value_dim {model.head_value_dim} per head cannot be "
                        "exported for CTranslate2, whose attention has one head_dim; export as a SavedModel")
    if model.decoder_features:
        raise UserError(f"decoder_features {'+'.join(model.decoder_features)} cannot be exported for CTranslate2, "
                        "whose decoder takes its own tokens only; export as a SavedModel")
    if model.position_encoding == "learned" and model.max_position < 2:
        raise UserError(f"max_position={model.max_position} leaves no room for a source and EOS")


def check_bundled_layers(model) -> None:
    """Refuses a model holding a layer of another class than t2t-lite's own (a variant's, docs/extending.md),
    naming the innermost first: CTranslate2 would run the bundled arithmetic on its weights."""
    for path, layer, bundled in _layers_the_spec_reads(model):
        if type(layer) not in bundled:
            raise UserError(f"{path} is a {type(layer).__name__}, not t2t-lite's {bundled[0].__name__}: CTranslate2 "
                            "would decode it as the bundled layer; export as a SavedModel")


def _layers_the_spec_reads(model):
    """(path, layer, the classes CTranslate2's spec stands for) of each layer transformer_spec copies, each after
    the layers it holds, the model last."""
    dense, norm = (keras.layers.Dense,), (keras.layers.LayerNormalization,)
    for embedding in (model.source_embedding, model.target_embedding):
        yield embedding.name, embedding, (SharedEmbedding,)
    yield model.position.name, model.position, (SinusoidalPosition, LearnedPosition)
    for layer in model.encoder_layers + model.decoder_layers:
        for sublayer in layer.sublayers():
            path = f"{layer.name}/{sublayer.name}"
            if isinstance(sublayer, Residual):
                yield f"{path}/{sublayer.norm.name}", sublayer.norm, norm
                yield path, sublayer, (Residual,)
                continue
            attention = hasattr(sublayer, "query_proj")
            denses = ((sublayer.query_proj, sublayer.key_proj, sublayer.value_proj, sublayer.output_proj)
                      if attention else (sublayer.hidden, sublayer.output_proj))
            for projection in denses:
                yield f"{path}/{projection.name}", projection, dense
            yield path, sublayer, (MultiHeadAttention if attention else FeedForward,)
        yield layer.name, layer, (EncoderLayer if layer in model.encoder_layers else DecoderLayer,)
    for stack_norm in (model.encoder_norm, model.decoder_norm):
        if stack_norm is not None:
            yield stack_norm.name, stack_norm, norm
    yield model.name, model, (Transformer,)


def transformer_spec(model, hparams: HParams, pieces: list[str], max_positions: int = MAX_POSITIONS,
                     unk_id: int = UNK_ID, source_pieces: list[str] | None = None):
    """The ctranslate2.specs.TransformerSpec of a restored t2t-lite Transformer, weights and vocabulary set.

    Args:
      model: a built t2t_lite.models.transformer.Transformer with its weights.
      hparams: its HParams (check_representable first).
      pieces: V SentencePiece pieces, piece i for id i: the shared vocabulary's, or the target's.
      max_positions: rows of the sinusoid table (a learned table keeps its own max_position).
      unk_id: UNK's id in pieces (elsewhere than 2 in a SentencePiece model adopted with datagen's `vocab_file`).
      source_pieces: the source vocabulary's pieces where the model has one per side; None: pieces.
    Raises:
      UserError: the two vocabularies name UNK differently (CTranslate2 has one unknown token).
    """
    specs = require_ctranslate2().specs
    check_bundled_layers(model)
    hp = hparams.model
    pre_norm = hp.norm_position == "pre"
    # head_dim only when it is not D / H: the spec's from_config has no such argument, so the stacks are built here.
    head_dim = None if hp.head_key_dim * hp.num_heads == hp.d_model else hp.head_key_dim
    encoder = specs.TransformerEncoderSpec(hp.num_encoder_layers, hp.num_heads, pre_norm=pre_norm, head_dim=head_dim)
    decoder = specs.TransformerDecoderSpec(hp.num_decoder_layers, hp.num_heads, pre_norm=pre_norm, head_dim=head_dim)
    spec = specs.TransformerSpec(encoder, decoder)
    # [P, D]: row i is added at position i (0-based) of the encoder and the decoder.
    positions = (_numpy(model.position.table) if model.position_encoding == "learned"
                 else np.asarray(timing_signal(max_positions, model.d_model), np.float32))
    encoder.position_encodings.encodings = decoder.position_encodings.encodings = positions
    encoder.embeddings[0].weight = _numpy(model.source_embedding.embeddings)  # [V, D]
    decoder.embeddings.weight = _numpy(model.target_embedding.embeddings)  # [V, D]
    for layer_spec, layer in zip(encoder.layer + decoder.layer, model.encoder_layers + model.decoder_layers):
        _set_attention(layer_spec.self_attention, layer.self_attention, layer.self_attention_residual.norm, True)
        if isinstance(layer, DecoderLayer):
            _set_attention(layer_spec.attention, layer.cross_attention, layer.cross_attention_residual.norm, False)
        _linear(layer_spec.ffn.linear_0, layer.ffn.hidden)
        _linear(layer_spec.ffn.linear_1, layer.ffn.output_proj)
        _set_norm(layer_spec.ffn.layer_norm, layer.ffn_residual.norm)
    decoder.projection.weight = _numpy(model.target_embedding.embeddings)  # [V, D] as [out, in]; aliased when saved
    if pre_norm:
        _set_norm(encoder.layer_norm, model.encoder_norm)
        _set_norm(decoder.layer_norm, model.decoder_norm)
    config = spec.config
    config.unk_token, config.eos_token = pieces[unk_id], pieces[EOS_ID]
    config.bos_token = config.decoder_start_token = pieces[PAD_ID]
    config.add_source_eos = True
    config.layer_norm_epsilon = hp.layer_norm_epsilon
    source_pieces = pieces if source_pieces is None else source_pieces
    if config.unk_token not in source_pieces:
        raise UserError(f"the source vocabulary has no {config.unk_token!r} piece, the target's unknown token, and "
                        "CTranslate2 takes one unknown token for both; adopt vocabularies that name it alike")
    spec.register_source_vocabulary(source_pieces)
    spec.register_target_vocabulary(pieces)
    return spec


def _numpy(variable) -> np.ndarray:
    return np.asarray(variable.numpy(), np.float32)


def _linear(spec, *denses) -> None:
    """One CTranslate2 linear layer of Dense layers on the same inputs, their outputs stacked."""
    spec.weight = np.concatenate([_numpy(d.kernel).T for d in denses], axis=0)  # Keras [in, out] -> [out, in]
    spec.bias = np.concatenate([_numpy(d.bias) for d in denses], axis=0)


def _set_norm(spec, norm) -> None:
    spec.gamma, spec.beta = _numpy(norm.gamma), _numpy(norm.beta)


def _set_attention(spec, attention, norm, self_attention: bool) -> None:
    """Self-attention fuses Q, K, V into linear[0]; encoder-decoder attention has Q in linear[0], K and V in [1]."""
    query, key, value = (attention.query_proj, attention.key_proj, attention.value_proj)
    fused = [[query, key, value]] if self_attention else [[query], [key, value]]
    for linear_spec, denses in zip(spec.linear, fused + [[attention.output_proj]]):
        _linear(linear_spec, *denses)
    _set_norm(spec.layer_norm, norm)  # before the sub-layer under pre-norm, after the residual add under post-norm


def write_ctranslate2(run: OpenedRun, directory: str, quantization: str = "none") -> None:
    """Fills the empty, existing `directory` with the CTranslate2 model of `run` (see the module doc); its
    settings checked by export_ctranslate2."""
    ctranslate2 = require_ctranslate2()
    vocabularies = text_vocabularies(run.problem, run.problem_name)
    codec = SentencePieceCodec(vocabularies.target.model)
    pieces = codec.pieces
    source_pieces = SentencePieceCodec(vocabularies.source.model).pieces if vocabularies.separate else None
    spec = transformer_spec(run.model, run.spec.hparams, pieces, unk_id=codec.unk_id, source_pieces=source_pieces)
    positions = int(spec.encoder.position_encodings.encodings.shape[0])

    class _Converter(ctranslate2.converters.Converter):
        def _load(self):
            return spec

    # convert() wants to create its output directory itself: a subdirectory, moved up once saved.
    with tempfile.TemporaryDirectory(dir=directory) as scratch:
        converted = _Converter().convert(os.path.join(scratch, "model"),
                                         quantization=None if quantization == "none" else quantization)
        for name in os.listdir(converted):
            shutil.move(os.path.join(converted, name), os.path.join(directory, name))
    export_info = {"format": CTRANSLATE2, "checkpoint": os.path.abspath(run.checkpoint), "quantization": quantization,
                   "max_positions": positions, **problem_info(run.problem)}
    # As the SavedModel's: the run's hparams.json with the decode settings the export was asked for.
    write_export_files(directory, run, vocabularies, export_info)
    atomic_write_text(os.path.join(directory, "README.txt"), README_TEXT.format(
        quantization=quantization if quantization != "none" else "float32", start=pieces[PAD_ID],
        source_sp=('sentencepiece.SentencePieceProcessor(model_file="this/directory/source_vocab.model")'
                   if vocabularies.separate else "sp"),
        max_positions=positions, **dataclasses.asdict(run.decode_hparams)))


def check_quantization(quantization: str) -> None:
    if quantization not in QUANTIZATIONS:
        raise UserError(f"`quantization` must be one of {', '.join(QUANTIZATIONS)}; got {quantization!r}")


def export_ctranslate2(run: OpenedRun, export_dir: str, model_name: str | None = None,
                       quantization: str = "none") -> str:
    """Exports `run` for CTranslate2 as <export_dir>/<model_name>/<version>/; returns that directory.

    The same layout as the SavedModel export, published the same way: built
    under a temporary name, renamed into place once complete.

    Raises:
      UserError: ctranslate2 missing, a bad quantization, a model CTranslate2 cannot
        represent, a problem without a SentencePiece vocabulary, an unwritable
        export_dir; all found before anything is written. Or a disk that cannot take
        the export (exporter.publish): nothing is published then.
    """
    require_ctranslate2()
    if not export_dir:
        raise UserError("`export_dir` is required (the directory to write the model's versions in)")
    check_quantization(quantization)
    check_representable(run.spec.hparams)
    text_vocabularies(run.problem, run.problem_name)
    name = model_name or run.problem_name
    layout.check_model_name(name)
    model_dir = layout.make_model_dir(export_dir, name)
    return publish(model_dir, export_dir, lambda path: write_ctranslate2(run, path, quantization))


def export_requested(request: ExportRequest, log: Callable[[str], None]) -> str:
    """exporter.export_run's CTranslate2 half: request's settings checked, its run opened and exported.

    Raises:
      UserError: as export_ctranslate2, or a setting only a SavedModel takes.
    """
    # A CTranslate2 model reads sources up to its position table and holds float32 (or quantized) weights.
    if request.max_input_length is not None:
        raise UserError("`max_input_length` is for `export_format`=saved_model; a CTranslate2 export takes "
                        f"sources of up to {MAX_POSITIONS - 1} tokens (its position table)")
    require_ctranslate2()  # before the run is opened, its model restored
    quantization = request.quantization or "none"
    check_quantization(quantization)
    run = open_run(request.run, engine=EXPORTING)
    log(f"converting {run.checkpoint} for CTranslate2 ({quantization} weights)")
    return export_ctranslate2(run, request.export_dir, request.model_name, quantization)
