"""OFRecord records into a Lance data set feature by feature (no ``--stream``): encoded images and
other bytes kept as binary columns, byte for byte (``formats/records_bridge.py`` drives it).

The columns come from the first record: ``key`` (uint64: the record's one-value int64 ``key``
feature, else its position), then per feature in name order a bytes feature holding one value
as ``binary`` (several: ``list<binary>``), a numeric one as ``list<float32|float64|int32|int64>``
(the list's own type). A later record whose features differ (one missing, added, of another kind,
a binary feature with several values) is an error naming the part, the byte offset and the record.
Fragments of about ``fragment_bytes`` are written as records arrive; ``close`` commits them.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from recordkit.engine import DEFAULT_CHUNK_SIZE
from recordkit.errors import FormatError
from recordkit.formats.closing import AtomicWriter
from recordkit.formats.lance.writer import LanceTarget, refuse_options

_NUMBERS = {"float_list": pa.float32(), "double_list": pa.float64(), "int32_list": pa.int32(),
            "int64_list": pa.int64()}


class LanceRecordWriter(AtomicWriter):
    def __init__(self, path, *, storage_options=None, fragment_bytes: int = DEFAULT_CHUNK_SIZE, checksums=False,
                 parts=None, shard_size=None, **_):
        self.path = str(path)
        refuse_options(self.path, checksums=checksums, parts=parts, shard_size=shard_size)
        self._target = LanceTarget(self.path, storage_options)
        self._fragment_bytes = int(fragment_bytes)
        self.schema = None
        self._rows: dict[str, list] = {}
        self._bytes = 0
        self.records_written = 0

    def _schema_of(self, features: dict) -> pa.Schema:
        fields = [pa.field("key", pa.uint64(), nullable=False)]
        for name in sorted(features):
            f = features[name]
            if f.kind == "bytes_list":
                fields.append(pa.field(name, pa.binary() if len(f.value) == 1 else pa.list_(pa.binary())))
            else:
                fields.append(pa.field(name, pa.list_(_NUMBERS[f.kind])))
        return pa.schema(fields)

    def write_record(self, key: int, features: dict, *, part: str, offset: int, index: int) -> None:
        """One record: ``features`` {name: Feature} (the key feature left out when it is the key)."""
        if self.schema is None:
            self.schema = self._schema_of(features)
            self._rows = {n: [] for n in self.schema.names}
        names = self.schema.names[1:]
        if sorted(features) != names:
            raise FormatError(part, f"the record's features ({', '.join(sorted(features)) or 'none'}) differ from "
                                    f"the first record's ({', '.join(names)}): one Lance column per feature needs "
                                    f"the same features in every record", offset=offset, record=f"record {index}")
        self._rows["key"].append(key)
        for name in names:
            f, t = features[name], self.schema.field(name).type
            if f.kind == "bytes_list" and t == pa.binary():
                if len(f.value) != 1:
                    raise FormatError(part, f"feature '{name}' holds {len(f.value)} values; the first record's held "
                                            f"one (a binary column)", offset=offset, record=f"record {index}")
                self._rows[name].append(bytes(f.value[0]))
                self._bytes += len(f.value[0])
            elif f.kind == "bytes_list" and t == pa.list_(pa.binary()):
                self._rows[name].append([bytes(b) for b in f.value])
                self._bytes += sum(len(b) for b in f.value)
            elif f.kind in _NUMBERS and t == pa.list_(_NUMBERS[f.kind]):
                values = np.asarray(f.value)
                self._rows[name].append(values)
                self._bytes += values.nbytes
            else:
                raise FormatError(part, f"feature '{name}' is a {f.kind}; the first record's was the column type {t}",
                                  offset=offset, record=f"record {index}")
        self.records_written += 1
        if self._bytes >= self._fragment_bytes:
            self._flush()

    def _flush(self) -> None:
        if not self._rows.get("key"):
            return
        arrays = []
        for field in self.schema:
            column = self._rows[field.name]
            if pa.types.is_list(field.type) and field.type.value_type != pa.binary():
                offsets = np.zeros(len(column) + 1, dtype=np.int32)
                np.cumsum([len(v) for v in column], out=offsets[1:])
                values = np.concatenate(column) if column else np.zeros(0)
                arrays.append(pa.ListArray.from_arrays(pa.array(offsets), pa.array(
                    values.astype(field.type.value_type.to_pandas_dtype(), copy=False))))
            else:
                arrays.append(pa.array(column, type=field.type))
        self._target.write(pa.Table.from_arrays(arrays, schema=self.schema))
        self._rows = {n: [] for n in self.schema.names}
        self._bytes = 0

    def close(self) -> None:
        try:
            if self.schema is None:
                self.schema = pa.schema([pa.field("key", pa.uint64(), nullable=False)])
            self._flush()
            self._target.commit(self.schema)
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        self._rows = {}
        self._target.abort()
