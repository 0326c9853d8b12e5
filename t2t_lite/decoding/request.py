"""A decode request: every setting of one decode, checked once when it is made and resolved once against what
decodes it.

Every way in builds one: t2t-lite-decoder and t2t-lite-scorer, `Translator`, the exporter, the trainer's
samples and dev scores. The rules about each setting are in `DecodeRequest.__post_init__`, the rules about
what an engine can do in `DecodeRequest.resolve`; nothing else checks them, and every engine decodes with
the `ResolvedDecode` it is given as it is.

Importing this module imports no TensorFlow: a CTranslate2 deployment resolves requests too.
"""
import dataclasses

from t2t_lite.config import DecodeHParams, check_least
from t2t_lite.errors import UserError
from t2t_lite.precision import AUTO, check_setting

# The settings of a search, as DecodeHParams names them; None in a request keeps the engine's.
SEARCH_SETTINGS = ("beam_size", "alpha", "extra_length", "batch_size", "constrained_decoding")


@dataclasses.dataclass(frozen=True)
class SamplingSettings:
    """Sampling one output per sentence instead of searching (e.g. for back-translation).

    temperature: > 0; each step samples from softmax(logits / temperature).
    top_k: >= 0; sample among each step's top_k tokens only, 0 for all of them.
    seed: the same seed gives the same outputs; None draws one per Decoder.
    """

    temperature: float = 1.0
    top_k: int = 0
    seed: int | None = None

    def __post_init__(self):
        if not self.temperature > 0:
            raise UserError(f"the sampling `temperature` must be above 0, got {self.temperature}")
        if self.top_k < 0:
            raise UserError(f"the sampling `top_k` must be at least 0 (0 samples from every token), got {self.top_k}")


@dataclasses.dataclass(frozen=True)
class Engine:
    """What decodes a request, as far as resolving it goes: its own settings and what it can change."""

    # For messages: "the run", "a SavedModel", "a CTranslate2 export", "scoring".
    name: str
    # Its decode settings, what a request that gives none gets.
    settings: DecodeHParams = DecodeHParams()
    # Settings it was built with and cannot change (a SavedModel's search); another value is refused.
    fixed: tuple[str, ...] = ()
    # Another way to decode with another value of a fixed setting, for the message: ", or ...".
    fixed_hint: str = ""
    samples: bool = True
    constrains: bool = True
    # Whether it searches at all (scoring takes the targets it is given).
    searches: bool = True
    # The precision it computes in, fixed (a SavedModel's); None computes in the request's.
    precision: str | None = None
    # False for an engine with a precision setting of its own (CTranslate2's compute_type): any but AUTO is refused.
    takes_precision: bool = True
    precision_hint: str = ""


@dataclasses.dataclass(frozen=True)
class ResolvedDecode:
    """A request resolved against its engine (made only by `DecodeRequest.resolve`): what is decoded with."""

    hparams: DecodeHParams
    nbest: int
    sampling: SamplingSettings | None
    # One of precision.PRECISIONS, or AUTO where the engine resolves it when it opens its model (a run).
    mixed_precision: str

    @property
    def beams(self) -> int:
        """Hypotheses searched per sentence: the beam size, 1 when sampling."""
        return 1 if self.sampling is not None else self.hparams.beam_size


@dataclasses.dataclass(frozen=True)
class DecodeRequest:
    """How to decode; None keeps the engine's own setting (a run's hparams.decode, an export's)."""

    beam_size: int | None = None
    # GNMT length penalty exponent.
    alpha: float | None = None
    # Maximum output length = input length + extra_length.
    extra_length: int | None = None
    # Sentences per batch.
    batch_size: int | None = None
    # Hypotheses per sentence, best first; at most the beam size.
    nbest: int = 1
    # Draw one sample per sentence instead of searching.
    sampling: SamplingSettings | None = None
    # Emit only the outputs the problem allows (for parsing, well-formed trees).
    constrained_decoding: bool | None = None
    # One of precision.PRECISIONS, or AUTO (bfloat16 where the CPU multiplies it natively, else float32).
    mixed_precision: str = AUTO

    def __post_init__(self):
        check_least(vars(self))
        check_setting(self.mixed_precision)
        if self.sampling is not None:
            for name in ("beam_size", "alpha"):
                if getattr(self, name) is not None:
                    raise UserError(f"sampling draws one token at a time, without a beam or length penalty; "
                                    f"drop `{name}` or the sampling")
            if self.nbest != 1:
                raise UserError(f"sampling gives one output per sentence; drop `nbest`={self.nbest} or the sampling")

    def resolve(self, engine: Engine) -> ResolvedDecode:
        """The settings `engine` decodes this request with, or a UserError for what it cannot do."""
        given = {name: getattr(self, name) for name in SEARCH_SETTINGS if getattr(self, name) is not None}
        if not engine.searches:
            for name in ("beam_size", "extra_length", "constrained_decoding"):
                if name in given:
                    raise UserError(f"`{name}` is a search setting, and {engine.name} searches nothing; drop `{name}`")
        for name in engine.fixed:
            fixed = getattr(engine.settings, name)
            if name in given and given[name] != fixed:
                raise UserError(f"{engine.name} decodes with the {name} it was exported with ({fixed}); export "
                                f"again with `{name}`={given[name]}{engine.fixed_hint}")
        if self.sampling is not None and not engine.samples:
            raise UserError(f"{engine.name} decodes with beam search; sample from the run")
        if not engine.takes_precision and self.mixed_precision != AUTO:
            raise UserError(f"{engine.name} takes no `mixed_precision`; {engine.precision_hint}")
        if engine.precision is not None and self.mixed_precision not in (AUTO, engine.precision):
            computes = "float32" if engine.precision == "none" else engine.precision
            raise UserError(f"{engine.name} computes in {computes}, not `mixed_precision`={self.mixed_precision}; "
                            f"{engine.precision_hint}")
        resolved = ResolvedDecode(dataclasses.replace(engine.settings, **given), self.nbest, self.sampling,
                                  engine.precision or self.mixed_precision)
        if resolved.hparams.constrained_decoding and not engine.constrains:  # asked for, or the run's own
            raise UserError(f"{engine.name} searches freely: `constrained_decoding` is for runs and SavedModels; "
                            f"set it to false")
        if self.nbest > resolved.beams:
            raise UserError(f"`nbest`={self.nbest} is more than the beam size {resolved.beams}; raise `beam_size` "
                            f"or lower `nbest`")
        return resolved


# A run's Decoder (its settings, hparams.decode, filled in where a run is opened), and its scorer.
RUN = Engine("the run")
SCORING = Engine("scoring", searches=False, samples=False)


def run_decode(settings: DecodeHParams, request: DecodeRequest = DecodeRequest()) -> ResolvedDecode:
    """`request` resolved against a run whose decode settings are `settings` (its hparams.decode)."""
    return request.resolve(dataclasses.replace(RUN, settings=settings))
