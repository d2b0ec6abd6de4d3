"""Stream declarations: what a caller expects to find in a data set.

CNTK made callers declare every input (its name, the name used in the file, dense or
sparse, its dimension); the same declaration drives every recordkit format.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MAX_DIM = 2**31 - 1
FORMATS = ("dense", "sparse", "bytes")

# the JSON type of each field of a recorded declaration (true/false only where bool is named)
_DECLARATION_TYPES = [("name", (str,), "a string"), ("format", (str,), "a string"), ("dim", (int,), "an integer"),
                      ("alias", (str, type(None)), "a string or null"),
                      ("defines_mb_size", (bool,), "true or false"),
                      ("precision", (str, type(None)), "a string or null")]

_PRECISIONS: dict[str, np.dtype] = {
    "float": np.dtype(np.float32), "float32": np.dtype(np.float32),
    "double": np.dtype(np.float64), "float64": np.dtype(np.float64),
}


def resolve_precision(precision) -> np.dtype:
    """Map CNTK's ``float``/``double`` (or a NumPy dtype) to float32/float64."""
    if isinstance(precision, str):
        key = precision.strip().lower()
        if key in _PRECISIONS:
            return _PRECISIONS[key]
    else:
        try:
            dt = np.dtype(precision)
        except TypeError:
            dt = None
        if dt in (np.dtype(np.float32), np.dtype(np.float64)):
            return dt
    raise ValueError(f"unsupported precision {precision!r}: expected 'float' (float32) or 'double' (float64)")


@dataclass(frozen=True)
class StreamSpec:
    """One declared stream.

    name: the name the caller uses; alias: the name used in the file (defaults to
    ``name``); format: ``"dense"``, ``"sparse"`` or ``"bytes"``; dim: values per dense sample, or
    the exclusive upper bound of sparse indices (a bytes stream's is 1: one value a sequence);
    defines_mb_size: this stream's sample count is the sequence length used for minibatch sizing.

    A ``"bytes"`` stream holds one opaque value per sequence (an encoded image, a UTF-8 text, a
    JSON document, as the bridge formats store them): a minibatch hands them over as they are, in
    the order and with the partitioning and checkpoints of the numeric streams beside them. A
    sequence of several bytes values is not a thing recordkit reads (a bytes stream is one value
    per sequence).
    """

    name: str
    format: str
    dim: int
    alias: str | None = None
    defines_mb_size: bool = False
    dtype: np.dtype | None = field(default=None, compare=False)

    def __post_init__(self):
        if not self.name:
            raise ValueError("a stream needs a non-empty name")
        fmt = str(self.format).strip().lower()
        if fmt not in FORMATS:
            raise ValueError(f"stream {self.name!r}: format must be 'dense', 'sparse' or 'bytes', not {self.format!r}")
        object.__setattr__(self, "format", fmt)
        try:
            dim = int(self.dim)
        except (TypeError, ValueError):
            raise ValueError(f"stream {self.name!r}: dim must be a positive integer, not {self.dim!r}") from None
        if dim <= 0:
            raise ValueError(f"stream {self.name!r}: dim must be a positive integer, not {self.dim!r}")
        if dim > MAX_DIM:  # CBF stores dims as uint32 and sparse indices as int32: nothing larger round-trips
            raise ValueError(f"stream {self.name!r}: {fmt} dim {dim} exceeds {MAX_DIM}")
        if fmt == "bytes" and dim != 1:
            raise ValueError(f"stream {self.name!r}: a bytes stream holds one value per sequence (dim 1), not dim {dim}")
        object.__setattr__(self, "dim", dim)
        alias = self.name if self.alias is None else str(self.alias)
        if not alias:
            raise ValueError(f"stream {self.name!r}: alias is empty")
        object.__setattr__(self, "alias", alias)
        if self.dtype is not None and fmt != "bytes":
            object.__setattr__(self, "dtype", resolve_precision(self.dtype))
        elif fmt == "bytes":  # bytes have no precision: whatever a caller or reader passed
            object.__setattr__(self, "dtype", None)

    @property
    def is_sparse(self) -> bool:
        return self.format == "sparse"

    @property
    def is_bytes(self) -> bool:
        """One opaque ``bytes`` value per sequence (neither dense nor sparse numbers)."""
        return self.format == "bytes"

    def to_dict(self, precision: str | None = None) -> dict:
        """The declaration as plain JSON values: what a data set records about its streams so
        that reading it back (or converting it again) needs no ``--stream``. ``precision``
        ('float'/'double') is the data's, when the caller knows it."""
        d = {"name": self.name, "alias": self.alias, "format": self.format, "dim": self.dim}
        if self.defines_mb_size:
            d["defines_mb_size"] = True
        dtype = self.dtype if precision is None else resolve_precision(precision)
        if dtype is not None and not self.is_bytes:
            d["precision"] = "double" if dtype == np.float64 else "float"
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "StreamSpec":
        """The inverse of ``to_dict`` (a ``ValueError`` naming the field when one is wrong). The
        values were written as JSON by ``to_dict``, so each must have its JSON type: a dim of
        ``1.5``, ``true`` or ``"3"`` is an edit, not a dimension."""
        if not isinstance(d, dict):
            raise ValueError(f"a stream declaration must be an object, not {type(d).__name__}")
        missing = [k for k in ("name", "format", "dim") if k not in d]
        if missing:
            raise ValueError(f"stream declaration {d!r} lacks {', '.join(missing)}")
        for key, types, what in _DECLARATION_TYPES:
            value = d.get(key)
            if key in d and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
                raise ValueError(f"{key}: expected {what}, found {value!r}")
        return cls(name=d["name"], format=d["format"], dim=d["dim"], alias=d.get("alias"),
                   defines_mb_size=d.get("defines_mb_size", False), dtype=d.get("precision"))

    @classmethod
    def parse(cls, text: str) -> "StreamSpec":
        """Parse the CLI form ``NAME=FORMAT:DIM[:ALIAS]``, or ``NAME=bytes[:ALIAS]`` for a bytes
        stream (its dim is always 1; ``NAME=bytes:1:ALIAS`` is accepted too, and is the way to name
        a column called ``1``)."""
        name, sep, rest = text.partition("=")
        parts = rest.split(":") if sep else []
        if sep and name and parts and parts[0].strip().lower() == "bytes" and len(parts) <= 3:
            if len(parts) == 3 or (len(parts) == 2 and parts[1] == "1"):
                return cls(name=name, format="bytes", dim=parts[1],  # type: ignore[arg-type]  # checked there
                           alias=parts[2] if len(parts) == 3 else None)
            return cls(name=name, format="bytes", dim=1, alias=parts[1] if len(parts) == 2 else None)
        if not sep or not name or len(parts) not in (2, 3):
            raise ValueError(f"bad --stream {text!r}: expected NAME=FORMAT:DIM[:ALIAS] (e.g. features=dense:784:F) "
                             f"or NAME=bytes[:ALIAS]")
        alias = parts[2] if len(parts) == 3 else None
        # the dimension as text: __post_init__ parses and checks it
        return cls(name=name, format=parts[0], dim=parts[1], alias=alias)  # type: ignore[arg-type]


