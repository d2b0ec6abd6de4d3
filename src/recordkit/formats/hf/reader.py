"""HFDeserializer: a Hugging Face ``save_to_disk`` directory as a chunked Deserializer.

The data files are those ``state.json`` lists, in its order (Arrow IPC streams, memory-mapped:
batches are views of the file, nothing is copied until a chunk is decoded). Consecutive record
batches of a file are grouped into chunks of about ``chunk_size`` bytes (``datasets`` writes
batches of 1000 rows). Streams come from the Arrow schema metadata or ``dataset_info.json``
(``recordkit`` field) that ``HFWriter`` records; a data set written by ``datasets`` itself is
read with the streams its features imply (``formats/arrow_layouts.py``; a ``ClassLabel``'s names
are kept in ``column_notes``) or with declared streams (``--stream``) selecting columns.
Works without ``datasets`` installed (only pyarrow is needed to read).
"""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pyarrow as pa

from recordkit.engine.deserializer import ChunkInfo, DeserializerBase
from recordkit.engine.streams import streams_to_json
from recordkit.errors import FormatError, RecordkitError
from recordkit.formats.closing import ClosingReader
from recordkit.formats.parquet.arrow import META_STREAMS, batch_to_chunk, select_streams
from recordkit.formats.hf.description import class_labels, data_files, recorded_streams
from recordkit.storage import location

if TYPE_CHECKING:
    from recordkit.engine.chunk import ChunkData
    from recordkit.engine.streams import StreamSpec

from recordkit.engine import DEFAULT_CHUNK_SIZE  # noqa: E402,F401  (one constant)


def _read(path, storage_options) -> bytes:
    from recordkit.storage.source import open_file
    try:
        with open_file(path, storage_options=storage_options) as f:
            return f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: missing (a Hugging Face save_to_disk directory has state.json and "
                                f"dataset_info.json)") from None


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _check_batch(batch, path, j: int, *, full: bool) -> None:
    """A located error unless record batch ``j`` of ``path`` is consistent. An IPC stream is read as
    it is (memory-mapped, nothing checked): a damaged length or offset would make Arrow read outside
    the file (a crash) or hand one row another's values. Opening checks buffer sizes against the
    lengths (``nbytes`` reads them); loading a chunk checks every offset too (``full``)."""
    try:
        batch.validate(full=full)
    except (pa.ArrowException, ValueError) as e:
        raise FormatError(path, f"damaged Arrow data: {_first_line(e)}", record=f"record batch {j}") from None


def _first_rows(batches, columns, path):
    """The first record batch's ``columns`` (what tells a list column's dim), its offsets checked
    first: the probe reads them before any chunk is loaded."""
    if not batches:
        return None
    _check_batch(batches[0], path, 0, full=True)
    return batches[0].select(columns)


def open_stream(p, storage_options=None):
    """``(buffer, record batches, schema)`` of the Arrow IPC stream file ``p``: memory-mapped when a
    plain local file (a FIFO refused first: mapping it would block), else read whole (a URL, or a
    file verified against its checksum sidecar); every batch's buffer sizes checked against its
    lengths. The batches are views of the buffer: keep it."""
    from recordkit.storage.source import open_file, plain_local_path
    try:
        plain = plain_local_path(p)
        if plain is None:
            with open_file(p, storage_options=storage_options) as f:
                buf = pa.py_buffer(f.read())
        else:
            buf = pa.memory_map(plain, "r")
        reader = pa.ipc.open_stream(buf)
        batches = list(reader)
    except FileNotFoundError:
        raise FileNotFoundError(f"{p}: data file listed in state.json is missing") from None
    except RecordkitError:
        raise
    except (pa.ArrowException, OSError, UnicodeDecodeError) as e:
        raise FormatError(p, f"cannot read the Arrow stream: {_first_line(e)} "
                             f"(truncated or not an Arrow IPC stream?)") from None
    for j, b in enumerate(batches):
        _check_batch(b, p, j, full=False)
    return buf, batches, reader.schema


