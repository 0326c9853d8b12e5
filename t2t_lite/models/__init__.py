"""Models by name; importing this package registers the bundled ones."""
import numpy as np

from t2t_lite import registry
from t2t_lite.config import HParams
from t2t_lite.models import transformer  # noqa: F401  (registers "transformer")


def build_model(hparams: HParams):
    """Instantiates hparams.model_name and creates its variables with a one-token dummy batch."""
    model = registry.models.get(hparams.model_name)(hparams.model)
    dummy = np.ones((1, 2), np.int32)  # length 2: a 1-key softmax makes Keras warn
    model({"inputs": dummy, "targets": dummy}, training=False)
    return model
