"""The ModelHParams booleans that the parser's decoder features (features.py) replaced, registered in
registry.former_feature_settings.

Runs, .keras files and exports made when `word_pointer=true` and `open_phrases=true` were model settings
still open, and those overrides still work (config.translate_former_features). Kept apart from features.py,
which needs Keras, because a CTranslate2 deployment reads an export's hparams.json without TensorFlow.
"""
from t2t_lite.registry import former_feature_settings

# {old boolean: the decoder feature it turned on}, in the order the model added them.
FORMER_SETTINGS = {"word_pointer": "word_pointer", "open_phrases": "open_phrases"}
for setting, feature in FORMER_SETTINGS.items():
    former_feature_settings.register(setting)(feature)
