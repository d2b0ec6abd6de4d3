"""The usual Arrow column layouts as streams: what Parquet, Hugging Face and Lance data sets written
by other tools hold, read with no ``--stream``.

recordkit's own mapping (``formats/parquet/arrow.py``) holds one row per sequence: a dense stream
``list<fixed_size_list<float>[D]>``, a sparse one ``list<struct<indices, values>>``. Data sets
written by pyarrow, ``datasets`` or ``lance`` usually hold one sample a row instead:

* a number (an ``int64`` label, a ``float``): a dense stream of dim 1, one sample a row;
* ``fixed_size_list<number>[D]`` (an embedding): a dense stream of dim D, one sample a row;
* ``list<number>``: when every list holds the same number D of values (``datasets`` writes a 2-D
  array this way), a dense stream of dim D, one sample a row; when the lengths differ, a sequence
  of samples of dim 1 (declared ``dense:1``, a list is always read as a sequence);
* ``list<fixed_size_list<number>[D]>`` and ``list<list<number>>`` whose inner lists all hold D
  values: a sequence of samples of dim D (the mapping's dense form).

Which of the two ``list<number>`` readings applies is told from the first rows (``probe``); a later
row that does not fit (a list of another length, a null) is a located error naming the file, the
row group or batch, the row and the column, never read another way. Integers become float32 (or
float64 with ``--precision double``) only where every value converts exactly
(``exact_values``).

* a string or binary column, or a Hugging Face ``Image`` column (a struct whose ``bytes`` field
  holds the encoded image): a bytes stream, one value a row, the image's bytes as stored and a
  string as its UTF-8 bytes (a reader hands every bytes stream over as ``bytes``, whatever the
  column's type; ``.decode()`` gives the text back). Other structs hold no stream: a data set
  with such a column needs ``--stream`` to select the others, and the error says which.

Each column is rewritten into the mapping's type over the same buffers (``to_mapping``), so the
mapping's checks and decoding (``select_streams``, ``batch_to_chunk``) apply unchanged.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from recordkit.engine.streams import StreamSpec
from recordkit.errors import FormatError

KEY = "key"
SCALAR, ROW, LIST, MAPPING, BYTES = "number", "one sample a row", "list", "mapping", "bytes"
PROBE_ROWS = 1024  # the first rows that tell a list column's dim
# the largest integer every value up to which float32 / float64 holds exactly
EXACT_INT = {np.dtype(np.float32): 2**24, np.dtype(np.float64): 2**53}


def number(t) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def is_list(t) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t)


def layout(t: pa.DataType) -> str | None:
    """How a column of type ``t`` holds samples (None: a type no stream reads)."""
    if number(t):
        return SCALAR
    if pa.types.is_fixed_size_list(t) and number(t.value_type):
        return ROW
    if is_list(t) and number(t.value_type):
        return LIST
    if is_list(t):
        return MAPPING  # the mapping's types: select_streams checks them against their declaration
    if (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_struct(t)):
        return BYTES
    return None


def leaf_dtype(t: pa.DataType):
    """float64 for a column of float64 values, float32 for any other number (what a stream delivers
    when no precision is asked)."""
    while hasattr(t, "value_type"):
        t = t.value_type
    if pa.types.is_struct(t) and t.get_field_index("values") >= 0:
        return leaf_dtype(t.field("values").type)
    return np.dtype(np.float64) if t == pa.float64() else np.dtype(np.float32)


def _lengths(arr) -> np.ndarray:
    o = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    return np.diff(o)


def _one_length(arr) -> int | None:
    """The one length every list of ``arr`` has (nulls ignored), or None."""
    if arr is None or len(arr) == 0:
        return None
    lens = _lengths(arr)
    if arr.null_count:
        lens = lens[np.asarray(arr.is_valid().to_numpy(zero_copy_only=False))]
    return int(lens[0]) if len(lens) and lens[0] > 0 and np.all(lens == lens[0]) else None


def column_stream(name: str, t: pa.DataType, probe) -> tuple[str, int] | str:
    """(format, dim) of the stream column ``name`` holds, or a reason it holds none. ``probe``: the
    column's first rows (an Arrow array or None), from which a ``list`` layout's dim is told."""
    kind = layout(t)
    if kind == SCALAR:
        return "dense", 1
    if kind == ROW:
        return "dense", t.list_size
    if kind == LIST:
        return "dense", _one_length(probe) or 1
    if kind == MAPPING:
        inner = t.value_type
        if pa.types.is_fixed_size_list(inner) and number(inner.value_type):
            return "dense", inner.list_size
        if is_list(inner) and number(inner.value_type):
            samples = probe.flatten() if probe is not None else None
            dim = _one_length(samples)
            return ("dense", dim) if dim else f"is {t} and its first rows' lists do not all hold one number of values"
        if pa.types.is_struct(inner) and inner.get_field_index("indices") >= 0:
            return f"is {t}: a sparse stream, whose dim the data does not tell (declare it: --stream {name}=sparse:DIM)"
        return f"is {t}"
    if kind == BYTES:
        return ("bytes", 1) if bytes_column(t) else f"is {t}: a struct that is no image (no 'bytes' field)"
    return f"is {t}"


def bytes_column(t: pa.DataType) -> bool:
    """Whether a column of type ``t`` holds one bytes value a row: a string, a binary, or a struct
    with a binary ``bytes`` field (``datasets``' ``Image``, ``Audio``)."""
    if pa.types.is_struct(t):
        i = t.get_field_index("bytes")
        return i >= 0 and bytes_column(t.field(i).type) and not pa.types.is_struct(t.field(i).type)
    return (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t))


