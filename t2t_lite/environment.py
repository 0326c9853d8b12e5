"""Settings read from environment variables: one of a few named values, or automatic."""
import os

from t2t_lite.errors import UserError


def choice(variable: str, choices: tuple[str, ...], automatic: str, kind: str) -> str | None:
    """The value of `variable` (case and surrounding spaces ignored), or None when it is unset or `automatic`.

    Any other value is a UserError naming the variable, what it is (`kind`, e.g. "a kernel layout")
    and the values it takes.
    """
    value = os.environ.get(variable, "").strip().lower()
    if value in ("", automatic):
        return None
    if value not in choices:
        raise UserError(f"{variable}={value!r} is not {kind}: use {', '.join(choices)} or {automatic}")
    return value
