"""Fast decoding of a trained Transformer: encode once, then one cached step per output position."""
import tensorflow as tf

from t2t_lite.config import DecodeHParams
from t2t_lite.decoding.beam_search import SplitState, beam_search
from t2t_lite.decoding.sampling import greedy_decode

INPUTS_SIGNATURE = [tf.TensorSpec([None, None], tf.int32)]


class Decoder:
    """Beam search (or greedy, beam 1) over a Transformer's cached `decode`.

    Every sentence gets its own maximum length, input length + extra_length
    (paper 6.1), so its output never depends on the batch it is decoded in.

    Args:
      model: a built Transformer.
      hparams: DecodeHParams (beam_size, alpha, extra_length).
      forced_length: if set, every output is exactly this many tokens (EOS
        suppressed until then, t2t's force_decode_length), so benchmarks of
        different engines do the same work.
    """

    def __init__(self, model, hparams: DecodeHParams, forced_length: int | None = None):
        self.model, self.hparams, self.forced_length = model, hparams, forced_length
        # No XLA: the self-attention caches grow every step, a shape XLA would recompile for.
        self.decode = tf.function(self._decode, input_signature=INPUTS_SIGNATURE)

    def _decode(self, inputs):
        """inputs int32 [B, T_src] (EOS-terminated, PAD 0) -> (ids int32 [B, K, T], scores float32 [B, K])."""
        hp, model = self.hparams, self.model
        batch = tf.shape(inputs)[0]
        memory, memory_bias = model.encode(inputs, training=False)  # [B, T_src, D], [B, 1, 1, T_src]
        input_lengths = tf.reduce_sum(tf.cast(tf.not_equal(inputs, 0), tf.int32), axis=1)  # [B]
        max_lengths = input_lengths + hp.extra_length  # [B]
        min_lengths = None
        if self.forced_length is not None:
            max_lengths = min_lengths = tf.fill([batch], self.forced_length)  # [B]
        # Encoder keys/values are projected once and shared by a sentence's beams (never repeated or
        # reordered). The self-attention caches grow by one position per step; they keep a slot per
        # beam, and only the small per-beam ancestry that says which slot holds what follows the beams.
        memory_kv = model.memory_cache(memory)  # per layer [B, H, T_src, Dk|Dv]
        cache = model.initial_cache(batch, hp.beam_size, memory.dtype)  # per layer [B, H, 0, K, Dk|Dv]
        # The weights in the layout a step multiplies fastest on this CPU (measured once per
        # process), made once, not every step.
        layout = model.decoding_layout(memory.dtype)
        output_weights = model.target_embedding.output_weights(memory.dtype, layout)  # [V, D] or [D, V]
        kernels = model.decoding_kernels(memory.dtype, layout)  # every decoder Dense kernel

        def symbols_to_logits(ids, step, cache):
            # ids [N, 1] -> logits [N, V]; N = B * beams, beam-major within a sentence.
            logits, cache = model.decode(ids, memory_kv, memory_bias, cache=cache, decode_index=step,
                                         output_weights=output_weights, kernels=kernels)
            return logits[:, 0], cache

        if hp.beam_size == 1:
            ids, scores = greedy_decode(symbols_to_logits, cache, batch, max_lengths, min_decode_lengths=min_lengths)
            return ids[:, None], scores[:, None]  # [B, 1, T], [B, 1]

        def split(cache):
            per_sentence = dict(cache)
            return SplitState(per_beam=per_sentence.pop("ancestry"), per_sentence=per_sentence)

        def beam_symbols_to_logits(ids, step, state):
            logits, cache = symbols_to_logits(ids, step, {"ancestry": state.per_beam, **state.per_sentence})
            return logits, split(cache)

        return beam_search(beam_symbols_to_logits, split(cache), batch, hp.beam_size, model.hp.vocab_size,
                           max_lengths, hp.alpha, min_decode_lengths=min_lengths)
