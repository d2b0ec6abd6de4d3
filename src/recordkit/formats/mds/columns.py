"""The columns of an MDS data set written by Streaming's ``MDSWriter`` as streams, from their
``column_encodings`` (read with no ``--stream``; the Arrow counterpart is ``formats/arrow_layouts.py``):

* a scalar (``int``, ``int8``..``int64``, ``uint8``..``uint64``, ``float16``/``32``/``64``): a
  dense stream of dim 1, one sample a row;
* ``ndarray:DTYPE:D`` (a fixed shape of one axis): dim D, one sample a row; ``ndarray:DTYPE:T,D``:
  a sequence of T samples of dim D;
* ``ndarray`` / ``ndarray:DTYPE`` (a shape per sample): told from the first shard's first samples,
  as an Arrow list is: 2-D arrays ``(samples, D)`` are sequences of dim D; 1-D arrays that all hold
  D values one sample a row of dim D, of varying length a sequence of dim 1. A later sample that
  does not fit is a located error (shard, byte offset, sample), never read another way;
* ``NAME.indices`` / ``.values`` / ``.offsets`` (a sparse stream as recordkit writes it): its dim is
  not in the data, so it needs ``--stream NAME=sparse:DIM``;
* ``str``, ``bytes``, ``jpeg``, ``png``, ``json``, ``pil``, ``pkl``: a bytes stream, the column's
  bytes as Streaming stored them: a JPEG or PNG file byte for byte, a string or JSON document as
  its UTF-8, ``pil`` Streaming's raw pixels behind its own header (no encoded image: an image
  stage refuses it, located), ``pkl`` the pickle, which recordkit never unpickles (unpickling runs
  code the data set carries: only a caller who trusts the data should).

Any other encoding is refused; the other columns are read when selected with ``--stream``, and the
error names them.
"""
from __future__ import annotations

import numpy as np

from recordkit.engine.streams import StreamSpec
from recordkit.errors import FormatError

# Streaming's fixed-size scalar encodings: little-endian, one value a sample
SCALARS = {"int": "<i8", "int8": "i1", "int16": "<i2", "int32": "<i4", "int64": "<i8", "uint8": "u1",
           "uint16": "<u2", "uint32": "<u4", "uint64": "<u8", "float16": "<f2", "float32": "<f4", "float64": "<f8"}
SPARSE_PARTS = (".indices", ".values", ".offsets")  # a sparse stream, as recordkit's MDSWriter lays it out
# stored as they are: a bytes stream hands the column's bytes over (pkl's unpickled by nobody here)
BYTES = ("str", "bytes", "jpeg", "png", "json", "pil", "pkl")


def refused(enc: str, spec: StreamSpec | None = None) -> str | None:
    """Why a column encoded ``enc`` is no stream, or not the stream ``spec`` (None: it is one)."""
    numbers = enc in SCALARS or enc == "ndarray" or enc.startswith("ndarray:")
    if numbers or enc in BYTES:
        if spec is not None and spec.is_bytes and numbers:
            return f"is encoded {enc!r}: numbers, not the bytes stream '{spec.name}' (--stream {spec.name}=dense:DIM)"
        if spec is not None and not spec.is_bytes and not numbers:
            return f"is encoded {enc!r}: bytes, not numbers (a bytes stream: --stream {spec.name}=bytes)"
        return None
    return f"is encoded {enc!r}, an encoding recordkit does not read"


def ndarray_dtype(enc: str):
    """The dtype an ``ndarray:DTYPE[:SHAPE]`` encoding names, or None (named per sample)."""
    parts = enc.split(":")
    return np.dtype(parts[1]) if len(parts) >= 2 and parts[1] else None


def static_shape(enc: str) -> tuple | None:
    parts = enc.split(":")
    return tuple(int(x) for x in parts[2].split(",")) if len(parts) >= 3 and parts[2] else None


def _stream_dtype(dtype) -> np.dtype:
    return np.dtype(np.float64) if dtype is not None and np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def _dim_of_shapes(shapes) -> int | str:
    """The dim the per-sample shapes of a column's first samples tell, or why none."""
    ndims = {len(s) for s in shapes}
    if not shapes or ndims == {0}:
        return 1
    if len(ndims) != 1:
        return "holds arrays of different ranks"
    nd = ndims.pop()
    if nd == 1:
        lens = {s[0] for s in shapes}
        return lens.pop() if len(lens) == 1 and min(lens) > 0 else 1
    if nd == 2:
        dims = {s[1] for s in shapes}
        return dims.pop() if len(dims) == 1 and min(dims) > 0 else "holds 2-D arrays of different widths"
    return f"holds {nd}-D arrays (a stream's samples are 1-D)"


def infer_streams(index_path: str, columns, probe, skip=()) -> list[StreamSpec]:
    """Streams for an MDS data set that records none. ``columns``: the first shard's (name,
    encoding, size); ``probe(name)``: (the shapes of that column's first samples, their dtype), for
    encodings without a fixed shape."""
    from recordkit.formats.arrow_layouts import refusal
    streams, bad = [], []
    names = {name for name, _, _ in columns}
    sparse = {n.rsplit(".", 1)[0] for n in names
              if all(n.rsplit(".", 1)[0] + part in names for part in SPARSE_PARTS)}
    for base in sorted(sparse):
        bad.append((base, f"columns '{base}.indices/.values/.offsets' are a sparse stream, whose dim the data "
                          f"does not tell (declare it: --stream {base}=sparse:DIM)"))
    for name, enc, _ in columns:
        if name in skip or (name.rsplit(".", 1)[0] in sparse and "." + name.rsplit(".", 1)[-1] in SPARSE_PARTS):
            continue
        why = refused(enc)
        if why is None:
            if enc in BYTES:
                streams.append(StreamSpec(name, "bytes", 1))
                continue
            if enc in SCALARS:
                streams.append(StreamSpec(name, "dense", 1, dtype=_stream_dtype(SCALARS[enc])))
                continue
            shape = static_shape(enc)
            shapes, dtype = ([shape], ndarray_dtype(enc)) if shape is not None else probe(name)
            dim = _dim_of_shapes(shapes)
            if isinstance(dim, int):
                streams.append(StreamSpec(name, "dense", dim, dtype=_stream_dtype(dtype)))
                continue
            why = f"is encoded {enc!r} and {dim}"
        bad.append((name, f"column '{name}' {why}"))
    if bad:
        raise refusal(index_path, bad, streams)
    if not streams:
        raise FormatError(index_path, "no columns to read as streams")
    return streams


def sample_rows(arr: np.ndarray, dim: int) -> np.ndarray | None:
    """One sample's array as (samples, dim) rows, or None when its shape does not fit ``dim``: a
    scalar is one sample of dim 1, a 1-D array of ``dim`` values one sample (of dim 1: a sequence
    of its values), a 2-D array ``(samples, dim)`` a sequence."""
    if arr.ndim == 0 and dim == 1:
        return arr.reshape(1, 1)
    if arr.ndim == 1 and (arr.shape[0] == dim or dim == 1):
        return arr.reshape(-1, dim)
    if arr.ndim == 2 and arr.shape[1] == dim:
        return arr
    return None
