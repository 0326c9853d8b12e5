"""Registered problems; importing this package registers them."""
from t2t_lite.problems import algorithmic, multi30k, ptb_sample, translate, wsj_parsing  # noqa: F401
