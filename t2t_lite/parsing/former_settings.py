"""The ModelHParams booleans that the parser's decoder features (features.py) replaced, registered in
registry.former_feature_settings.

Runs, .keras files and exports made when `word_pointer=true` and `open_phrases=true` were model settings
still open, and those overrides still work (config.translate_former_features). Kept apart from features.py,
which needs Keras, because a CTranslate2 deployment reads an export's hparams.json without TensorFlow.
"""
from t2t_lite.registry import former_feature_settings

# Each old boolean turned on the decoder feature of its own name; in the order the model added them.
for setting in ("word_pointer", "open_phrases"):
    former_feature_settings.register(setting)(setting)
