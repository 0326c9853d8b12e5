"""Your own problems, hparams sets and models, from your own directory (tensor2tensor's --t2t_usr_dir).

A usr dir is a Python package (a directory with __init__.py) or a single
module file. Importing it runs its `@problems.register(...)`,
`@hparams_sets.register(...)` and `@models.register(...)` decorators
(t2t_lite.registry), which add entries exactly as the bundled ones do; see
docs/extending.md.

A training run records the usr dir it was given (or, given none, the one its
problem, set or model came from) in hparams.json, and every command that
opens the run imports that one, whatever else the process imported before:
a notebook can train and open runs of several usr dirs in turn. Imports are
process-wide, so two usr dirs of one module name cannot both be imported in
one process.
"""
import importlib
import os
import sys

from t2t_lite.errors import UserError

# Imports are process-wide, so this is too: absolute path -> module name, in import order.
_imported: dict[str, str] = {}


def import_usr_dir(path: str) -> str:
    """Imports the package or module at `path` (once per process); returns its absolute path.

    Its parent directory goes on sys.path, so the package imports its own modules as
    `from <package> import ...`, as tensor2tensor's usr dirs do.

    Raises:
      UserError: path is missing or not a package or .py file, or its module name is taken by another module.
    """
    location = os.path.abspath(os.path.expanduser(path))
    if location in _imported:
        return location
    parent, name = os.path.split(location)
    if os.path.isfile(location) and name.endswith(".py"):
        name = name.removesuffix(".py")
    elif not os.path.exists(location):
        raise UserError(f"`usr_dir` {path!r} does not exist")
    elif not os.path.exists(os.path.join(location, "__init__.py")):  # a package is a directory with one
        raise UserError(f"`usr_dir` {path!r} is neither a package (a directory with __init__.py) nor a .py file")
    if not name.isidentifier():
        raise UserError(f"`usr_dir` {path!r}: {name!r} is not a Python module name; rename it "
                        f"(letters, digits and underscores)")
    existing = sys.modules.get(name)
    if existing is not None and not _is_at(existing, location):
        other = next((place for place, imported in _imported.items() if imported == name), None)
        if other is not None:
            raise UserError(f"`usr_dir` {path!r}: another usr dir of the module name {name!r}, {other!r}, is "
                            f"already imported in this process, and a process imports one module per name; "
                            f"rename one of the two packages")
        raise UserError(f"`usr_dir` {path!r}: a module named {name!r} is already imported from "
                        f"{_where(existing)}; rename your package")
    if parent not in sys.path:
        sys.path.insert(0, parent)
    try:
        module = importlib.import_module(name)
    except UserError as error:  # e.g. a name registered twice: say which usr dir
        raise UserError(f"`usr_dir` {path!r}: {error}") from None
    # With parent already on sys.path behind another entry, the import can find another module of this name.
    if not _is_at(module, location):
        raise UserError(f"`usr_dir` {path!r}: importing {name!r} finds {_where(module)} first on sys.path; rename "
                        f"your package")
    _imported[location] = name
    return location


def import_for_run(given: str | None, recorded: str | None) -> str | None:
    """Imports the usr dir a run uses: `given` if any (a moved usr dir's new place), else the one it `recorded`.

    Either is imported even when this process imported other usr dirs before; returns its absolute path
    (what the run records), or None when there is neither.

    Raises:
      UserError: the recorded directory is gone, or the usr dir cannot be imported (import_usr_dir).
    """
    if not given and recorded and not os.path.exists(recorded):
        raise UserError(f"this run was trained with `usr_dir` {recorded!r}, which no longer exists; pass "
                        f"`usr_dir`=<where it is now>")
    path = given or recorded
    return import_usr_dir(path) if path else None


def defining(*entries) -> str | None:
    """The imported usr dir whose module defines one of `entries` (registered classes or functions), or None.

    What a new run given no usr dir records, so that a run of a problem, set or model from a usr dir
    imported earlier in the process still opens in another process.

    Raises:
      UserError: the entries come from two usr dirs; a run records one.
    """
    by_name = {name: location for location, name in _imported.items()}
    found = {}
    for entry in entries:
        package = (getattr(entry, "__module__", None) or "").split(".")[0]
        if package in by_name:
            found.setdefault(by_name[package], entry)
    if len(found) > 1:
        described = " and ".join(f"{entry.__name__} from {location!r}" for location, entry in found.items())
        raise UserError(f"this run's problem, hparams set and model come from two usr dirs ({described}) but a "
                        f"run records one; pass usr_dir= the one that imports the other")
    return next(iter(found), None)


def _is_at(module, location: str) -> bool:
    """Whether `module` is the package or module file at `location`."""
    file = getattr(module, "__file__", None)
    if not file:
        return False
    place = os.path.dirname(file) if os.path.basename(file) == "__init__.py" else file
    return os.path.realpath(place) == os.path.realpath(location)


def _where(module) -> str:
    """Where `module` was imported from."""
    file = getattr(module, "__file__", None)
    return os.path.abspath(file) if file else "a built-in module"
