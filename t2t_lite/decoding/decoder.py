"""Fast decoding of trained Transformers: encode once, then one cached step per output position."""
from collections.abc import Sequence

import tensorflow as tf

from t2t_lite.config import DecodeHParams
from t2t_lite.decoding.beam_search import beam_search
from t2t_lite.decoding.cached_step import CachedStep
from t2t_lite.decoding.constraints import OutputConstraint, constrain, problem_constraint, shortlist_columns
from t2t_lite.decoding.ensemble import mean_log_probs, shared_vocab_size
from t2t_lite.decoding.request import ResolvedDecode
from t2t_lite.decoding.sampling import SamplingSettings, argmax_choice, greedy_decode, sampled_choice
from t2t_lite.decoding.search_state import SplitState
from t2t_lite.ops.step_matmul import StepMatmulSettings

INPUTS_SIGNATURE = [tf.TensorSpec([None, None], tf.int32)]


def make_decoder(models, problem, decode: ResolvedDecode,
                 step_matmul: StepMatmulSettings = StepMatmulSettings()) -> "Decoder":
    """The Decoder of a resolved request, the one way the library makes one.

    It searches (or samples) as `decode` says, applies `problem`'s output constraint when decode asks for
    constrained decoding, and stops a search once each sentence's `decode.nbest` best are final.

    Args:
      models: a built Transformer, or a sequence of them sharing one vocabulary (an ensemble).
      problem: the problem the models were trained on (None for a request without constrained decoding).
      step_matmul: as for Decoder; the commands pass t2t_lite.environment.step_matmul_settings().
    """
    return Decoder(models, decode.hparams, step_matmul, sampling=decode.sampling,
                   constraint=problem_constraint(problem, decode.hparams), final_beams=decode.nbest)


class Decoder:
    """Beam search (or greedy, beam 1, or sampling) over a Transformer's cached step (cached_step.py), or an ensemble's.

    Every sentence gets its own maximum length, input length + extra_length
    (paper 6.1), so its output never depends on the batch it is decoded in.
    An ensemble's next-token log-probabilities are the mean of its models'
    (ensemble.mean_log_probs); one model's logits are used as they are.

    Args:
      models: a built Transformer, or a sequence of them sharing one vocabulary (an ensemble).
      hparams: DecodeHParams (beam_size, alpha, extra_length).
      step_matmul: how a step multiplies by the decoder's weights on a CPU
        (ops/step_matmul.py); the default chooses both layout and op for this
        machine. The commands build it from T2T_LITE_KERNEL_LAYOUT and
        T2T_LITE_STEP_MATMUL (t2t_lite/environment.py); an export pins a portable one.
      sampling: None searches; SamplingSettings draw one sample per sentence
        instead ([B, 1] outputs, whatever the beam size).
      constraint: None decodes freely; an OutputConstraint (decoding/constraints.py) lets every
        search and sample emit only the outputs it allows, e.g. a parsing problem's well-formed trees.
      final_beams: how many of each sentence's best hypotheses the caller uses (beam_search's
        final_beams): the search stops once they are final. None: all K. 1, for callers that keep
        only the best, gives the same best output and score in far fewer steps.
      shortlist: let a constraint that names each sentence's possible ids (OutputConstraint.columns) have
        the model score only those, for the same outputs in less time (a few dozen ids a step of a
        vocabulary's thousands, for a parser). False scores every id, as a check.
    """

    def __init__(self, models, hparams: DecodeHParams, step_matmul: StepMatmulSettings = StepMatmulSettings(),
                 sampling: SamplingSettings | None = None, constraint: OutputConstraint | None = None,
                 final_beams: int | None = None, shortlist: bool = True):
        self.models = tuple(models) if isinstance(models, Sequence) else (models,)
        self.vocab_size = shared_vocab_size(self.models)
        self.hparams, self.sampling, self.constraint = hparams, sampling, constraint
        self.final_beams, self.shortlist, self.step_matmul = final_beams, shortlist, step_matmul
        # No XLA: the self-attention caches grow every step, a shape XLA would recompile for.
        self.decode = tf.function(self._decode, input_signature=INPUTS_SIGNATURE, autograph=False)

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
          (ids int32 [B, K, T], scores float32 [B, K]); K is 1 when sampling.
        """
        hp = self.hparams
        inputs = tf.convert_to_tensor(inputs, tf.int32)
        batch = tf.shape(inputs)[0]
        beams = 1 if self.sampling is not None else hp.beam_size
        # The constraint's columns per sentence (shortlist_columns), or None: no constraint, or one that gives none,
        # or a decode the shortlist would change: sampling draws from the allowed tokens in their order in a row.
        # Every model of an ensemble scores the same columns (ensemble.mean_log_probs).
        shortlisting = self.shortlist and self.constraint is not None and self.sampling is None
        columns = shortlist_columns(self.constraint, inputs, beams) if shortlisting else None
        steps = [CachedStep(model, inputs, batch, beams, self.step_matmul, columns) for model in self.models]

        def symbols_to_logits(ids, step, state, **shortlist):
            # ids [N, 1] -> logits [N, V]; N = B * beams, beam-major within a sentence. The state holds each
            # model's: its per-beam parts follow the beams, its per-sentence ones stay.
            logits, states = zip(*[model_step(ids, step, SplitState(*parts), **shortlist)
                                   for model_step, parts in zip(steps, zip(*state))])
            return (logits[0] if len(logits) == 1 else mean_log_probs(logits)), _joined(states)

        search_fn, state = symbols_to_logits, _joined([model_step.initial_state for model_step in steps])
        if self.constraint is not None:
            search_fn, state = constrain(search_fn, state, self.constraint, inputs, max_lengths, beams,
                                         shortlist=columns is not None)
        if beams == 1:
            choose = argmax_choice if self.sampling is None else sampled_choice(self.sampling, _row_keys(inputs))
            ids, scores = greedy_decode(search_fn, state, batch, max_lengths, min_decode_lengths=min_lengths,
                                        choose_fn=choose)
            return ids[:, None], scores[:, None]  # [B, 1, T], [B, 1]
        # Every per-sentence tensor (caches, encoder memory, constraint state) is in the state, so the
        # search can drop the sentences that are done from later steps.
        return beam_search(search_fn, state, batch, hp.beam_size, self.vocab_size, max_lengths, hp.alpha,
                           min_decode_lengths=min_lengths, final_beams=self.final_beams, compact_finished=True)


def _joined(states: Sequence[SplitState]) -> SplitState:
    """Several models' SplitStates as one: a tuple of their per-beam parts, a tuple of their per-sentence ones."""
    return SplitState(per_beam=tuple(s.per_beam for s in states), per_sentence=tuple(s.per_sentence for s in states))


def _row_keys(inputs):
    """string [B]: each sentence's source ids without the padding, what sampling keys its draws on."""
    words = tf.strings.as_string(inputs) + " "  # [B, T_src]
    return tf.strings.reduce_join(tf.where(tf.not_equal(inputs, 0), words, ""), axis=1)

