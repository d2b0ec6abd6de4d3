"""OneFlow's OFRecord feature decoders, on NumPy: a batch of records' feature as arrays.

Records are ``dict[str, Feature]`` as produced by :mod:`recordkit.formats.ofrecord.codec`
(``Feature.kind`` is one of ``bytes_list``/``float_list``/``double_list``/``int32_list``/
``int64_list``, ``Feature.value`` a 1-D array or a list of bytes). Every decoder takes the batch of
records, the feature name and an optional ``where`` list with one ``(path, record_index)`` per
record, used to locate errors: a missing feature, a wrong kind or a bad length raises
:class:`recordkit.errors.FormatError` naming the file, the feature and the record, e.g.
``part-00001: feature 'labels' is missing (record 12)``.

``raw_decode`` is ``flow.nn.OFRecordRawDecoder`` (``ofrecord_raw_decoder``), ``bytes_decode``
``flow.nn.OFRecordBytesDecoder``. OneFlow's image decoders and preprocessing ops (image decode,
random crop, resize, crop-mirror-normalize, flips, ...) are OneFlow's API, not the record format:
they live in :mod:`recordkit.compat.oneflow.ops`.

Where we deliberately differ from OneFlow:

* Errors are exceptions carrying file, feature and record, never process aborts.
* ``raw_decode`` never writes outside a sample's slot and never leaves memory
  unwritten: with ``dim1_varying_length`` OneFlow copies all ``L`` values, so a
  list longer than ``K = prod(shape)`` overflows into the next sample's slot
  (or past the buffer) and a shorter one leaves stale memory; we copy
  ``min(L, K)`` values and zero the rest. Likewise a bytes list shorter than
  ``K`` leaves OneFlow's slot partly unwritten; we zero it.
* Numeric conversions follow C++ ``static_cast`` where it is defined (float to
  int truncates toward zero, int64 to int32 wraps, int64 to float rounds to
  nearest); where C++ leaves it undefined (NaN or out-of-range float to int)
  the result is whatever NumPy's cast produces, silently.
"""
from __future__ import annotations

import math
import warnings
from typing import Sequence

import numpy as np

from recordkit.errors import FormatError

__all__ = ["RAW_DTYPES", "raw_decode", "bytes_decode"]

#: Output dtypes ``ofrecord_raw_decoder`` is registered for (``char`` is int8 storage).
RAW_DTYPES: tuple[np.dtype, ...] = tuple(
    np.dtype(t) for t in (np.float32, np.float64, np.int8, np.int32, np.int64, np.uint8)
)

#: Stored element type of each numeric feature kind (record.proto).
_KIND_DTYPES = {
    "float_list": np.dtype(np.float32),
    "double_list": np.dtype(np.float64),
    "int32_list": np.dtype(np.int32),
    "int64_list": np.dtype(np.int64),
}
_KINDS = ("bytes_list",) + tuple(_KIND_DTYPES)


# --------------------------------------------------------------------------- helpers


def _locations(records, where) -> list:
    n = len(records)
    if where is None:
        return [("<records>", i) for i in range(n)]
    where = list(where)
    if len(where) != n:
        raise ValueError(f"where has {len(where)} entries for {n} records")
    return where


def _error(loc, message) -> FormatError:
    path, index = loc
    return FormatError(path, message, record=f"record {index}")


def _feature(record, name, loc):
    """The named feature of one record, or a located FormatError."""
    try:
        feature = record[name]
    except KeyError:
        raise _error(loc, f"feature {name!r} is missing") from None
    except TypeError:
        raise _error(loc, f"record is a {type(record).__name__}, not a mapping of features") from None
    kind = getattr(feature, "kind", None)
    if kind not in _KINDS:
        if kind is None:
            raise _error(loc, f"feature {name!r} has no value (kind not set)")
        raise _error(loc, f"feature {name!r} has unknown kind {kind!r}")
    return feature


def _single_bytes(feature, name, loc, what="decoder") -> bytes:
    if feature.kind != "bytes_list":
        raise _error(loc, f"feature {name!r} is a {feature.kind}, the {what} needs a bytes_list")
    values = feature.value
    if len(values) != 1:
        raise _error(
            loc, f"feature {name!r} must hold exactly one bytes value, it holds {len(values)}"
        )
    return values[0]


def _raw_dtype(dtype) -> np.dtype:
    if isinstance(dtype, str) and dtype == "char":
        return np.dtype(np.int8)
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or dt not in RAW_DTYPES:
        names = ", ".join(d.name for d in RAW_DTYPES)
        raise ValueError(f"raw_decode dtype must be one of {names} (or 'char'), not {dtype!r}")
    return dt


