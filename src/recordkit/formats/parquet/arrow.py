"""Stream data <-> Arrow columns: the interchange mapping of Parquet and Hugging Face datasets.

One row per sequence:

* ``key``: uint64, the sequence key (the value ``recordkit cat`` prints as ``key``);
* a dense stream ``NAME`` of dim D: column ``NAME`` of type ``list<fixed_size_list<float32>[D]>``
  (one inner list per sample; ``float64`` where the data is float64);
* a sparse stream ``NAME``: column ``NAME`` of type
  ``list<struct<indices: list<int32>, values: list<float32>>>`` (one struct per sample);
* a bytes stream ``NAME``: column ``NAME`` of type ``binary``, its one value a row (read back
  from any string, binary or ``Image`` column: ``arrow_layouts.py``).

The schema metadata key ``recordkit.streams`` holds the stream declarations
(``streams_to_json``: name, alias, format, dim, precision), so reading the data back or
converting it again needs no ``--stream``.

Columns are built from a chunk's contiguous buffers and offsets (zero-copy where Arrow
allows), and read back the same way: no per-value or per-sequence Python in either direction.
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from recordkit.engine.chunk import BytesColumn, ChunkData, DenseColumn, SparseColumn, object_array
from recordkit.engine.streams import StreamSpec, resolve_precision, streams_from_json, streams_to_json
from recordkit.errors import FormatError
from recordkit.formats.sharding import declared_column
from recordkit.formats.arrow_layouts import KEY, LIST, ROW, SCALAR, check_layout, exact_values, infer_streams, \
    layout, leaf_dtype, number, to_mapping
META_STREAMS = b"recordkit.streams"
META_SAMPLES = b"recordkit.row_group_samples"
INT32_MAX = 2**31 - 1


def value_type(dtype) -> pa.DataType:
    return pa.float64() if resolve_precision(dtype) == np.float64 else pa.float32()


def stream_type(spec: StreamSpec, dtype) -> pa.DataType:
    if spec.is_bytes:
        return pa.binary()
    f = value_type(dtype)
    if spec.is_sparse:
        return pa.list_(pa.struct([("indices", pa.list_(pa.int32())), ("values", pa.list_(f))]))
    return pa.list_(pa.list_(f, spec.dim))


def schema_for(streams, precision, metadata: dict | None = None) -> pa.Schema:
    """The schema of the mapping, with the stream declarations in its metadata."""
    dtype = resolve_precision(precision)
    fields = [pa.field(KEY, pa.uint64(), nullable=False)]
    fields += [pa.field(s.name, stream_type(s, dtype)) for s in streams]
    meta = {META_STREAMS: json.dumps(streams_to_json(streams, precision)).encode()}
    meta.update(metadata or {})
    return pa.schema(fields, metadata=meta)


def numbers(values: np.ndarray, type_: pa.DataType) -> pa.Array:
    """A NumPy vector as an Arrow array over the same memory (``pa.array`` would import pandas,
    about a second, on its first call)."""
    values = np.ascontiguousarray(values, dtype=type_.to_pandas_dtype())
    return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(values)])


def _i32(offsets: np.ndarray, what: str) -> pa.Array:
    if len(offsets) and offsets[-1] > INT32_MAX:
        raise OverflowError(what)
    return numbers(offsets.astype(np.int32, copy=False), pa.int32())


def dense_array(col: DenseColumn, dim: int, dtype, a: int, b: int) -> pa.Array:
    """Sequences a..b of a dense column as ``list<fixed_size_list<float>[dim]>``."""
    so = np.asarray(col.seq_offsets[a:b + 1], dtype=np.int64)
    lo, hi = int(so[0]), int(so[-1])
    values = np.ascontiguousarray(col.values[lo:hi], dtype=dtype).reshape(-1)
    inner = pa.FixedSizeListArray.from_arrays(numbers(values, value_type(dtype)), dim)
    return pa.ListArray.from_arrays(_i32(so - lo, "samples"), inner)


def sparse_array(col: SparseColumn, dtype, a: int, b: int, vtype: pa.DataType) -> pa.Array:
    """Sequences a..b of a sparse column as ``list<struct<indices: list<int32>, values: list<float>>>``."""
    so = np.asarray(col.seq_offsets[a:b + 1], dtype=np.int64)
    s0, s1 = int(so[0]), int(so[-1])
    ptr = np.asarray(col.indptr[s0:s1 + 1], dtype=np.int64)
    lo, hi = int(ptr[0]), int(ptr[-1])
    rel = _i32(ptr - lo, "non-zero values")
    indices = pa.ListArray.from_arrays(rel, numbers(col.indices[lo:hi], pa.int32()))
    values = pa.ListArray.from_arrays(rel, numbers(col.values[lo:hi], value_type(dtype)))
    samples = pa.StructArray.from_arrays([indices, values], fields=list(vtype))
    return pa.ListArray.from_arrays(_i32(so - s0, "samples"), samples)


def chunk_to_batch(chunk: ChunkData, streams, schema: pa.Schema, dtype, a: int = 0, b: int | None = None):
    """Sequences a..b of a chunk as a RecordBatch of ``schema``."""
    b = len(chunk) if b is None else b
    arrays = [numbers(np.asarray(chunk.keys[a:b]).astype(np.uint64, copy=False), pa.uint64())]
    for spec in streams:
        col = declared_column(chunk, spec)
        if spec.is_bytes:
            arrays.append(pa.array(col.values[a:b].tolist(), pa.binary()))
        elif spec.is_sparse:
            arrays.append(sparse_array(col, dtype, a, b, schema.field(spec.name).type.value_type))
        else:
            arrays.append(dense_array(col, spec.dim, dtype, a, b))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def sequence_runs(chunk: ChunkData, streams, limit: int = INT32_MAX):
    """(a, b) runs of a chunk's sequences whose samples and non-zeros each fit Arrow's 32-bit list
    offsets (almost always one run: the whole chunk)."""
    n = len(chunk)
    if n == 0:
        return []
    sizes = np.zeros(n, dtype=np.int64)
    for spec in streams:
        col = chunk.columns[spec.name]
        if col.is_bytes:  # a binary column's offsets count bytes
            sizes = np.maximum(sizes, np.fromiter(map(len, col.values), dtype=np.int64, count=n))
            continue
        counts = np.diff(col.seq_offsets)
        sizes = np.maximum(sizes, counts)
        if col.is_sparse:
            sizes = np.maximum(sizes, np.diff(np.asarray(col.indptr)[col.seq_offsets]))
    if sizes.sum() <= limit:
        return [(0, n)]
    runs, a, total = [], 0, 0
    for i, s in enumerate(sizes.tolist()):
        if total + s > limit and i > a:
            runs.append((a, i))
            a, total = i, 0
        total += s
    runs.append((a, n))
    return runs


# ------------------------------------------------------------------------------------------------
# reading: Arrow -> ChunkData


def recorded_streams(schema: pa.Schema, path: str):
    """The stream declarations a schema records (None when it records none)."""
    meta = schema.metadata or {}
    raw = meta.get(META_STREAMS)
    if raw is None:
        return None
    try:
        return streams_from_json(json.loads(raw))
    except (ValueError, TypeError) as e:
        raise FormatError(path, f"the schema metadata's {META_STREAMS.decode()} is not a valid stream "
                                f"declaration list: {e}") from None


def check_column_type(path: str, spec: StreamSpec, column: str, t: pa.DataType) -> None:
    """A located error unless ``t`` holds stream ``spec`` in the mapping (or a list form of it)."""
    def bad(expected):
        return FormatError(path, f"column '{column}' (stream '{spec.name}', {spec.format} dim {spec.dim}) is {t}: "
                                 f"expected {expected}", record=f"column '{column}'")
    problem = check_layout(spec, t)  # one sample a row, a list of numbers, or bytes (arrow_layouts.py)
    if problem is not None:
        raise bad(problem)
    if layout(t) in (SCALAR, ROW, LIST) or spec.is_bytes:
        return
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        raise bad("a list per sequence")
    inner = t.value_type
    if spec.is_sparse:
        if not pa.types.is_struct(inner) or inner.get_field_index("indices") < 0 \
                or inner.get_field_index("values") < 0:
            raise bad("list<struct<indices: list<int32>, values: list<float>>>")
        for name in ("indices", "values"):
            ft = inner.field(name).type
            if not (pa.types.is_list(ft) or pa.types.is_large_list(ft)) or not number(ft.value_type):
                raise bad(f"list<struct<indices: list<int32>, values: list<float>>> ({name} is {ft})")
        if not pa.types.is_integer(inner.field("indices").type.value_type):
            raise bad("integer sparse indices")
    else:
        if pa.types.is_fixed_size_list(inner):
            if inner.list_size != spec.dim:
                raise bad(f"list<fixed_size_list<float>[{spec.dim}]> (the column's samples hold {inner.list_size})")
            if not number(inner.value_type):
                raise bad(f"list<fixed_size_list<float>[{spec.dim}]>")
        elif not ((pa.types.is_list(inner) or pa.types.is_large_list(inner)) and number(inner.value_type)):
            raise bad(f"list<fixed_size_list<float>[{spec.dim}]>")


def to_numpy(arr) -> np.ndarray:
    """A primitive Arrow array without nulls as NumPy, a view of its buffer (``to_numpy`` may import
    pandas, a second on its first call)."""
    dtype = np.dtype(arr.type.to_pandas_dtype())
    buf = arr.buffers()[1]
    if buf is None or len(arr) == 0:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(buf, dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize)


def _offsets(arr) -> np.ndarray:
    o = to_numpy(arr.offsets).astype(np.int64, copy=False)
    return o - o[0]


def _nulls(arr, path, column, where, row0=0):
    if arr.null_count:
        row = row0 + arr.is_valid().to_pylist().index(False)
        raise FormatError(path, f"column '{column}' holds a null (row {row} of {where}): every sequence needs a "
                                f"list (empty for no samples)", record=where)


def _dense_from(arr, spec: StreamSpec, dtype, path, column, where, row0=0) -> DenseColumn:
    arr = to_mapping(arr, spec, path=path, column=column, where=where, first_row=row0)
    _nulls(arr, path, column, where, row0)
    so = _offsets(arr)
    samples = arr.flatten()
    _nulls(samples, path, column, where)
    if pa.types.is_fixed_size_list(samples.type):
        flat = samples.flatten()
    else:  # variable lists: each must hold dim values
        lens = np.diff(_offsets(samples))
        if len(lens) and np.any(lens != spec.dim):
            k = int(np.flatnonzero(lens != spec.dim)[0])
            raise FormatError(path, f"column '{column}': sample {k} holds {int(lens[k])} values, the stream's dim "
                                    f"is {spec.dim}", record=where)
        flat = samples.flatten()
    _nulls(flat, path, column, where)
    values = exact_values(to_numpy(flat), dtype, path=path, column=column, where=where,
                          row_of=lambda k: f"row {row0 + int(np.searchsorted(so, k // spec.dim, 'right')) - 1} of {where}")
    return DenseColumn(values.reshape(-1, spec.dim), so)


def _bytes_from(arr, spec: StreamSpec, dtype, path, column, where, row0=0) -> BytesColumn:
    """A string, binary or ``Image`` column as one ``bytes`` a row (strings as UTF-8)."""
    if pa.types.is_struct(arr.type):
        _first_null_value(arr, path, column, where, row0)
        arr = arr.field("bytes")
    _first_null_value(arr, path, column, where, row0)
    if pa.types.is_string(arr.type):
        arr = arr.cast(pa.binary())  # the same buffers: no copy, no decoding
    elif pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.large_binary())
    return BytesColumn(object_array(arr.to_pylist()))


def _first_null_value(arr, path, column, where, row0):
    if arr.null_count:
        row = row0 + arr.is_valid().to_pylist().index(False)
        raise FormatError(path, f"column '{column}' holds a null (row {row} of {where}): a bytes stream needs a "
                                f"value every row", record=f"{where}, row {row}, column '{column}'")


def _sparse_from(arr, spec: StreamSpec, dtype, path, column, where, row0=0) -> SparseColumn:
    _nulls(arr, path, column, where, row0)
    so = _offsets(arr)
    samples = arr.flatten()
    _nulls(samples, path, column, where)
    fields = {samples.type.field(i).name: f for i, f in enumerate(samples.flatten())}
    ind, val = fields["indices"], fields["values"]
    _nulls(ind, path, column + ".indices", where)
    _nulls(val, path, column + ".values", where)
    iptr, vptr = _offsets(ind), _offsets(val)
    if not np.array_equal(iptr, vptr):
        k = int(np.flatnonzero(np.diff(iptr) != np.diff(vptr))[0])
        raise FormatError(path, f"column '{column}': sample {k} has {int(iptr[k + 1] - iptr[k])} indices but "
                                f"{int(vptr[k + 1] - vptr[k])} values", record=where)
    indices = to_numpy(ind.flatten())
    values = to_numpy(val.flatten())
    if len(indices) and (indices.min() < 0 or indices.max() >= spec.dim):
        k = int(np.flatnonzero((indices < 0) | (indices >= spec.dim))[0])
        raise FormatError(path, f"column '{column}': sparse index {int(indices[k])} outside [0, {spec.dim})",
                          record=where)
    return SparseColumn(values.astype(dtype, copy=False), indices.astype(np.int32, copy=False), iptr, so, spec.dim)


def batch_to_chunk(batch, selected, *, path: str, where: str, chunk_id: int, first_key: int,
                   first_row: int = 0) -> ChunkData:
    """A RecordBatch/Table of the mapping as a ChunkData. ``selected``: (column name, StreamSpec) pairs
    (the spec's dtype is the element type delivered); ``first_row``: the batch's first row in ``where``
    (for messages)."""
    if isinstance(batch, pa.Table):
        batch = batch.combine_chunks().to_batches()[0] if batch.num_rows else None
    if batch is None:
        keys = np.zeros(0, dtype=np.uint64)
        n = 0
    else:
        n = batch.num_rows
        names = batch.schema.names
        if KEY in names:
            k = batch.column(names.index(KEY))
            _nulls(k, path, KEY, where, first_row)
            kv = to_numpy(k)
            if kv.dtype.kind == "i" and len(kv) and kv.min() < 0:
                raise FormatError(path, f"column 'key' holds a negative key {int(kv.min())}", record=where)
            keys = kv.astype(np.uint64)
        else:
            keys = np.arange(first_key, first_key + n, dtype=np.uint64)
    cols, counts = {}, []
    for column, spec in selected:
        dtype = spec.dtype or np.float32
        if batch is None and spec.is_bytes:
            col = BytesColumn(object_array([]))
        elif batch is None:
            col = (SparseColumn(np.zeros(0, dtype), np.zeros(0, np.int32), np.zeros(1, np.int64),
                                np.zeros(1, np.int64), spec.dim) if spec.is_sparse
                   else DenseColumn(np.zeros((0, spec.dim), dtype), np.zeros(1, np.int64)))
        else:
            arr = batch.column(batch.schema.get_field_index(column))
            read = _bytes_from if spec.is_bytes else _sparse_from if spec.is_sparse else _dense_from
            col = read(arr, spec, dtype, path, column, where, first_row)
        cols[spec.name] = col
        counts.append(np.diff(col.seq_offsets))
    defining = [i for i, (_, s) in enumerate(selected) if s.defines_mb_size]
    if defining:
        lengths = counts[defining[0]]
    else:
        lengths = np.max(np.vstack(counts), axis=0) if n and counts else np.zeros(n, dtype=np.int64)
    return ChunkData(chunk_id, keys, np.asarray(lengths, dtype=np.int64), cols)


def select_streams(schema: pa.Schema, path: str, streams=None, precision=None, probe=None):
    """(column, StreamSpec) pairs to read: the recorded declarations, or ``streams`` selecting
    columns by alias (``NAME=FORMAT:DIM:COLUMN``) and renaming them ``NAME``, or with neither, the
    streams the column types imply (``arrow_layouts.infer_streams``; ``probe(names)``: the first
    rows of those columns). Each column's type is checked against its declaration (a located
    error when it does not match)."""
    try:
        names = schema.names
    except UnicodeDecodeError:
        raise FormatError(path, "the schema's column names are not valid UTF-8 (damaged file?)") from None
    recorded = recorded_streams(schema, path)
    want = resolve_precision(precision) if precision is not None else None
    by_name = {s.name: s for s in recorded or []}
    pairs = []
    if streams is None and recorded is None:
        streams = infer_streams(schema, path, probe)
        recorded = None
    if streams is None:
        for s in recorded:
            pairs.append((s.name, StreamSpec(s.name, s.format, s.dim, s.alias, s.defines_mb_size,
                                             None if s.is_bytes else want or s.dtype or np.float32)))
    else:
        for spec in streams:
            column = spec.alias
            rec = by_name.get(column)
            if rec is not None and (rec.format != spec.format or rec.dim != spec.dim):
                from recordkit.errors import UsageError
                raise UsageError(f"{path}: stream '{spec.name}' is declared {spec.format} dim {spec.dim}, but the "
                                 f"data's stream '{column}' is {rec.format} dim {rec.dim}")
            dtype = want or (rec.dtype if rec is not None else None)
            if dtype is None and column in names and not spec.is_bytes:
                dtype = leaf_dtype(schema.field(column).type)
            alias = rec.alias if rec is not None else column
            pairs.append((column, StreamSpec(spec.name, spec.format, spec.dim, alias, spec.defines_mb_size,
                                             dtype or np.float32)))
    for column, spec in pairs:
        if column not in names:
            raise FormatError(path, f"no column '{column}' (stream '{spec.name}'); the columns are: "
                                    f"{', '.join(names)}", record=f"column '{column}'")
        check_column_type(path, spec, column, schema.field(column).type)
    from recordkit.engine.streams import check_streams
    check_streams([s for _, s in pairs])
    if KEY in names and not pa.types.is_integer(schema.field(KEY).type):
        raise FormatError(path, f"column 'key' is {schema.field(KEY).type}: expected an integer key per sequence",
                          record="column 'key'")
    return pairs


class ChunkBatches:
    """Record batches of one input chunk, gathered until the next chunk starts: a writer turns each
    gathering into one row group (Parquet) or fragment (Lance), so the output's chunks are the
    input's (a CTF chunk parsed in pieces arrives as several runs of one chunk id) and a randomized
    read of the output draws the same order. A chunk id below 0 (a chunk made on the fly) is never
    joined with another."""

    def __init__(self, streams, schema, dtype):
        self._streams, self._schema, self._dtype = streams, schema, dtype
        self._batches: list = []
        self._samples = 0
        self._id = None

    def starts_new(self, chunk) -> bool:
        """Whether rows of ``chunk`` cannot join what is gathered (take it first)."""
        return bool(self._batches) and (chunk.chunk_id < 0 or chunk.chunk_id != self._id)

    def add(self, chunk, a: int, b: int) -> None:
        """Sequences ``a:b`` of ``chunk``."""
        self._batches.append(chunk_to_batch(chunk, self._streams, self._schema, self._dtype, a, b))
        self._samples += int(np.asarray(chunk.lengths[a:b]).sum())
        self._id = chunk.chunk_id

    def take(self):
        """``(table, samples)`` of what was gathered, emptied; None when nothing was."""
        if not self._batches:
            return None
        table = pa.Table.from_batches(self._batches, schema=self._schema)
        samples, self._batches, self._samples = self._samples, [], 0
        return table, samples

    def clear(self) -> None:
        self._batches, self._samples = [], 0
