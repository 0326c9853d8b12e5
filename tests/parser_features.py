"""Sets a tiny model's parsing feature tables (t2t_lite/parsing/features.py) without a problem to read them from."""
from t2t_lite.parsing.features import OpenPhrases, WordPointer

BOTH = "decoder_features=word_pointer+open_phrases"  # the override giving a model both
BRACKETS = [([3, 4], 6), ([5], 7)]  # two phrase labels, one with two opening tokens


def set_tables(model, word_starts=range(2, 23, 2)):
    """The model's feature tables: `word_starts` (even ids by default) begin words, BRACKETS open and close
    phrases; each only for a feature the model has."""
    if "word_pointer" in model.decoder_features:
        WordPointer.set_word_starts(model, word_starts)
    if "open_phrases" in model.decoder_features:
        OpenPhrases.set_phrase_brackets(model, BRACKETS)
    return model
