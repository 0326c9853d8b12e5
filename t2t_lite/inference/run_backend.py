"""A run's Decoder as a Backend: beam search, sampling, ensembles and scoring."""
from typing import TYPE_CHECKING

from t2t_lite.decoding.batching import decode_lines
from t2t_lite.decoding.request import Engine, ResolvedDecode

if TYPE_CHECKING:  # imported where a run is opened: a CTranslate2 deployment has no TensorFlow
    from t2t_lite.ops.step_matmul import StepMatmulSettings


class RunBackend:
    """A run's Decoder as a t2t_lite.inference.backend.Backend: beam search, sampling, ensembles and scoring.

    Args:
      run: a t2t_lite.run.OpenedRun (opened with ensemble=True).
      step_matmul: how a decoding step multiplies on a CPU.
    """

    def __init__(self, run, step_matmul: "StepMatmulSettings"):
        from t2t_lite.decoding.constraints import problem_constraint

        self.run, self.step_matmul = run, step_matmul
        # Opened: its models compute in the precision they were restored in.
        self.engine = Engine("the run", run.decode_hparams, precision=run.mixed_precision,
                             precision_hint="open the run again in another `mixed_precision`")
        problem_constraint(run.problem, run.decode_hparams)  # refuses a constraint the problem lacks, as it opens
        self._decoders = {}

    def decoder(self, decode: ResolvedDecode):
        """The Decoder for these settings: a search stops once each sentence's nbest best are final."""
        from t2t_lite.decoding.decoder import make_decoder

        key = (decode.hparams, decode.sampling, decode.nbest)
        if key not in self._decoders:
            # One per setting: each traces its own graph once, then decodes batch after batch.
            self._decoders[key] = make_decoder(list(self.run.models), self.run.problem, decode, self.step_matmul)
        return self._decoders[key]

    def hypotheses(self, sentences, decode: ResolvedDecode, first_line=1, **decoding):
        return decode_lines(self.run.problem, self.decoder(decode).decode, sentences, decode.hparams.batch_size,
                            decode.nbest, first_line, **decoding)

    def score(self, sources, targets, progress):
        from t2t_lite.decoding.scoring import score_pairs

        return score_pairs(self.run.problem, list(self.run.models), sources, targets,
                           self.run.decode_hparams.batch_size, self.run.decode_hparams.alpha, progress=progress)
