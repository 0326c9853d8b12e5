"""Your own problems, hparams sets and models, from your own directory (tensor2tensor's --t2t_usr_dir).

A usr dir is a Python package (a directory with __init__.py) or a single
module file. Importing it runs its `@problems.register(...)`,
`@hparams_sets.register(...)` and `@models.register(...)` decorators
(t2t_lite.registry), which add entries exactly as the bundled ones do; see
docs/extending.md. A training run records its usr dir in hparams.json, and
every command that opens the run imports it again, so only the trainer needs
the flag.
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
    """
    location = os.path.abspath(os.path.expanduser(path))
    if location in _imported:
        return location
    if os.path.isdir(location) and os.path.exists(os.path.join(location, "__init__.py")):
        parent, name = os.path.dirname(location), os.path.basename(location)
    elif os.path.isfile(location) and location.endswith(".py"):
        parent, name = os.path.dirname(location), os.path.basename(location)[:-3]
    elif os.path.exists(location):
        raise UserError(f"--usr_dir {path!r} is neither a package (a directory with __init__.py) nor a .py file")
    else:
        raise UserError(f"--usr_dir {path!r} does not exist")
    if not name.isidentifier():
        raise UserError(f"--usr_dir {path!r}: {name!r} is not a Python module name; rename it "
                        f"(letters, digits and underscores)")
    existing = sys.modules.get(name)
    if existing is not None and not _file_of(existing).startswith(location):
        raise UserError(f"--usr_dir {path!r}: a module named {name!r} is already imported from "
                        f"{_file_of(existing) or 'elsewhere'}; rename your package")
    if parent not in sys.path:
        sys.path.insert(0, parent)
    importlib.import_module(name)
    _imported[location] = name
    return location


def current() -> str | None:
    """The usr dir imported first in this process (what a new run records), or None."""
    return next(iter(_imported), None)


def import_recorded(recorded: str | None) -> None:
    """Imports the usr dir a run recorded, unless this process was given one already (which then wins).

    Raises:
      UserError: the recorded directory is gone.
    """
    if not recorded or _imported:
        return
    if not os.path.exists(recorded):
        raise UserError(f"this run was trained with --usr_dir {recorded!r}, which no longer exists; pass "
                        f"--usr_dir=<where it is now>")
    import_usr_dir(recorded)


def _file_of(module) -> str:
    return os.path.abspath(getattr(module, "__file__", None) or "")