def _shape_tuple(shape) -> tuple[int, ...]:
    if shape is None:
        return ()
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"shape must not have negative dimensions: {shape}")
    return shape


def _cast(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """C++ ``static_cast`` element-wise (NumPy's C casts; undefined cases stay unspecified)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return values.astype(dtype, copy=False)


# --------------------------------------------------------------------------- raw / bytes


def raw_decode(
    records: Sequence[dict],
    name: str,
    shape,
    dtype,
    *,
    dim1_varying_length: bool = False,
    truncate: bool = False,
    auto_zero_padding: bool = False,
    where=None,
) -> np.ndarray:
    """Dense ``(N, *shape)`` array of feature ``name`` -- ``OFRecordRawDecoder``.

    With ``K = prod(shape)`` elements per sample (``shape=()`` gives ``(N,)``):

    * numeric lists (float/double/int32/int64) of length ``L``: ``L`` must equal
      ``K`` (FormatError otherwise) unless ``truncate`` (copy ``min(L, K)``,
      zero the rest) or ``dim1_varying_length`` (the same here; OneFlow would
      copy all ``L`` values and overflow the slot when ``L > K``);
    * a bytes list must hold exactly one value; its bytes are read as *signed*
      int8 and converted, so 0xC8 is -56 as float/int32 but 200 as uint8;
      ``min(len, K)`` bytes are copied and the rest zeroed, whatever
      ``truncate``/``dim1_varying_length`` say.

    Elements convert with ``static_cast`` semantics (float to int truncates
    toward zero, int64 to int32 wraps). ``dtype`` is one of float32, float64,
    int8 (or "char"), int32, int64, uint8. ``auto_zero_padding`` is deprecated
    (a warning, then OR-ed into ``truncate``). When every record stores exactly
    ``K`` values of one kind, the batch is built with a single concatenate.
    """
    dt = _raw_dtype(dtype)
    shape = _shape_tuple(shape)
    if auto_zero_padding:
        warnings.warn(
            "auto_zero_padding is deprecated, use truncate=True instead",
            DeprecationWarning,
            stacklevel=2,
        )
        truncate = True
    K = math.prod(shape)
    locs = _locations(records, where)
    N = len(records)
    strict = not (truncate or dim1_varying_length)

    # Gather the values per kind, checking every record in order.
    groups: dict[str, tuple[list[int], list[np.ndarray]]] = {}
    for i, record in enumerate(records):
        loc = locs[i]
        feature = _feature(record, name, loc)
        kind = feature.kind
        if kind == "bytes_list":
            values = _single_bytes(feature, name, loc, "raw decoder")
            arr = np.frombuffer(values, dtype=np.int8)
        else:
            arr = np.asarray(feature.value, dtype=_KIND_DTYPES[kind])
            if arr.ndim != 1:
                arr = arr.reshape(-1)
            if strict and arr.shape[0] != K:
                raise _error(
                    loc,
                    f"feature {name!r} has {arr.shape[0]} values but shape {shape} needs {K} "
                    "(pass truncate=True or dim1_varying_length=True to accept other lengths)",
                )
        rows, arrays = groups.setdefault(kind, ([], []))
        rows.append(i)
        arrays.append(arr)

    if len(groups) == 1:
        (rows, arrays), = groups.values()
        if all(a.shape[0] == K for a in arrays):  # fast path: one concatenate + one cast
            flat = np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int8)
            return _cast(flat, dt).reshape((N,) + shape)

    out = np.zeros((N, K), dtype=dt)
    for rows, arrays in groups.values():
        lengths = np.fromiter((a.shape[0] for a in arrays), dtype=np.int64, count=len(arrays))
        idx = np.asarray(rows, dtype=np.intp)
        if (lengths == K).all():
            out[idx] = _cast(np.concatenate(arrays).reshape(len(arrays), K), dt)
            continue
        kept = np.minimum(lengths, K)
        flat = np.concatenate([a[:K] for a in arrays])
        mask = np.arange(K) < kept[:, None]  # row-major order == concatenation order
        block = np.zeros((len(arrays), K), dtype=dt)
        block[mask] = _cast(flat, dt)
        out[idx] = block
    return out.reshape((N,) + shape)


def bytes_decode(records: Sequence[dict], name: str, where=None) -> list[np.ndarray]:
    """One 1-D uint8 copy of the single bytes value per record -- ``OFRecordBytesDecoder``."""
    locs = _locations(records, where)
    out = []
    for i, record in enumerate(records):
        value = _single_bytes(_feature(record, name, locs[i]), name, locs[i], "bytes decoder")
        out.append(np.frombuffer(value, dtype=np.uint8).copy())
    return out


# --------------------------------------------------------------------------- images
