"""Every backend a Translator decodes through implements t2t_lite.inference.backend.Backend, argument for argument."""
import inspect

import pytest

from t2t_lite.inference.ctranslate2_backend import CTranslate2Export
from t2t_lite.inference.backend import Backend
from t2t_lite.inference.run_backend import RunBackend
from t2t_lite.inference.saved_model_backend import IdBatchBackend


def parameters(method) -> list[tuple[str, object]]:
    """(name, kind) of each parameter: what a caller passing them by position or by name relies on."""
    return [(p.name, p.kind) for p in inspect.signature(method).parameters.values()]


@pytest.mark.parametrize("backend", [RunBackend, IdBatchBackend, CTranslate2Export])
@pytest.mark.parametrize("method", ["hypotheses", "score"])
def test_each_backend_takes_the_interfaces_arguments(backend, method):
    assert parameters(getattr(backend, method)) == parameters(getattr(Backend, method))