def infer_streams(schema: pa.Schema, path: str, probe=None, skip=(KEY,)) -> list[StreamSpec]:
    """One stream a column (``skip`` left out), named after it, from its type (module docstring).
    ``probe(names)``: the first rows of those columns (a Table or RecordBatch), asked only for
    columns whose dim the type does not tell. A column no stream reads is a located error that
    names it and gives the ``--stream`` list reading the others."""
    names = [f.name for f in schema if f.name not in skip]
    need = [n for n in names if layout(schema.field(n).type) in (LIST, MAPPING)]
    rows = probe(need) if need and probe is not None else None
    streams, refused = [], []
    for n in names:
        t = schema.field(n).type
        col = rows.column(rows.schema.get_field_index(n)) if rows is not None and n in rows.schema.names else None
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks() if col.num_chunks else None
        got = column_stream(n, t, col)
        if isinstance(got, str):
            refused.append((n, f"column '{n}' {got}"))
        else:
            streams.append(StreamSpec(n, got[0], got[1], dtype=leaf_dtype(t)))
    if refused:
        raise refusal(path, refused, streams)
    if not streams:
        raise FormatError(path, "no columns to read as streams")
    return streams


def stream_flags(streams) -> str:
    """Streams as the ``--stream`` options that select them from the data set (its columns are named
    after the streams; an alias is the name a conversion back to CTF writes, not a column)."""
    return " ".join(f"--stream {s.name}={s.format}:{s.dim}" for s in streams)


def refusal(path: str, refused: list[tuple[str, str]], readable) -> FormatError:
    """The error for a data set some of whose columns no stream reads: ``refused`` holds (column,
    reason) pairs, ``readable`` the streams of the others."""
    others = (f"; to read the other columns, select them: {stream_flags(readable)}" if readable
              else "; no column holds a stream")
    return FormatError(path, f"{'; '.join(r for _, r in refused)}{others}",
                       record=f"column '{refused[0][0]}'")


