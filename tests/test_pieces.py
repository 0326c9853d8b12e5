"""The TF-free SentencePiece codec gives Vocabulary's (the tf-text op's) ids and text for the same model."""
import random

import pytest
import tensorflow as tf

from t2t_lite.data.ids import EOS_ID, PAD_ID
from t2t_lite.data.pieces import SentencePieceCodec
from t2t_lite.data.vocabulary import Vocabulary, train_sentencepiece
from t2t_lite.errors import UserError
from shared_data import require_shared

# What real text may hold beyond Multi30k's sentences: spaces the exact round trip keeps, bytes outside the
# vocabulary, a non-breaking space (no NFKC), a tab.
ODD_LINES = ["  two  spaces ", " leading", "emoji 🐶 and 日本語", "\u00a0nbsp\u00a0", "tab\tinside", "Ünïcödé ẞ"]


def multi30k(split: str, language: str, count: int | None = None) -> list[str]:
    with open(require_shared(f"multi30k/raw/{split}.{language}"), encoding="utf-8") as f:
        return f.read().splitlines()[:count]


@pytest.fixture(scope="module", params=["bpe", "unigram"])
def model(request) -> bytes:
    """A 600-piece model of each type, trained on 3,000 Multi30k pairs (as trained_runs.multi30k_run's vocabulary)."""
    return train_sentencepiece(multi30k("train", "en", 3000) + multi30k("train", "de", 3000), 600, request.param)


def test_codec_encodes_real_text_to_the_vocabularys_ids(model):
    vocabulary, codec = Vocabulary(model), SentencePieceCodec(model)
    lines = multi30k("val", "en") + multi30k("val", "de") + multi30k("val", "fr") + ODD_LINES
    expected = vocabulary.tf_encode(tf.constant(lines)).to_list()  # the tf-text op, all lines in one call
    differing = [line for line, ids in zip(lines, expected) if codec.encode(line) != ids]
    assert differing == [], f"{len(differing)} of {len(lines)} lines encode differently, e.g. {differing[:3]}"
    assert codec.vocab_size == vocabulary.vocab_size


def test_codec_and_vocabulary_decode_any_ids_to_the_tf_text_ops_text(model):
    vocabulary, codec = Vocabulary(model), SentencePieceCodec(model)
    encoded = [vocabulary.encode(line) for line in multi30k("val", "de", 200) + ODD_LINES]
    # Random ids too: byte pieces that are no valid UTF-8, EOS (text stops there) and PAD (skipped) anywhere.
    rng = random.Random(0)
    encoded += [[rng.randrange(vocabulary.vocab_size) for _ in range(rng.randrange(1, 25))] for _ in range(300)]
    encoded += [[PAD_ID] + encoded[0] + [EOS_ID] + encoded[1]]
    # The op, all lists in one call (PAD after each list is skipped): the text serving and exports give.
    op_texts = [text.decode("utf-8") for text in vocabulary.tf_decode(tf.ragged.constant(encoded)).numpy()]
    for name, decode in [("the codec", codec.decode), ("Vocabulary.decode", vocabulary.decode)]:
        differing = [ids for ids, text in zip(encoded, op_texts) if decode(ids) != text]
        assert differing == [], f"{name}: {len(differing)} of {len(encoded)} id lists decode unlike the op, " \
                                f"e.g. {differing[:2]}"


def test_a_file_that_is_no_model_is_one_user_error(tmp_path):
    (tmp_path / "vocab.model").write_bytes(b"not a model")
    with pytest.raises(UserError, match=r"vocab.model is not a SentencePiece model \(11 bytes"):
        SentencePieceCodec.from_file(str(tmp_path / "vocab.model"))
    with pytest.raises(UserError, match="cannot read the vocabulary .*missing.model"):
        SentencePieceCodec.from_file(str(tmp_path / "missing.model"))


def test_word_starts_are_the_pieces_after_a_space_but_not_the_targets_symbols():
    brackets = ("(S", "▁(NP", "▁)NP", "▁)S")
    sentences = ["the cat sat on the mat", "(S (NP the cat )NP sat )S", "a dog ran", "the catalogue"] * 50
    codec = SentencePieceCodec(train_sentencepiece(sentences, 300, user_defined_symbols=brackets))
    starts, pieces = set(codec.word_start_ids()), codec.pieces
    tree = codec.encode("(S (NP the catalogue )NP sat )S")
    assert [pieces[i] for i in tree] == ["(S", "▁(NP", "▁the", "▁cat", "alogue", "▁)NP", "▁sat", "▁)S"]
    assert [i in starts for i in tree] == [False, False, True, True, False, False, True, False]
    # Without a dummy prefix a text's first word has no "▁" (the model counts it by its place).
    assert [i in starts for i in codec.encode("the catalogue sat")] == [False, True, False, True]
