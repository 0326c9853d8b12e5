"""The dev metric during training: the first N dev sentences, decoded as t2t-lite-decoder would, and scored.

Dev loss says how well the model predicts the next reference token; the
metric (BLEU, bracket F1, exact match: Problem.dev_metric) says how good its
beam-search outputs are, which is what the best checkpoint should be chosen on.
"""
import dataclasses
import time

import keras

from t2t_lite.config import DecodeHParams
from t2t_lite.decoding.request import run_decode
from t2t_lite.data.problem import Problem, strip_ids
from t2t_lite.decoding.batching import decode_lines
from t2t_lite.decoding.decoder import make_decoder
from t2t_lite.metrics.bleu import problem_dev_metric


@dataclasses.dataclass(frozen=True)
class DevScore:
    name: str  # e.g. "BLEU"
    value: float  # higher is better
    sentences: int
    seconds: float  # decoding and scoring

    def __str__(self) -> str:
        return f"dev {self.name} {self.value:.2f} ({self.sentences} sentences decoded in {self.seconds:.1f} s)"


class DevScorer:
    """Scores one model, as its weights change during training, on a fixed dev sample.

    The decoder is made once: its compiled search reads the model's variables
    at every call, so later evaluations see the newest weights without retracing.

    Args:
      problem: the run's problem.
      model: the model being trained.
      decode_hparams: the run's beam size, alpha, extra length, batch size and constrained decoding (hparams.decode).
      count: dev sentences to decode, at least 1.
    """

    def __init__(self, problem: Problem, model: keras.Model, decode_hparams: DecodeHParams, count: int):
        # The run's own decode request, as the decoder resolves it.
        # As the decoder will decode (a run whose set asks for constrained decoding is chosen on it), scoring
        # the best output of each sentence (nbest 1).
        self.problem, self.decode = problem, run_decode(decode_hparams)
        # The first `count` dev examples (fewer if the split is smaller), turned back into text by the problem.
        dev = list(problem.dataset("dev").take(count))
        self.sources = [problem.source_codec.decode(strip_ids(example["inputs"].numpy())) for example in dev]
        self.references = [problem.decode(strip_ids(example["targets"].numpy())) for example in dev]
        self.decoder = make_decoder(model, problem, self.decode)

    def score(self, model: keras.Model | None = None) -> DevScore:
        """Decodes the sources (best beam) and scores them with the problem's dev metric: the trained model's
        outputs, or with `model` the same sample's for another model (e.g. the averaged checkpoint's)."""
        decoder = self.decoder if model is None else make_decoder(model, self.problem, self.decode)
        start = time.perf_counter()
        results = decode_lines(self.problem, decoder.decode, self.sources, self.decode.hparams.batch_size)
        outputs = [hypotheses[0].text if hypotheses else "" for hypotheses in results]
        name, value = problem_dev_metric(self.problem, outputs, self.references, self.sources)
        return DevScore(name, float(value), len(self.sources), time.perf_counter() - start)
