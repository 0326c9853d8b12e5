"""Registries of models, hparams sets and problems, looked up by name."""
import difflib
from typing import Callable, Generic, TypeVar

from t2t_lite.errors import UserError

T = TypeVar("T")


class Registry(Generic[T]):
    """A name -> object map that rejects duplicates and suggests close matches.

    Args:
      kind: what is registered ("model", "hparams set", "problem"); used in errors.
    """

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator registering its target under `name`."""

        def decorate(entry: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._entries[name] = entry
            return entry

        return decorate

    def get(self, name: str) -> T:
        """Returns the entry called `name`; raises UserError listing close matches."""
        if name in self._entries:
            return self._entries[name]
        close = difflib.get_close_matches(name, self._entries, n=5, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(self.names())}"
        raise UserError(f"unknown {self.kind} {name!r}; {hint}")

    def names(self) -> list[str]:
        """All registered names, sorted."""
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries


models: Registry = Registry("model")
hparams_sets: Registry = Registry("hparams set")
problems: Registry = Registry("problem")
