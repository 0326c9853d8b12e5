"""One vocabulary or two: how datagen's vocabulary options read side by side, and where each model lives.

The paper shares one SentencePiece model between source and target (SHARED). With two (any `source_vocab_*`
or `target_vocab_*` option), the target's model is vocab.model, where the shared one lives, so whatever
decodes outputs reads the same file either way; the source's is source_vocab.model. problem_config.json keeps
each as an entry ({"file", "model_type", "size", "sha256"}): "vocab" (the shared or the target's) and
"source_vocab" (only with two). Exports ship the same two files under the same names.

Each vocabulary is made one of three ways: trained (of a size), adopted from a SentencePiece model trained
elsewhere (`file`, vocabulary_file.py) or copied from prepared data, a run or an export (`from`,
vocabulary_source.py).
"""
import dataclasses
import hashlib

SHARED, SOURCE, TARGET = "shared", "source", "target"
FILES = {SHARED: "vocab.model", TARGET: "vocab.model", SOURCE: "source_vocab.model"}
CONFIG_KEYS = {SHARED: "vocab", TARGET: "vocab", SOURCE: "source_vocab"}
# The option names of each side: (its size, its adopted file, the vocabulary it copies).
SIDE_OPTIONS = {SHARED: ("vocab_size", "vocab_file", "vocab_from"),
                SOURCE: ("source_vocab_size", "source_vocab_file", "source_vocab_from"),
                TARGET: ("target_vocab_size", "target_vocab_file", "target_vocab_from")}


@dataclasses.dataclass(frozen=True)
class VocabularyPlan:
    """How one vocabulary (the shared one, or one side's) is made; at most one of file and copy_from is set."""

    side: str
    # V of a trained one; the adopted or copied model's size once options are resolved.
    size: int | None
    file: str | None = None
    copy_from: str | None = None

    @property
    def trained(self) -> bool:
        return not (self.file or self.copy_from)

    def options(self) -> dict:
        """The DatagenOptions fields this plan stands for."""
        return dict(zip(SIDE_OPTIONS[self.side], (self.size, self.file, self.copy_from)))


def plans_of(options) -> list[VocabularyPlan]:
    """The vocabularies a DatagenOptions asks for: [shared], or [source, target] when any side option is set."""
    sides = (SOURCE, TARGET) if is_separate(options) else (SHARED,)
    return [VocabularyPlan(side, *(getattr(options, name) for name in SIDE_OPTIONS[side])) for side in sides]


def is_separate(options) -> bool:
    """Whether a DatagenOptions asks for a vocabulary per side."""
    return any(getattr(options, name) is not None for side in (SOURCE, TARGET) for name in SIDE_OPTIONS[side])


def config_entry(side: str, size: int, model: bytes) -> dict:
    # The type is read from the model: one taken with vocab_file or vocab_from need not be the problem's.
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    model_type = model_pb2.TrainerSpec.ModelType.Name(model_pb2.ModelProto.FromString(model).trainer_spec.model_type)
    return {"file": FILES[side], "model_type": model_type.lower(), "size": size,
            "sha256": hashlib.sha256(model).hexdigest()}


def fingerprint(config: dict) -> str:
    """What tells a prepared data's vocabularies from others of the same sizes: the shared model's sha256, or
    "source <sha256> target <sha256>" (so a run recording one is never taken for the other)."""
    if CONFIG_KEYS[SOURCE] in config:
        return f"source {config[CONFIG_KEYS[SOURCE]]['sha256']} target {config[CONFIG_KEYS[TARGET]]['sha256']}"
    return config[CONFIG_KEYS[SHARED]]["sha256"]
