"""Attention heat maps of one sentence, as in the paper's Figures 3-5."""
import os

import numpy as np

from t2t_lite.data.problem import EOS_ID, Problem, strip_ids
from t2t_lite.decoding.decoder import Decoder
from t2t_lite.layers.attention import causal_bias, padding_bias
from t2t_lite.models.transformer import shift_right

KINDS = ("encoder_self", "encoder_decoder", "decoder_self")


def attention_maps(model, inputs: list[int], outputs: list[int]) -> dict[str, np.ndarray]:
    """Teacher-forced attention weights of one sentence pair.

    Args:
      model: a built Transformer.
      inputs: source ids with EOS.
      outputs: target ids with EOS (e.g. the decoder's own output).
    Returns:
      {kind: float32 [L, H, T_q, T_k]} for the three KINDS, L layers, H heads.
    """
    maps, _ = _teacher_forced_pass(model, np.array([inputs], np.int32), np.array([outputs], np.int32))
    return {kind: np.stack([np.asarray(weights, np.float32)[0] for weights in group]) for kind, group in maps.items()}


def _teacher_forced_pass(model, inputs, targets):
    """The model's inference pass, layer by layer, asking each attention for the weights it applies.

    The layers keep no record of their weights, so this walks the stacks as
    Transformer.encode and decode do, giving each attention the input its
    residual block gives it.

    Args:
      inputs: int32 [B, T_src]; targets: int32 [B, T_tgt].
    Returns:
      ({kind: [L] of float32 [B, H, T_q, T_k]}, the decoder's output states [B, T_tgt, D]).
    """
    maps = {kind: [] for kind in KINDS}
    memory_bias = padding_bias(inputs)  # [B, 1, 1, T_src]
    x = model.position(model.source_embedding(inputs))
    for layer in model.encoder_layers:
        query = layer.self_attention_residual.before(x)
        maps["encoder_self"].append(layer.self_attention.attention_weights(query, bias=memory_bias))
        x = layer(x, memory_bias)
    memory = x if model.encoder_norm is None else model.encoder_norm(x)  # [B, T_src, D]
    decoder_inputs = shift_right(targets)
    self_bias = causal_bias(decoder_inputs.shape[1])  # [1, 1, T_tgt, T_tgt]
    x = model.position(model.target_embedding(decoder_inputs))
    for layer in model.decoder_layers:
        query = layer.self_attention_residual.before(x)
        maps["decoder_self"].append(layer.self_attention.attention_weights(query, bias=self_bias))
        h = layer.self_attention(query, bias=self_bias)
        query = layer.cross_attention_residual.before(layer.self_attention_residual(x, h))
        maps["encoder_decoder"].append(layer.cross_attention.attention_weights(query, memory, memory_bias))
        x = layer(x, memory, self_bias, memory_bias)
    return maps, (x if model.decoder_norm is None else model.decoder_norm(x))


def token_labels(codec, ids: list[int]) -> list[str]:
    """One label per id: its text piece in codec (the problem's source_codec or target_codec), or <eos>."""
    return ["<eos>" if i == EOS_ID else codec.decode([i]) for i in ids]


def visualize_sentence(problem: Problem, model, decoder: Decoder, sentence: str, out_dir: str) -> list[str]:
    """Decodes `sentence`, then writes one PNG per attention kind and layer (a panel per head).

    Returns:
      The paths written.
    """
    inputs = problem.encode(sentence) + [EOS_ID]
    ids, _ = decoder.decode(np.array([inputs], np.int32))
    outputs = strip_ids(ids[0, 0].numpy()) + [EOS_ID]
    maps = attention_maps(model, inputs, outputs)
    source, target = token_labels(problem.source_codec, inputs), token_labels(problem.target_codec, outputs)
    ticks = {"encoder_self": (source, source), "encoder_decoder": (target, source), "decoder_self": (target, target)}
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for kind in KINDS:
        for layer, heads in enumerate(maps[kind]):
            path = os.path.join(out_dir, f"{kind}_layer{layer}.png")
            _plot_heads(heads, *ticks[kind], f"{kind.replace('_', ' ')} attention, layer {layer}", path)
            paths.append(path)
    return paths


def _plot_heads(heads: np.ndarray, rows: list[str], cols: list[str], title: str, path: str) -> None:
    """One heat map per head [H, T_q, T_k] in a grid, query tokens down, key tokens across."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    num_heads = heads.shape[0]
    columns = min(num_heads, 4)
    grid_rows = -(-num_heads // columns)
    figure, axes = plt.subplots(grid_rows, columns, figsize=(3.2 * columns, 3.2 * grid_rows), squeeze=False)
    for axis in axes.flat[num_heads:]:  # a grid cell beyond the last head stays blank
        axis.axis("off")
    for head, axis in enumerate(axes.flat[:num_heads]):
        axis.imshow(heads[head], cmap="viridis", vmin=0.0, vmax=1.0)
        axis.set_title(f"head {head}", fontsize=8)
        axis.set_xticks(range(len(cols)), cols, rotation=90, fontsize=6)
        axis.set_yticks(range(len(rows)), rows, fontsize=6)
    figure.suptitle(title)
    figure.tight_layout()
    tmp_path = path + ".incomplete.png"
    figure.savefig(tmp_path, dpi=110)
    plt.close(figure)
    os.replace(tmp_path, path)
