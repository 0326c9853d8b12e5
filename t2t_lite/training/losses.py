"""How many slices training's loss projects a batch's positions in (Transformer.token_losses)."""
import math

# A slice's [rows, V] float32 logits (and each tensor the loss derives from them) stay under this many bytes.
SLICE_BYTES = 32 * 2**20
MAX_SLICES = 8


def loss_slices(positions: int, vocab_size: int) -> int:
    """How many slices Transformer.token_losses should take `positions` positions in: enough to keep a slice's
    logits under SLICE_BYTES, at most MAX_SLICES. Each slice is written into the graph again, so a small
    vocabulary's one slice traces and runs fastest."""
    return min(MAX_SLICES, max(1, math.ceil(positions * vocab_size * 4 / SLICE_BYTES)))
