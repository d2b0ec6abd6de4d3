"""OFRecord values <-> bytes, through the official protobuf package.

A decoded record is ``{name: Feature(kind, value)}``: numeric kinds hold a 1-D NumPy
array of the list's own type (float_list -> float32, double_list -> float64,
int32_list -> int32, int64_list -> int64); bytes_list holds a list of bytes.
Encoding accepts those, or plain Python/NumPy values, keeping their types:

=====================================  ==============
value                                  kind written
=====================================  ==============
float32 / float16 array or scalar      float_list
float64 array, Python float            double_list
int32 / int16 / int8 / uint8 / uint16  int32_list
  / bool array
int64 / uint32 array, Python int       int64_list
bytes, str (UTF-8), list of them       bytes_list
=====================================  ==============
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recordkit.errors import FormatError
from recordkit.formats.ofrecord import schema

KINDS = schema.KINDS
KIND_DTYPES = {"float_list": np.dtype(np.float32), "double_list": np.dtype(np.float64),
               "int32_list": np.dtype(np.int32), "int64_list": np.dtype(np.int64)}


@dataclass(frozen=True)
class Feature:
    """One feature of a record: its kind (as in record.proto) and its values."""
    kind: str
    value: object  # np.ndarray for numeric kinds, list[bytes] for bytes_list

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown feature kind {self.kind!r}: expected one of {', '.join(KINDS)}")

    def __len__(self) -> int:
        return len(self.value)

    def __eq__(self, other):
        if not isinstance(other, Feature) or other.kind != self.kind:
            return NotImplemented if not isinstance(other, Feature) else False
        if self.kind == "bytes_list":
            return list(self.value) == list(other.value)
        return np.array_equal(self.value, other.value)

    __hash__ = None


def to_feature(value) -> Feature:
    """A Feature from a plain Python/NumPy value (see the module table)."""
    if isinstance(value, Feature):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return Feature("bytes_list", [bytes(value)])
    if isinstance(value, str):
        return Feature("bytes_list", [value.encode("utf-8")])
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (bytes, bytearray, memoryview, str))
                                                           for v in value):
        return Feature("bytes_list", [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in value])
    if isinstance(value, bool):
        return Feature("int32_list", np.array([int(value)], dtype=np.int32))
    if isinstance(value, int):
        return Feature("int64_list", np.array([value], dtype=np.int64))
    if isinstance(value, float):
        return Feature("double_list", np.array([value], dtype=np.float64))
    arr = np.asarray(value)
    kind = _kind_of_dtype(arr.dtype)
    return Feature(kind, np.ascontiguousarray(arr, dtype=KIND_DTYPES[kind]).reshape(-1))


def _kind_of_dtype(dtype: np.dtype) -> str:
    if dtype in (np.float32, np.float16):
        return "float_list"
    if dtype == np.float64:
        return "double_list"
    if dtype in (np.int32, np.int16, np.int8, np.uint8, np.uint16, np.bool_):
        return "int32_list"
    if dtype in (np.int64, np.uint32):
        return "int64_list"
    raise TypeError(f"cannot store a {dtype} array in an OFRecord: use float32/64 or a signed integer type")


def to_message(features: dict):  # the protobuf path: reference for encode() and for callers wanting a message
    """A ``oneflow.OFRecord`` protobuf message holding ``features`` (in their order)."""
    msg = schema.OFRecord()
    for name, value in features.items():
        if not isinstance(name, str):
            raise TypeError(f"feature names must be str, not {type(name).__name__}")
        f = to_feature(value)
        target = getattr(msg.feature[name], f.kind)
        if f.kind == "bytes_list":
            target.value.extend(f.value)
        else:
            target.value.extend(f.value.tolist())
            if len(f.value) == 0:
                target.SetInParent()  # an empty list still records its kind
    return msg


_KIND_CODES = {kind: i for i, kind in enumerate(KINDS, start=1)}


def encode(features: dict) -> bytes:
    """Serialize a record deterministically: map entries sorted by the names' UTF-8 bytes (as
    C++ protobuf's deterministic serialization does), so the same record always gives the
    same bytes; built by the compiled encoder without creating protobuf objects (packed
    float lists are copied as they are). Parsers read it as ``to_message(features)``."""
    from recordkit.formats.ofrecord import _kernel
    parts = []
    for name in features:
        if not isinstance(name, str):
            raise TypeError(f"feature names must be str, not {type(name).__name__}")
    for name in sorted(features, key=lambda n: n.encode("utf-8")):
        f = to_feature(features[name])
        code = _KIND_CODES[f.kind]
        if f.kind == "bytes_list":
            parts.append(_kernel.frame_entry(name.encode("utf-8"), code, b"", f.value))
        elif f.kind in ("float_list", "double_list"):
            parts.append(_kernel.frame_entry(name.encode("utf-8"), code,
                                             np.ascontiguousarray(f.value, dtype=f.value.dtype.newbyteorder("<"))
                                             .tobytes(), []))
        else:
            payload = _kernel.encode_varints(np.ascontiguousarray(f.value, dtype=np.int64), f.kind == "int32_list")
            parts.append(_kernel.frame_entry(name.encode("utf-8"), code, payload, []))
    return b"".join(parts)


def from_message(msg) -> dict:
    out = {}
    for name, feature in sorted(msg.feature.items()):  # map order on the wire is unspecified
        kind = feature.WhichOneof("kind")
        if kind is None:
            raise ValueError(f"feature '{name}' has no kind set")
        values = getattr(feature, kind).value
        if kind == "bytes_list":
            out[name] = Feature(kind, list(values))
        else:
            out[name] = Feature(kind, np.fromiter(values, dtype=KIND_DTYPES[kind], count=len(values)))
    return out


def decode(data, *, path: str = "<bytes>", offset: int | None = None, index: int | None = None) -> dict:
    """Parse one serialized OFRecord into ``{name: Feature}``; a bad record is a located error.

    The compiled wire decoder builds the arrays directly (packed float lists copied whole);
    when it cannot (a malformed record, or a feature without a kind) protobuf parses the
    record, so the error message is protobuf's.
    """
    from recordkit.formats.ofrecord import _kernel
    raw = _kernel.decode_record(np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data)
    if raw is not None and all(kind for kind, _ in raw.values()):
        return {name: Feature(KINDS[kind - 1], value) for name, (kind, value) in sorted(raw.items())}
    msg = schema.OFRecord()
    try:
        msg.ParseFromString(bytes(data))
        return from_message(msg)
    except Exception as e:  # DecodeError, or a feature without a kind
        where = f"record {index}" if index is not None else None
        raise FormatError(path, f"record does not parse as an OFRecord: {e}", offset=offset, record=where) from None


def to_python(record: dict) -> dict:
    """A record as JSON-friendly values: {name: {"kind": ..., "values": [...]}} (bytes stay bytes)."""
    return {name: {"kind": f.kind, "values": list(f.value) if f.kind == "bytes_list" else f.value.tolist()}
            for name, f in record.items()}
