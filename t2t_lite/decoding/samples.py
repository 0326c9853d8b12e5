"""Decoding a few dev examples to show what a trained model does."""
import dataclasses

import numpy as np

from t2t_lite.data.problem import Problem, strip_ids
from t2t_lite.decoding.decoder import Decoder


@dataclasses.dataclass(frozen=True)
class Sample:
    source: str
    output: str
    reference: str

    @property
    def exact(self) -> bool:
        return self.output == self.reference


def decode_samples(problem: Problem, decoder: Decoder, count: int, batch_size: int, split: str = "dev") -> list[Sample]:
    """Decodes the first `count` examples of `split`, batch_size at a time, with the best beam."""
    samples = []
    for batch in problem.dataset(split).take(count).padded_batch(batch_size):
        ids, _ = decoder.decode(batch["inputs"])  # [B, K, T]
        rows = zip(batch["inputs"].numpy(), ids[:, 0].numpy(), batch["targets"].numpy())
        codecs = (problem.source_codec, problem.target_codec, problem.target_codec)
        samples += [Sample(*(codec.decode(strip_ids(part)) for codec, part in zip(codecs, row))) for row in rows]
    return samples


def exact_match_rate(samples: list[Sample]) -> float:
    return float(np.mean([s.exact for s in samples])) if samples else 0.0
