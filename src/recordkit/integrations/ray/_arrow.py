"""Chunks as Arrow tables and back: the column layout every Ray block of recordkit data has.

One row per sequence:

* ``key``: uint64, the sequence key (CTF sequence id, CBF ordinal, OFRecord ``key`` feature...);
* a dense stream ``NAME`` of dim d: one (samples, d) tensor per row, as Ray's tensor
  extension: a fixed-shape tensor column when every sequence of the block has the same
  number of samples, else a variable-shaped one (Ray unifies the two across blocks);
* a sparse stream ``NAME``: ``NAME.indices`` (int32) and ``NAME.values`` (the stream's
  float type), the sequence's stored entries sample after sample, and ``NAME.nnz``
  (int64), the entries of each sample, so ``len(NAME.nnz)`` is the sequence's sample count.
  All three are ``large_list`` columns, so no block can overflow 32-bit list offsets.

The columns are built straight from the chunk's contiguous buffers (offset arithmetic, no
per-sequence Python), and read back the same way, so a conversion through Ray costs a copy
or two per chunk, not a Python loop per value.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from recordkit.engine.chunk import ChunkData, DenseColumn, SparseColumn
from recordkit.errors import UsageError

KEY = "key"
PATH = "path"


def _tensor_types():
    from ray.data.extensions import ArrowTensorArray, ArrowVariableShapedTensorArray, ArrowVariableShapedTensorType
    return ArrowTensorArray, ArrowVariableShapedTensorArray, ArrowVariableShapedTensorType


def sparse_columns(name: str) -> tuple[str, str, str]:
    """The three column names of sparse stream ``name``: indices, values, per-sample counts."""
    return f"{name}.indices", f"{name}.values", f"{name}.nnz"


def chunk_to_arrow(chunk: ChunkData, streams, *, path: str | None = None) -> pa.Table:
    """One chunk as an Arrow table in the layout of the module docstring (``path``: add a path column)."""
    names, arrays = [KEY], [pa.array(np.asarray(chunk.keys).astype(np.uint64, copy=False), pa.uint64())]
    for spec in streams:
        col = chunk.columns[spec.name]
        if spec.is_sparse:
            so = np.asarray(col.seq_offsets, dtype=np.int64)
            ptr = np.asarray(col.indptr, dtype=np.int64)
            lo, hi = int(ptr[so[0]]), int(ptr[so[-1]])
            entry_offsets = pa.array(ptr[so] - lo, pa.int64())
            names += list(sparse_columns(spec.name))
            arrays += [pa.LargeListArray.from_arrays(entry_offsets, pa.array(
                           np.asarray(col.indices[lo:hi]).astype(np.int32, copy=False))),
                       pa.LargeListArray.from_arrays(entry_offsets, pa.array(np.asarray(col.values[lo:hi]))),
                       pa.LargeListArray.from_arrays(pa.array(so - so[0], pa.int64()),
                                                     pa.array(np.diff(ptr)[so[0]:so[-1]], pa.int64()))]
        else:
            names.append(spec.name)
            arrays.append(dense_tensor_array(col))
    if path is not None:
        names.append(PATH)
        arrays.append(pa.array([path] * len(chunk), pa.string()))
    return pa.Table.from_arrays(arrays, names=names)


def dense_tensor_array(col: DenseColumn) -> pa.Array:
    """A dense column as one (samples, dim) tensor per sequence (fixed shape when all agree)."""
    ArrowTensorArray, ArrowVariableShapedTensorArray, VarType = _tensor_types()
    values = np.ascontiguousarray(col.values)
    d = values.shape[1]
    so = np.asarray(col.seq_offsets, dtype=np.int64)
    counts = np.diff(so)
    n = len(counts)
    if n and counts[0] > 0 and np.all(counts == counts[0]):
        return ArrowTensorArray.from_numpy(values[so[0]:so[-1]].reshape(n, int(counts[0]), d))
    # variable shapes: build the extension's storage (data: large_list, shape: list) from the offsets
    vtype = VarType(pa.from_numpy_dtype(values.dtype), 2)
    data = pa.LargeListArray.from_arrays(pa.array((so - so[0]) * d, pa.int64()),
                                         pa.array(values[so[0]:so[-1]].reshape(-1)))
    shape_offsets = pa.array(np.arange(0, 2 * n + 1, 2, dtype=np.int32))
    shapes = pa.ListArray.from_arrays(shape_offsets, pa.array(
        np.column_stack([counts, np.full(n, d, dtype=np.int64)]).reshape(-1), pa.int64()))
    storage = pa.StructArray.from_arrays([data, shapes], ["data", "shape"])
    if storage.type != vtype.storage_type:  # another Ray release, another layout: its own constructor
        return ArrowVariableShapedTensorArray.from_numpy([values[a:b] for a, b in zip(so[:-1], so[1:])])
    return pa.ExtensionArray.from_storage(vtype, storage)


# ------------------------------------------------------------------------------------------------
# back: Arrow (or anything Ray's BlockAccessor turns into Arrow) -> ChunkData


def to_table(block) -> pa.Table:
    """A Ray block (Arrow or pandas) or a batch (dict of arrays) as an Arrow table."""
    if isinstance(block, pa.Table):
        return block
    if isinstance(block, dict):
        from ray.data.block import BlockAccessor
        return BlockAccessor.batch_to_block(block)
    from ray.data.block import BlockAccessor
    return BlockAccessor.for_block(block).to_arrow()


def _column(table: pa.Table, name: str, what: str) -> pa.ChunkedArray:
    if name not in table.column_names:
        raise UsageError(f"{what}: no column '{name}' in the data (it has: {', '.join(table.column_names)})")
    return table.column(name)


def _list_parts(column: pa.ChunkedArray, name: str):
    """(row offsets, flat values) of a column holding a list of numbers per row, whatever its
    chunking and slicing, as Arrow lists or as Ray tensors (which numpy batches turn into)."""
    offsets, values, base = [np.zeros(1, dtype=np.int64)], [], 0
    for arr in column.chunks:
        off, flat = _row_values(arr, name)
        offsets.append(off[1:] + base)
        values.append(flat)
        base += int(off[-1])
    flat = np.concatenate(values) if values else np.zeros(0)
    return np.concatenate(offsets), flat


def _is_list(t) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def _leaf_parts(arr):
    """(row offsets into the leaf values, leaf values) of a list array, nested lists flattened."""
    def offsets(a):
        if pa.types.is_fixed_size_list(a.type):
            return np.arange(len(a) + 1, dtype=np.int64) * a.type.list_size
        o = np.asarray(a.offsets, dtype=np.int64)
        return o - o[0]
    off = offsets(arr)
    child = arr.flatten()
    while _is_list(child.type):
        off = offsets(child)[off]
        child = child.flatten()
    return off, child.to_numpy(zero_copy_only=False)


def _row_values(arr, name: str):
    """(row offsets, flat values) of one Arrow array: the values each row holds, in row-major order."""
    _, _, VarType = _tensor_types()
    if isinstance(arr.type, VarType):  # storage: data (large_list of the raveled tensor), shape
        return _leaf_parts(arr.storage.field("data"))
    if isinstance(arr.type, pa.ExtensionType):  # fixed-shape tensors (Ray's or Arrow's own)
        nd = np.asarray(arr.to_numpy_ndarray() if hasattr(arr, "to_numpy_ndarray")
                        else arr.to_numpy(zero_copy_only=False))
        per = int(np.prod(nd.shape[1:])) if nd.ndim > 1 else 1
        return np.arange(len(nd) + 1, dtype=np.int64) * per, nd.reshape(-1)
    if _is_list(arr.type):
        return _leaf_parts(arr)
    if pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type):  # one number per row
        return np.arange(len(arr) + 1, dtype=np.int64), arr.to_numpy(zero_copy_only=False)
    raise UsageError(f"column '{name}' is {arr.type}: expected numbers, lists of numbers or tensors")


def _dense_parts(column: pa.ChunkedArray, name: str, dim: int, dtype):
    """(values (samples, dim), samples per row) of a dense column in any tensor or list form."""
    off, flat = _list_parts(column, name)
    sizes = np.diff(off)
    if np.any(sizes % dim):
        bad = int(np.flatnonzero(sizes % dim)[0])
        raise UsageError(f"dense stream '{name}': a row holds {int(sizes[bad])} values, not a multiple of "
                         f"its dim {dim}")
    values = np.asarray(flat, dtype=dtype) if len(flat) else np.zeros(0, dtype=dtype or np.float32)
    return values.reshape(-1, dim), (sizes // dim).astype(np.int64)


def _offsets(counts) -> np.ndarray:
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def arrow_to_chunk(table, streams, *, chunk_id: int = -1, first_key: int = 0, dtype=None) -> ChunkData:
    """The rows of a table (or Ray block/batch) in the layout above as a ChunkData.

    Rows without a ``key`` column are numbered from ``first_key``. ``dtype`` converts the
    stream values (default: each stream's own ``StreamSpec.dtype``, else as stored).
    """
    table = to_table(table)
    n = table.num_rows
    if KEY in table.column_names:
        k = np.asarray(table.column(KEY).to_numpy())
        keys = k.astype(np.uint64) if k.dtype.kind == "u" else k.astype(np.int64).view(np.uint64)
    else:
        keys = np.arange(first_key, first_key + n, dtype=np.uint64)
    cols, counts_all = {}, []
    for spec in streams:
        want = dtype or spec.dtype
        if spec.is_sparse:
            ni, nv, nn = sparse_columns(spec.name)
            ind_off, indices = _list_parts(_column(table, ni, f"sparse stream '{spec.name}'"), ni)
            val_off, values = _list_parts(_column(table, nv, f"sparse stream '{spec.name}'"), nv)
            seq_offsets, nnz = _list_parts(_column(table, nn, f"sparse stream '{spec.name}'"), nn)
            nnz = nnz.astype(np.int64)
            indptr = _offsets(nnz)
            # a negative count (-4 between two 4s adds up, too) would hand a sample another one's entries
            if (not np.array_equal(ind_off, val_off) or len(indices) != len(values) or np.any(nnz < 0)
                    or not np.array_equal(indptr[seq_offsets], ind_off)):
                raise UsageError(f"sparse stream '{spec.name}': the rows' {ni}, {nv} and {nn} do not agree "
                                 f"(each row needs as many indices as values, and {nn}, none negative, adding up "
                                 f"to them)")
            if len(indices) and (indices.min() < 0 or indices.max() >= spec.dim):
                raise UsageError(f"sparse stream '{spec.name}': an index outside [0, {spec.dim})")
            values = values if want is None else values.astype(want, copy=False)
            cols[spec.name] = SparseColumn(values, indices.astype(np.int32, copy=False), indptr, seq_offsets,
                                           spec.dim)
            counts_all.append(np.diff(seq_offsets))
        else:
            vals, counts = _dense_parts(_column(table, spec.name, f"dense stream '{spec.name}'"), spec.name,
                                        spec.dim, want)
            cols[spec.name] = DenseColumn(vals, _offsets(counts))
            counts_all.append(counts)
    defining = [i for i, s in enumerate(streams) if s.defines_mb_size]
    if defining:
        lengths = counts_all[defining[0]]
    else:
        lengths = np.max(np.vstack(counts_all), axis=0) if n and counts_all else np.zeros(n, dtype=np.int64)
    return ChunkData(chunk_id, keys, np.asarray(lengths, dtype=np.int64), cols)
