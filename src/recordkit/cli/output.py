"""JSON lines for ``cat``: one object per sequence, floats that read back exactly.

orjson writes float32 and float64 arrays in their shortest round-trip form without
a per-value Python loop. JSON has no inf/nan, which CTF can produce (``1e400``
overflows): such sequences fall back to the standard library, which writes
``Infinity``/``NaN`` (as Python's json does) rather than silently printing null.
A bytes stream's value is printed as a JSON string when it is UTF-8 text, else as
``{"base64": "..."}`` (an encoded image), so every value prints and reads back exactly.
"""
from __future__ import annotations

import json

import numpy as np
import orjson

_OPTS = orjson.OPT_SERIALIZE_NUMPY


def chunk_records(chunk, specs):
    """Yield one JSON-ready dict per sequence of a ChunkData, straight from its columns."""
    cols = [(spec.name, spec.is_sparse, chunk.columns[spec.name]) for spec in specs]
    for i in range(len(chunk)):
        rec = {"key": int(chunk.keys[i])}
        for name, sparse, col in cols:
            if col.is_bytes:
                rec[name] = bytes_value(col.values[i])
                continue
            a, b = int(col.seq_offsets[i]), int(col.seq_offsets[i + 1])
            if sparse:
                ptr = col.indptr
                rec[name] = [{"indices": col.indices[ptr[j]:ptr[j + 1]], "values": col.values[ptr[j]:ptr[j + 1]]}
                             for j in range(a, b)]
            else:
                rec[name] = col.values[a:b]
        yield rec


def bytes_value(value: bytes):
    """A bytes stream's value as JSON: the text when it is UTF-8, else ``{"base64": ...}``."""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        import base64
        return {"base64": base64.b64encode(value).decode("ascii")}


def _finite(rec) -> bool:
    for k, v in rec.items():
        if k == "key" or isinstance(v, (str, dict)):
            continue
        if isinstance(v, np.ndarray):
            if not np.isfinite(v).all():
                return False
        else:
            for s in v:
                if not np.isfinite(s["values"]).all():
                    return False
    return True


def _plain(x):
    if isinstance(x, np.ndarray):
        if x.dtype.kind == "f":
            flat = [float(str(v)) if np.isfinite(v) else float(v) for v in x.ravel()]
            return np.array(flat, dtype=object).reshape(x.shape).tolist() if x.ndim > 1 else flat
        return x.tolist()
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    return x


def dumps(rec: dict) -> bytes:
    if _finite(rec):
        return orjson.dumps(rec, option=_OPTS)
    return json.dumps(_plain(rec), separators=(",", ":")).encode()
