"""How datagen makes each vocabulary it is asked for (vocabulary_sides.py): the options resolved into one
way per vocabulary, each plan's training sample, and its model copied, adopted or trained."""
import dataclasses
import os
import time

from t2t_lite.data.pieces import SentencePieceCodec
from t2t_lite.data.vocabulary import SentenceSample, train_sentencepiece
from t2t_lite.data.vocabulary_file import adopted_sentencepiece, tokenizer_disagreement
from t2t_lite.data.vocabulary_sides import SHARED, SIDE_OPTIONS, TARGET, VocabularyPlan, is_separate, plans_of
from t2t_lite.data.vocabulary_source import has_two_vocabularies, vocabulary_from
from t2t_lite.errors import UserError

# Training sentences an adopted vocabulary (`vocab_file`) is checked to round-trip on.
ROUND_TRIP_SAMPLE = 1000


def resolve_vocabularies(opts, default_size: int) -> dict:
    """The vocabulary fields of a DatagenOptions resolved: one way to make each vocabulary, paths absolute, every
    size known (a given model's own, else default_size). A shared `vocab_from` naming a place with two
    vocabularies copies both.

    Raises:
      UserError: options that contradict each other, a size below 1, or a given model that cannot be read.
    """
    if is_separate(opts):
        shared = [name for name in SIDE_OPTIONS[SHARED] if getattr(opts, name) is not None]
        if shared:
            raise UserError(f"`source_vocab_*` and `target_vocab_*` give each side its own vocabulary; drop "
                            f"`{shared[0]}` (the shared vocabulary's)")
    elif opts.vocab_from and has_two_vocabularies(opts.vocab_from):
        opts = dataclasses.replace(opts, vocab_from=None, source_vocab_from=opts.vocab_from,
                                   target_vocab_from=opts.vocab_from)
    resolved = {}
    for plan in plans_of(opts):
        size_name, file_name, from_name = SIDE_OPTIONS[plan.side]
        if plan.file and plan.copy_from:
            raise UserError(f"`{from_name}` and `{file_name}` each give the {side_name(plan.side)}; pass one of them")
        if plan.size is not None and (plan.file or plan.copy_from):
            raise UserError(f"`{from_name if plan.copy_from else file_name}` gives the {side_name(plan.side)} "
                            f"and its size; drop `{size_name}`")
        if plan.size is not None and plan.size < 1:
            raise UserError(f"`{size_name}` must be at least 1, got {plan.size}")
        if plan.file or plan.copy_from:
            path = os.path.abspath(os.path.expanduser(plan.file or plan.copy_from))
            plan = dataclasses.replace(plan, file=path if plan.file else None,
                                       copy_from=path if plan.copy_from else None)
            plan = dataclasses.replace(plan, size=SentencePieceCodec(given_model(plan)[0]).vocab_size)
        resolved.update(dataclasses.replace(plan, size=plan.size or default_size).options())
    return resolved


def plan_sample(plan: VocabularyPlan, size: int) -> SentenceSample | None:
    """What a plan samples of the training text: `size` sentences to train on, a small sample to check an adopted
    model's round trip on, or nothing for a copied one (checked where it was made)."""
    return None if plan.copy_from else SentenceSample(ROUND_TRIP_SAMPLE) if plan.file else SentenceSample(size)


def make_model(plan: VocabularyPlan, sample: SentenceSample | None, model_type: str,
               user_defined_symbols: tuple[str, ...], log) -> bytes:
    """The serialized SentencePiece model `plan` makes (copied, adopted or trained on `sample`), with its lines."""
    what = side_name(plan.side)
    if plan.trained:
        log(f"training a {model_type} {what} of {plan.size} on "
            f"{len(sample.sentences):,} of {sample.seen:,} training sentences")
        start = time.monotonic()
        model = train_sentencepiece(sample.sentences, plan.size, model_type, user_defined_symbols)
        log(f"{what} trained in {time.monotonic() - start:.1f}s")
        return model
    model, notes = given_model(plan)
    log(f"{what}: {plan.size} pieces from {plan.file or plan.copy_from}"
        + (" (rewritten with PAD 0 and EOS 1; the original model's ids do not apply)" if plan.file else ""))
    disagreement = tokenizer_disagreement(model, sample.sentences) if plan.file else None
    for note in notes + ([disagreement] if disagreement else []):
        log(f"warning: {note}" if plan.side == SHARED else f"warning: {what}: {note}")
    return model


def side_name(side: str) -> str:
    return "vocabulary" if side == SHARED else f"{side} vocabulary"


def given_model(plan: VocabularyPlan) -> tuple[bytes, list[str]]:
    """The model a plan adopts (its `file`, with PAD 0 and EOS 1, and the round-trip warnings) or copies."""
    if plan.file:
        return adopted_sentencepiece(plan.file)
    return vocabulary_from(plan.copy_from, TARGET if plan.side == SHARED else plan.side)[0], []