class HFDeserializer(DeserializerBase, ClosingReader):
    keeps_aliases = True

    def __init__(self, path: str | os.PathLike[str], streams: Sequence[StreamSpec] | None = None, *,
                 precision: str | None = None, storage_options: dict | None = None, cache_dir: str | None = None,
                 chunk_size: int = DEFAULT_CHUNK_SIZE, **_: Any) -> None:
        self.path = path if isinstance(path, str) else os.fspath(path)
        self._storage = storage_options
        if not location.isdir(self.path, storage_options):
            raise FileNotFoundError(f"{self.path}: not a directory (a Hugging Face data set is a save_to_disk "
                                    f"directory)")
        state_path = location.join(self.path, "state.json")
        info_path = location.join(self.path, "dataset_info.json")
        state, info = _read(state_path, storage_options), _read(info_path, storage_options)
        self.paths = data_files(self.path, state_path, state, storage_options)
        info_streams = recorded_streams(info_path, info)
        self.column_notes = class_labels(info)
        self._buffers, self._batches = [], []  # per file: its batches
        self._chunks, self._where = [], []
        schema0 = None
        first_key = 0
        for p in self.paths:
            batches, schema = self._open_stream(p)
            if schema0 is None:
                schema0 = schema
                if META_STREAMS not in (schema.metadata or {}) and info_streams is not None:
                    meta = dict(schema.metadata or {})
                    meta[META_STREAMS] = json.dumps(info_streams).encode()
                    schema = schema.with_metadata(meta)
                self._selected = select_streams(schema, p, streams, precision,
                                                probe=lambda c, b=batches, p=p: _first_rows(b, c, p))
                self.keys_are_ids = "key" in schema.names
            elif not schema.remove_metadata().equals(schema0.remove_metadata()):
                raise FormatError(p, f"this file's schema differs from that of {self.paths[0]}", offset=0)
            k = len(self._batches)
            self._batches.append(batches)
            start, size, rows = 0, 0, 0
            for j, b in enumerate(batches):
                size += b.nbytes
                rows += b.num_rows
                if size >= chunk_size or j == len(batches) - 1:
                    self._chunks.append(ChunkInfo(len(self._chunks), rows, rows, 0, size))
                    self._where.append((k, start, j + 1, first_key))
                    first_key += rows
                    start, size, rows = j + 1, 0, 0

    def _open_stream(self, p):
        buf, batches, schema = open_stream(p, self._storage)
        self._buffers.append(buf)
        return batches, schema

    @property
    def streams(self):
        return [s for _, s in self._selected]

    def recorded(self) -> list[dict]:
        return streams_to_json(self.streams)

    def load_chunk(self, chunk_id: int, **_: Any) -> ChunkData:
        k, a, b, first = self._where[chunk_id]
        batches = self._batches[k][a:b]
        for j, batch in enumerate(batches, a):
            _check_batch(batch, self.paths[k], j, full=True)
        table = pa.Table.from_batches(batches) if batches else None
        where = f"record batches {a}..{b - 1}"
        return batch_to_chunk(table, self._selected, path=self.paths[k], where=where, chunk_id=chunk_id,
                              first_key=first) if table is not None else batch_to_chunk(
            None, self._selected, path=self.paths[k], where=where, chunk_id=chunk_id, first_key=first)

    def sequence_location(self, chunk_id: int, i: int, sample: int | None = None) -> str:
        """Where sequence ``i`` of a chunk is: data file, record batches, row (what ``verify`` prints)."""
        k, a, b, first = self._where[chunk_id]
        sam = f", sample {sample}" if sample is not None else ""
        return f"{self.paths[k]}: record batches {a}..{b - 1}, row {i} of them (sequence {first + i} of the data " \
               f"set{sam})"

    def sequence_keys(self, chunk_id: int) -> np.ndarray:
        k, a, b, first = self._where[chunk_id]
        if not self.keys_are_ids:
            return np.arange(first, first + self._chunks[chunk_id].num_sequences, dtype=np.uint64)
        from recordkit.formats.parquet.arrow import to_numpy
        return np.concatenate([to_numpy(bt.column(bt.schema.get_field_index("key")))
                               for bt in self._batches[k][a:b]]).astype(np.uint64)


    def close(self) -> None:
        self._batches = []
        for b in getattr(self, "_buffers", []):
            close = getattr(b, "close", None)
            if close is not None:
                close()
        self._buffers = []
