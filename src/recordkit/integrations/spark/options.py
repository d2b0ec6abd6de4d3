"""The options of the Spark data source (``.option(NAME, VALUE)``: always strings), read once for
both its reader and its writer."""
from __future__ import annotations

from recordkit.errors import UsageError


def stream_option(text) -> list[str] | None:
    """The ``streams`` option: ``--stream`` strings separated by commas or spaces."""
    if not text:
        return None
    return [s for s in str(text).replace(",", " ").split() if s]


def integer(options, name) -> int | None:
    """An integer option, None when not given; anything else is a usage error naming it."""
    value = options.get(name)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"option {name}={value!r}: expected an integer") from None


def flag(options, name) -> bool:
    """A true/false option (``1``, ``true``, ``yes``: true)."""
    return str(options.get(name, "")).strip().lower() in ("1", "true", "yes")
