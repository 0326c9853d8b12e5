"""Models by name; importing this package registers the bundled ones."""
from t2t_lite import registry
from t2t_lite.config import HParams
from t2t_lite.models import transformer  # noqa: F401  (registers "transformer")


def build_model(hparams: HParams):
    """The model hparams.model_name names, built from hparams.model with its variables created."""
    return registry.models.get(hparams.model_name)(hparams.model)
