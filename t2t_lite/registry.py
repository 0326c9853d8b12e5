"""Registries of models, hparams sets and problems, looked up by name."""
import difflib
import importlib
from typing import Callable, Generic, TypeVar

from t2t_lite.errors import UserError

T = TypeVar("T")


class Registry(Generic[T]):
    """A name -> object map that rejects duplicates and suggests close matches.

    Args:
      kind: what is registered ("model", "hparams set", "problem"); used in errors.
      bundled: the package whose import registers t2t-lite's own entries. It is imported at the first
        lookup, so a library user needs no import for its side effect, and t2t_lite's modules never
        import problems/ or hparams/, which build on them.
    """

    def __init__(self, kind: str, bundled: str | None = None):
        self.kind, self._bundled = kind, bundled
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator registering its target under `name`."""

        def decorate(entry: T) -> T:
            if name in self._entries:
                # Two usr dirs in one process, or a usr dir and t2t-lite, can ask for one name.
                first = getattr(self._entries[name], "__module__", None) or "another module"
                raise UserError(f"{self.kind} {name!r} is already registered, by {first}; register yours under "
                                f"another name")
            self._entries[name] = entry
            return entry

        return decorate

    def get(self, name: str) -> T:
        """Returns the entry called `name`; raises UserError listing close matches."""
        if name in self:  # which loads the bundled entries first
            return self._entries[name]
        close = difflib.get_close_matches(name, self._entries, n=5, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(self.names())}"
        raise UserError(f"unknown {self.kind} {name!r}; {hint}")

    def names(self) -> list[str]:
        """All registered names, sorted."""
        self._load_bundled()
        return sorted(self._entries)

    def items(self) -> list[tuple[str, T]]:
        """Every (name, entry), in the order they were registered."""
        self._load_bundled()
        return list(self._entries.items())

    def __contains__(self, name: str) -> bool:
        self._load_bundled()
        return name in self._entries  # a dict lookup: get() asks this on every lookup

    def _load_bundled(self) -> None:
        if self._bundled is not None:
            bundled, self._bundled = self._bundled, None
            importlib.import_module(bundled)


models: Registry = Registry("model", bundled="t2t_lite.models")
hparams_sets: Registry = Registry("hparams set", bundled="t2t_lite.hparams")
problems: Registry = Registry("problem", bundled="t2t_lite.problems")
# What a decoder input is told beside its token (t2t_lite.models.decoder_features); a parser's are bundled.
decoder_features: Registry = Registry("decoder feature", bundled="t2t_lite.parsing.features")
# ModelHParams booleans that decoder features replaced, each the name of the feature it turned on, in the order the
# old models added them (config.translate_former_features). A parser's are bundled apart from its features, so that
# reading an old hparams.json imports no Keras.
former_feature_settings: Registry = Registry("former decoder-feature setting",
                                             bundled="t2t_lite.parsing.former_settings")
