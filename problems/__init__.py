"""Registered problems; importing this package registers them."""
from t2t_lite.problems import algorithmic  # noqa: F401
from t2t_lite.problems import translate  # noqa: F401
from t2t_lite.problems import wsj_parsing  # noqa: F401
from t2t_lite.problems import multi30k  # noqa: F401
from t2t_lite.problems import ptb_sample  # noqa: F401
