"""Fast decoding of a trained Transformer: encode once, then one cached step per output position."""
import tensorflow as tf

from t2t_lite.config import DecodeHParams
from t2t_lite.decoding.beam_search import SplitState, beam_search
from t2t_lite.decoding.sampling import greedy_decode
from t2t_lite.ops.kernel_layout import OUT_IN
from t2t_lite.ops.step_matmul import StepKernels, StepMatmulSettings

INPUTS_SIGNATURE = [tf.TensorSpec([None, None], tf.int32)]


class Decoder:
    """Beam search (or greedy, beam 1) over a Transformer's cached `decode`.

    Every sentence gets its own maximum length, input length + extra_length
    (paper 6.1), so its output never depends on the batch it is decoded in.

    Args:
      model: a built Transformer.
      hparams: DecodeHParams (beam_size, alpha, extra_length).
      step_matmul: how a step multiplies by the decoder's weights on a CPU
        (ops/step_matmul.py); None reads T2T_LITE_KERNEL_LAYOUT and
        T2T_LITE_STEP_MATMUL, each "auto" when unset.
    """

    def __init__(self, model, hparams: DecodeHParams, step_matmul: StepMatmulSettings | None = None):
        self.model, self.hparams = model, hparams
        self.step_matmul = StepMatmulSettings.from_environment() if step_matmul is None else step_matmul
        # No XLA: the self-attention caches grow every step, a shape XLA would recompile for.
        self.decode = tf.function(self._decode, input_signature=INPUTS_SIGNATURE)

    def _decode(self, inputs):
        """inputs int32 [B, T_src] (EOS-terminated, PAD 0) -> (ids int32 [B, K, T], scores float32 [B, K])."""
        input_lengths = tf.reduce_sum(tf.cast(tf.not_equal(inputs, 0), tf.int32), axis=1)  # [B]
        return self.search(inputs, input_lengths + self.hparams.extra_length)

    def search(self, inputs, max_lengths, min_lengths=None):
        """`decode` with explicit per-sentence output lengths (counting the EOS), e.g. a forced length.

        Runs eagerly too, slowly: wrap it in a tf.function to decode many batches.

        Args:
          inputs: int32 [B, T_src], EOS-terminated, PAD 0.
          max_lengths: int32 [B].
          min_lengths: int32 [B] or None; EOS is impossible before this length.
        Returns:
          (ids int32 [B, K, T], scores float32 [B, K]).
        """
        hp, model = self.hparams, self.model
        batch = tf.shape(inputs)[0]
        memory, memory_bias = model.encode(inputs, training=False)  # [B, T_src, D], [B, 1, 1, T_src]
        # Encoder keys/values are projected once and shared by a sentence's beams (never repeated or
        # reordered). The self-attention caches grow by one position per step; they keep a slot per
        # beam, and only the small per-beam ancestry that says which slot holds what follows the beams.
        memory_kv = model.memory_cache(memory)  # per layer [B, H, T_src, Dk|Dv]
        cache = model.initial_cache(batch, hp.beam_size, memory.dtype)  # per layer [B, H, 0, K, Dk|Dv]
        # The steps' weights in the layout and op they multiply fastest with here, made once, not every step.
        with step_kernels(model, memory.dtype, self.step_matmul).scope():

            def symbols_to_logits(ids, step, cache):
                # ids [N, 1] -> logits [N, V]; N = B * beams, beam-major within a sentence.
                logits, cache = model.decode(ids, memory_kv, memory_bias, cache=cache, decode_index=step)
                return logits[:, 0], cache

            if hp.beam_size == 1:
                ids, scores = greedy_decode(symbols_to_logits, cache, batch, max_lengths,
                                            min_decode_lengths=min_lengths)
                return ids[:, None], scores[:, None]  # [B, 1, T], [B, 1]

            def split(cache):
                per_sentence = dict(cache)
                return SplitState(per_beam=per_sentence.pop("ancestry"), per_sentence=per_sentence)

            def beam_symbols_to_logits(ids, step, state):
                logits, cache = symbols_to_logits(ids, step, {"ancestry": state.per_beam, **state.per_sentence})
                return logits, split(cache)

            return beam_search(beam_symbols_to_logits, split(cache), batch, hp.beam_size, model.vocab_size,
                               max_lengths, hp.alpha, min_decode_lengths=min_lengths)


def step_kernels(model, dtype, settings: StepMatmulSettings) -> StepKernels:
    """A Transformer's decoder Dense kernels and output projection, prepared for a decoding step's products.

    Args:
      model: a built Transformer.
      dtype: the compute dtype.
      settings: the layout and op choices.
    """
    # One layout for every weight, chosen at the output projection: the step's largest product.
    layout = settings.resolved_layout(model.d_model, model.vocab_size, dtype)
    kernels = StepKernels(dtype, layout, settings)
    kernels.add_dense_layers(model.decoder_layers)
    embedding = model.target_embedding
    kernels.add(embedding, embedding.embeddings, stored_as=OUT_IN)  # [V, D]: logits = x E^T
    return kernels
