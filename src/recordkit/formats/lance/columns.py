"""The columns of a Lance data set as streams: recordkit's own, and those of other writers.

recordkit writes the Parquet mapping (``formats/parquet/arrow.py``: one row per sequence, a dense
stream ``list<fixed_size_list<float>[D]>``, a sparse one ``list<struct<indices, values>>``) and
records the streams in the schema metadata. A data set written by ``lance`` itself (a table of
embeddings and labels) usually holds one sample a row, so its columns are read as:

* a number (an ``int64`` label, a ``float``): a dense stream of dim 1, one sample a row;
* ``fixed_size_list<number>[D]`` (an embedding): a dense stream of dim D, one sample a row;
* ``list<number>``: a sequence, one sample of dim 1 per list element;
* ``list<fixed_size_list<number>[D]>`` (the mapping's dense form): a sequence of samples of dim D.

With neither recorded streams nor ``--stream`` every column but ``key`` is read this way, and any
other type (strings, binary, sparse structs, whose dim cannot be told) is an error naming the
column. Each column is rewritten into the mapping's type over the same buffers (no copy), so the
mapping's checks and decoding (``select_streams``, ``batch_to_chunk``) apply unchanged.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from recordkit.engine.streams import StreamSpec
from recordkit.errors import FormatError
from recordkit.formats.parquet.arrow import KEY

SCALAR, ROW, SEQUENCE, MAPPING = "number", "one sample a row", "sequence", "mapping"


def _number(t) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def _is_list(t) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t)


def layout(t: pa.DataType) -> str | None:
    """How a column of type ``t`` holds samples (None: not a layout this module reads)."""
    if _number(t):
        return SCALAR
    if pa.types.is_fixed_size_list(t) and _number(t.value_type):
        return ROW
    if _is_list(t) and _number(t.value_type):
        return SEQUENCE
    if _is_list(t):
        return MAPPING  # the mapping's types: select_streams checks them against their declaration
    return None


def mapping_type(t: pa.DataType) -> pa.DataType:
    """The mapping's type for a column of type ``t`` (``t`` itself when it is already one)."""
    kind = layout(t)
    if kind == SCALAR:
        return pa.list_(pa.list_(t, 1))
    if kind == ROW:
        return pa.list_(t)
    if kind == SEQUENCE:
        return pa.list_(pa.list_(t.value_type, 1)) if pa.types.is_list(t) else \
            pa.large_list(pa.list_(t.value_type, 1))
    return t


def mapping_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every stream column in the mapping's type (``key`` and the metadata kept)."""
    fields = [f if f.name == KEY else pa.field(f.name, mapping_type(f.type), f.nullable) for f in schema]
    return pa.schema(fields, metadata=schema.metadata)


def _one_a_row(n: int) -> pa.Array:
    return pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32))])


def to_mapping(arr: pa.Array) -> pa.Array:
    """A column's array in the mapping's type, over the same value buffers."""
    kind = layout(arr.type)
    if kind == SCALAR:
        return pa.ListArray.from_arrays(_one_a_row(len(arr)), pa.FixedSizeListArray.from_arrays(arr, 1))
    if kind == ROW:
        return pa.ListArray.from_arrays(_one_a_row(len(arr)), arr)
    if kind == SEQUENCE:
        samples = pa.FixedSizeListArray.from_arrays(arr.values, 1)
        cls = pa.ListArray if pa.types.is_list(arr.type) else pa.LargeListArray
        return cls.from_arrays(arr.offsets, samples, mask=arr.is_null() if arr.null_count else None)
    return arr


def table_to_mapping(table: pa.Table, columns) -> pa.Table:
    """``table`` with ``columns`` rewritten by ``to_mapping``."""
    for name in columns:
        i = table.schema.get_field_index(name)
        col = table.column(i)
        table = table.set_column(i, name, pa.chunked_array([to_mapping(c) for c in col.chunks],
                                                           type=mapping_type(col.type)))
    return table


def infer_streams(schema: pa.Schema, path: str) -> list[StreamSpec]:
    """Streams for a data set that records none: one per column but ``key`` (module docstring)."""
    streams = []
    for f in schema:
        if f.name == KEY:
            continue
        kind, t = layout(f.type), f.type
        if kind in (SCALAR, SEQUENCE):
            streams.append(StreamSpec(f.name, "dense", 1))
        elif kind == ROW:
            streams.append(StreamSpec(f.name, "dense", t.list_size))
        elif kind == MAPPING and pa.types.is_fixed_size_list(t.value_type) and _number(t.value_type.value_type):
            streams.append(StreamSpec(f.name, "dense", t.value_type.list_size))
        else:
            raise FormatError(path, f"column '{f.name}' is {t}: without recorded streams recordkit reads numbers "
                                    f"(dim 1), fixed_size_list<number>[D] (one sample a row), list<number> (a "
                                    f"sequence) and list<fixed_size_list<number>[D]>; declare the columns to read "
                                    f"with --stream NAME=dense:DIM[:COLUMN] or NAME=sparse:DIM[:COLUMN]",
                              record=f"column '{f.name}'")
    if not streams:
        raise FormatError(path, "no columns to read as streams")
    return streams
