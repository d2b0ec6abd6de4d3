"""The configuration tree: case-insensitive records and arrays that remember where every key
and value was written (``Location``: source, line, column), so every error can say where."""
from __future__ import annotations

from typing import Any, NamedTuple


# =============================================================================================
# Configuration tree: case-insensitive records that remember where things were written
# =============================================================================================

class Location(NamedTuple):
    """Where a token was written: ``source`` (file name or ``<override name>``), 1-based line and byte column."""

    source: str
    line: int
    column: int


class ConfigRecord(dict):
    """A config section (``[ ... ]`` or ``{ ... }``): a dict whose keys are case-insensitive.

    CNTK config names are case-insensitive (``definesMbSize`` and ``definesMBSize`` are
    the same key), but stream names come from section names and must keep their spelling.
    So the dict stores each key with the spelling of its first assignment, and every
    lookup folds case. It also remembers the location of each key and value (for error
    messages) and its enclosing record (for ``$name$`` lookups and parameter inheritance).
    """

    def __init__(self, items: Any = (), *, location: Location | None = None,
                 parent: ConfigRecord | None = None):
        super().__init__()
        self._spelling: dict[str, str] = {}
        self._key_loc: dict[str, Location | None] = {}
        self._value_loc: dict[str, Location | None] = {}
        self.location = location
        self.parent = parent
        self.update(items)

    # -- case-insensitive dict protocol ------------------------------------------------------
    def _stored(self, key: str) -> str:
        return self._spelling[key.lower()]

    def __getitem__(self, key):
        try:
            return super().__getitem__(self._stored(key))
        except (KeyError, AttributeError):
            raise KeyError(key) from None

    def __setitem__(self, key, value):
        self.set(key, value)

    def __delitem__(self, key):
        try:
            stored = self._spelling.pop(key.lower())
        except (KeyError, AttributeError):
            raise KeyError(key) from None
        self._key_loc.pop(key.lower(), None)
        self._value_loc.pop(key.lower(), None)
        super().__delitem__(stored)

    def __contains__(self, key):
        return isinstance(key, str) and key.lower() in self._spelling

    def get(self, key, default=None):
        return self[key] if key in self else default

    def pop(self, key, *default):
        if key in self:
            value = self[key]
            del self[key]
            return value
        if default:
            return default[0]
        raise KeyError(key)

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, other=(), **kw):
        items = other.items() if hasattr(other, "items") else other
        for k, v in items:
            self[k] = v
        for k, v in kw.items():
            self[k] = v

    def copy(self) -> ConfigRecord:
        return self.deep_copy(self.parent)

    # -- location-aware API ------------------------------------------------------------------
    def set(self, key: str, value: Any, *, key_location: Location | None = None,
            value_location: Location | None = None) -> None:
        """Assign ``key`` (keeping the first spelling and position in the dict) with its locations."""
        low = key.lower()
        if low not in self._spelling:
            self._spelling[low] = key
        super().__setitem__(self._spelling[low], value)
        if key_location is not None or low not in self._key_loc:
            self._key_loc[low] = key_location
        self._value_loc[low] = value_location
        _adopt(value, self)

    def spelling(self, key: str) -> str:
        """The key as it was written in the config."""
        return self._spelling.get(key.lower(), key)

    def key_location(self, key: str) -> Location | None:
        return self._key_loc.get(key.lower())

    def value_location(self, key: str) -> Location | None:
        return self._value_loc.get(key.lower()) or self._key_loc.get(key.lower())

    def deep_copy(self, parent: ConfigRecord | None) -> ConfigRecord:
        out = ConfigRecord(location=self.location, parent=parent)
        for k, v in dict.items(self):
            out.set(k, _copy_value(v, out), key_location=self.key_location(k),
                    value_location=self._value_loc.get(k.lower()))
        return out


class ConfigArray(list):
    """A config array: ``(a : b : c)``, ``a:b`` or ``({...})``. ``locations`` parallels the items."""

    def __init__(self, items=(), locations=None, *, location: Location | None = None):
        super().__init__(items)
        self.locations = list(locations) if locations is not None else [None] * len(self)
        self.location = location


def _adopt(value: Any, parent: ConfigRecord) -> None:
    """Make ``parent`` the enclosing scope of a record value (or of the records in an array)."""
    if isinstance(value, ConfigRecord):
        value.parent = parent
    elif isinstance(value, ConfigArray):
        for item in value:
            _adopt(item, parent)


def _copy_value(value: Any, parent: ConfigRecord) -> Any:
    if isinstance(value, ConfigRecord):
        return value.deep_copy(parent)
    if isinstance(value, ConfigArray):
        return ConfigArray((_copy_value(v, parent) for v in value), value.locations, location=value.location)
    return value


def _from_python(obj: Any, parent: ConfigRecord | None = None) -> Any:
    """Turn plain Python dicts/lists (no locations) into ConfigRecord/ConfigArray trees."""
    if isinstance(obj, ConfigRecord):
        return obj.deep_copy(parent)
    if isinstance(obj, dict):
        rec = ConfigRecord(parent=parent)
        for k, v in obj.items():
            rec.set(str(k), _from_python(v, rec))
        return rec
    if isinstance(obj, (list, tuple)):
        return ConfigArray(_from_python(v, parent) for v in obj)
    return obj