def check_layout(spec: StreamSpec, t: pa.DataType) -> str | None:
    """What is wrong with reading stream ``spec`` from a column of type ``t`` in a layout other than
    the mapping's (None: nothing, or ``t`` is the mapping's and ``check_column_type`` judges it)."""
    kind = layout(t)
    if spec.is_bytes:
        return None if kind == BYTES and bytes_column(t) else "a string, binary or Image column (a bytes stream)"
    if kind in (SCALAR, ROW, LIST) and spec.is_sparse:
        return "a sparse stream needs list<struct<indices: list<int32>, values: list<float>>>"
    if kind == SCALAR and spec.dim != 1:
        return "a number per row: dense dim 1"
    if kind == ROW and spec.dim != t.list_size:
        return f"dense dim {t.list_size} (one sample a row; the column's samples hold {t.list_size} values)"
    if kind == BYTES:
        return f"numbers (strings, bytes and encoded images are read as a bytes stream: --stream {spec.name}=bytes)"
    return None


def _one_a_row(n: int) -> pa.Array:
    return pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32))])


def _first_null(arr, path, column, where, first_row) -> None:
    if arr.null_count:
        row = first_row + int(np.flatnonzero(~np.asarray(arr.is_valid().to_numpy(zero_copy_only=False)))[0])
        raise FormatError(path, f"column '{column}' holds a null (row {row} of {where}): every row needs a value",
                          record=f"{where}, row {row}, column '{column}'")


def to_mapping(arr: pa.Array, spec: StreamSpec, *, path: str, column: str, where: str, first_row: int = 0):
    """A column's array in the mapping's type, over the same value buffers; a located error for a
    null or, where ``spec`` reads a ``list<number>`` as one sample a row, a list of another length."""
    kind = layout(arr.type)
    if kind not in (SCALAR, ROW, LIST):
        return arr
    _first_null(arr, path, column, where, first_row)
    if kind == SCALAR:
        return pa.ListArray.from_arrays(_one_a_row(len(arr)), pa.FixedSizeListArray.from_arrays(arr, 1))
    if kind == ROW:
        return pa.ListArray.from_arrays(_one_a_row(len(arr)), arr)
    if spec.dim == 1:  # a sequence of numbers
        values = arr.values
        samples = pa.FixedSizeListArray.from_arrays(values, 1)
        cls = pa.ListArray if pa.types.is_list(arr.type) else pa.LargeListArray
        return cls.from_arrays(arr.offsets, samples)
    lens = _lengths(arr)
    bad = np.flatnonzero(lens != spec.dim)
    if len(bad):
        row = first_row + int(bad[0])
        raise FormatError(path, f"column '{column}': row {row} of {where} holds {int(lens[bad[0]])} values, the "
                                f"stream '{spec.name}' reads {spec.dim} a row (dense dim {spec.dim}, one sample a "
                                f"row); to read the lists as sequences declare --stream {spec.name}=dense:1:{column}",
                          record=f"{where}, row {row}, column '{column}'")
    start = int(np.asarray(arr.offsets.to_numpy(zero_copy_only=False))[0]) if len(arr) else 0
    flat = arr.values.slice(start, len(arr) * spec.dim)
    return pa.ListArray.from_arrays(_one_a_row(len(arr)), pa.FixedSizeListArray.from_arrays(flat, spec.dim))


def exact_values(values: np.ndarray, dtype, *, path: str, column: str, where: str, row_of=None) -> np.ndarray:
    """``values`` as ``dtype``; integers only where every one converts exactly (a located error
    naming the first that would not; ``row_of(k)``: where value k is, e.g. ``row 3 of row group 0``)."""
    dtype = np.dtype(dtype)
    if values.dtype.kind not in "iu" or len(values) == 0:
        return values.astype(dtype, copy=False)
    limit = EXACT_INT.get(dtype, 2**24)
    lo, hi = int(values.min()), int(values.max())
    out = values.astype(dtype)
    if -limit <= lo and hi <= limit:
        return out
    with np.errstate(invalid="ignore", over="ignore"):
        back = out.astype(values.dtype)
    bad = np.flatnonzero(back != values)
    if len(bad):
        k = int(bad[0])
        hint = " (read with --precision double: float64 holds integers up to 2**53)" if dtype == np.float32 else ""
        at = row_of(k) if row_of is not None else f"value {k} of {where}"
        raise FormatError(path, f"column '{column}': value {int(values[k])} ({at}) has no exact {dtype} form{hint}",
                          record=f"{at}, column '{column}'")
    return out
