"""What parsing adds to the generic Transformer and search: decoder-input features (importing this package
registers them) and the tree constraint."""
from t2t_lite.parsing import features  # noqa: F401  (registers word_pointer and open_phrases)