def stream_arguments(streams) -> str:
    """The ``--stream NAME=FORMAT:DIM[:ALIAS]`` arguments that declare ``streams`` (the inverse of
    ``StreamSpec.parse``; a bytes stream as ``NAME=bytes:1[:ALIAS]``): what ``recordkit inspect`` prints for streams it inferred."""
    return " ".join(f"--stream {s.name}={s.format}:{s.dim}" + (f":{s.alias}" if s.alias != s.name else "")
                    for s in streams)


def check_streams(streams) -> list[StreamSpec]:
    """Validate a list of streams as a set: unique names and aliases, at most one definesMBSize."""
    streams = list(streams)
    if not streams:
        raise ValueError("no streams declared")
    names: dict = {}
    aliases: dict = {}
    for s in streams:
        if not isinstance(s, StreamSpec):
            raise TypeError(f"expected StreamSpec, got {type(s).__name__}")
        if s.name in names:
            raise ValueError(f"stream name {s.name!r} declared twice")
        if s.alias in aliases:
            raise ValueError(f"alias {s.alias!r} is already mapped to stream {aliases[s.alias]!r}")
        names[s.name] = s
        aliases[s.alias] = s.name
    defining = [s.name for s in streams if s.defines_mb_size]
    if len(defining) > 1:
        raise ValueError(f"only one stream may define the minibatch size, but {len(defining)} do: {', '.join(defining)}")
    return streams


def streams_to_json(streams, precision=None) -> list[dict]:
    """Stream declarations as a JSON-able list (see ``StreamSpec.to_dict``): the one form in
    which every writer records them in its format's own metadata."""
    return [s.to_dict(precision) for s in streams]


def streams_from_json(items, field: str = "streams") -> list[StreamSpec]:
    """Declarations recorded by ``streams_to_json``, checked one by one and as a set; a
    ``ValueError`` names the field (``field[1]: dim: ...``; ``field`` is where the list is kept)."""
    if not isinstance(items, list):
        raise ValueError(f"{field}: recorded stream declarations must be a list")
    specs = []
    for i, d in enumerate(items):
        try:
            specs.append(StreamSpec.from_dict(d))
        except (TypeError, ValueError) as e:
            raise ValueError(f"{field}[{i}]: {e}") from None
    try:
        return check_streams(specs)
    except ValueError as e:
        raise ValueError(f"{field}: {e}") from None
