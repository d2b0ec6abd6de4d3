"""Streams as Spark columns: the Parquet bridge's Arrow mapping, in the types Spark's Arrow path takes.

One row per sequence (``formats/parquet/arrow.py``): ``key`` (Spark ``long``: Spark has no
unsigned type, so keys of 2**63 and above are refused with a located error); a dense stream of
dim D as ``array<array<float>>`` (one inner array of D values per sample); a sparse stream as
``array<struct<indices: array<int>, values: array<float>>>`` (one struct per sample), which
``batch_to_chunk`` takes back; a bytes stream as ``binary`` (one value a sequence). ``double``
instead of ``float`` for float64 data.

Every stream column carries its declaration in the field metadata (``recordkit.stream``:
``NAME=FORMAT:DIM``), so a DataFrame read from recordkit data writes back without
restating its streams.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from recordkit.engine.streams import StreamSpec, resolve_precision
from recordkit.errors import FormatError, UsageError
from recordkit.formats.parquet.arrow import KEY, chunk_to_batch, schema_for, sequence_runs

META = "recordkit.stream"


def spark_schema(streams, precision):
    """The Spark ``StructType`` of the mapping (stream declarations in the fields' metadata)."""
    from pyspark.sql.types import (ArrayType, BinaryType, DoubleType, FloatType, IntegerType, LongType,
                                   StructField, StructType)
    value = DoubleType() if resolve_precision(precision) == np.float64 else FloatType()
    fields = [StructField(KEY, LongType(), nullable=False)]
    for s in streams:
        if s.is_bytes:  # one value a sequence, as the Parquet mapping's binary column
            fields.append(StructField(s.name, BinaryType(), nullable=False, metadata={META: f"{s.name}=bytes"}))
            continue
        if s.is_sparse:
            sample = StructType([StructField("indices", ArrayType(IntegerType(), False), False),
                                 StructField("values", ArrayType(value, False), False)])
        else:
            sample = ArrayType(value, False)
        fields.append(StructField(s.name, ArrayType(sample, False), nullable=False,
                                  metadata={META: f"{s.name}={s.format}:{s.dim}"}))
    return StructType(fields)


def arrow_schema(schema) -> pa.Schema:
    """The Arrow schema Spark expects of batches of ``schema`` (a data source's ``read`` must match it)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    return to_arrow_schema(schema, timezone="UTC")


def batches(chunk, streams, precision, target: pa.Schema, path: str):
    """A chunk as RecordBatches of ``target`` (the bridge's batches, cast: fixed-size sample lists to
    lists, uint64 keys to long)."""
    dtype = resolve_precision(precision)
    bridge = schema_for(streams, precision)
    keys = np.asarray(chunk.keys)
    if len(keys) and int(keys.max()) > np.iinfo(np.int64).max:
        i = int(np.argmax(keys))
        raise FormatError(path, f"sequence key {int(keys[i])} does not fit Spark's long (keys must be below "
                                f"2**63)", record=f"chunk {chunk.chunk_id}, sequence {i}")
    for a, b in sequence_runs(chunk, streams):
        batch = chunk_to_batch(chunk, streams, bridge, dtype, a, b)
        yield pa.RecordBatch.from_arrays([c.cast(f.type) for c, f in zip(batch.columns, target)], schema=target)


def streams_of(schema, declared=None) -> list[StreamSpec]:
    """The streams a DataFrame of ``schema`` writes: ``declared`` (``NAME=FORMAT:DIM`` strings or specs),
    else every column's recorded declaration (the field metadata a recordkit read sets)."""
    if declared:
        specs = [StreamSpec.parse(s) if isinstance(s, str) else s for s in declared]
    else:
        specs = []
        for f in schema.fields:
            if f.name == KEY:
                continue
            text = (f.metadata or {}).get(META)
            if text is None:
                raise UsageError(f"column '{f.name}' records no stream declaration: give "
                                 f".option('streams', 'NAME=FORMAT:DIM,...') for the columns to write")
            specs.append(StreamSpec.parse(text))
    names = set(schema.names)
    missing = [s.alias for s in specs if s.alias not in names]
    if missing:
        raise UsageError(f"no column {', '.join(repr(m) for m in missing)} in the DataFrame (columns: "
                         f"{', '.join(schema.names)})")
    return specs


def precision_of(schema, streams) -> str:
    """'double' when a stream column holds doubles, else 'float'."""
    from pyspark.sql.types import DoubleType
    text = " ".join(schema[s.alias].dataType.simpleString() for s in streams)
    return "double" if DoubleType().simpleString() in text else "float"
