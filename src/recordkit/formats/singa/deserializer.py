"""SINGA record stores as a Deserializer, and sequences written back as records.

The mapping (used by ``recordkit convert`` and ``MinibatchSource``): every tuple of a
KVFile/BinFile store holding SINGA records (``RecordProto``/``SingleLabelImageRecord``
as SINGA 0.x's create_data wrote them) is one sequence of one sample, with two dense
streams: ``features`` (dim = the product of the record's shape: its ``data`` floats, or
its ``pixel`` bytes as numbers 0..255) and ``label`` (dim 1). The tuple's key becomes
the sequence key when it is a decimal number (``"00042"``), else the tuple index.
Writing goes the other way: a record with ``shape = [dim]``, ``data`` = the features and
``label`` = the label stream's first value, keyed by the sequence key ``%05d``.

Chunks are runs of ``tuples_per_chunk`` tuples; their byte offsets are found by one pass
over the framing at open, so a chunk is read without reading the ones before it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from recordkit.engine.chunk import ChunkData, DenseColumn
from recordkit.engine.deserializer import ChunkInfo
from recordkit.engine.streams import StreamSpec, resolve_precision
from recordkit.errors import TRACE_INFO, FormatError, trace_chunk_loaded, trace_level as _trace_level
from recordkit.formats.closing import ClosingReader
from recordkit.formats.singa import records
from recordkit.formats.singa.store import open as open_store

if TYPE_CHECKING:
    import os

    from numpy.typing import ArrayLike


class SingaRecordDeserializer(ClosingReader):
    def __init__(self, path: str | os.PathLike[str], store: str | None = None, *, precision: str = "float",
                 tuples_per_chunk: int = 4096, storage_options: dict | None = None,
                 mean: ArrayLike | str | os.PathLike[str] | None = None, std: ArrayLike | None = None,
                 trace_level: int | None = None) -> None:
        """``mean``: an array, or the path of a mean store (image_mean.bin), subtracted from the
        features; ``std``: a number or array they are divided by after that (RecordInputLayer's
        mean-file subtraction and std scaling). ``trace_level`` 2 reports each chunk loaded."""
        self.path = str(path)
        self.trace_level = _trace_level(trace_level)
        self._mean = _load_mean(mean)
        self._std = None if std is None else np.asarray(std, dtype=np.float64).reshape(-1)
        self.dtype = resolve_precision(precision)
        self._store_kind = store
        self._options = storage_options
        self._starts = []  # (byte offset, tuple index) of each chunk's first tuple
        self._counts = []
        dim = None
        with open_store(self.path, "read", store, storage_options=storage_options) as s:
            self.kind = s.kind
            while True:
                at, index = s.position
                if index % tuples_per_chunk == 0:
                    self._starts.append((at, index))
                    self._counts.append(0)
                item = s.read()
                if item is None:
                    if self._counts and self._counts[-1] == 0:
                        self._starts.pop()
                        self._counts.pop()
                    end = s.position[0]
                    break
                self._counts[-1] += 1
                if dim is None:
                    dim = self._decode(item[1], index)[0].size
                    if dim == 0:
                        raise FormatError(self.path, "the first record holds no data or pixels: a store of "
                                                     "empty records has no features stream to read",
                                          offset=at, record=f"tuple {index}")
        if dim is None:
            raise FormatError(self.path, "the store holds no tuples", offset=0)
        self._streams = [StreamSpec("features", "dense", dim, dtype=self.dtype), StreamSpec("label", "dense", 1,
                                                                                          dtype=self.dtype)]
        # byte ranges: from a chunk's first tuple to the next chunk's (the last: to the end of the tuples)
        ends = [off for off, _ in self._starts[1:]] + [end]
        self._chunks = [ChunkInfo(i, n, n, off, stop - off)
                        for i, ((off, _), n, stop) in enumerate(zip(self._starts, self._counts, ends))]

    @property
    def streams(self) -> list[StreamSpec]:
        return list(self._streams)

    @property
    def chunks(self) -> list[ChunkInfo]:
        return list(self._chunks)

    def _decode(self, value: bytes, index: int):
        rec = records.decode_record(value, path=self.path, record=f"tuple {index}")
        if rec.get("data") is not None:
            feats = np.asarray(rec["data"], dtype=np.float64).reshape(-1)
        elif rec.get("pixel") is not None:
            feats = np.asarray(rec["pixel"]).reshape(-1).astype(np.float64)
        else:
            feats = np.zeros(0)
        label = rec.get("label")
        return feats, (0 if label is None else int(label))

    def sequence_location(self, chunk_id: int, index: int, sample: int | None = None) -> str:
        """Where sequence ``index`` of a chunk is: the tuple's number in the store (what ``verify`` prints)."""
        sam = f", sample {sample}" if sample is not None else ""
        return f"{self.path}: tuple {self._starts[chunk_id][1] + index}{sam}"

    def load_chunk(self, chunk_id: int, **_) -> ChunkData:
        offset, first = self._starts[chunk_id]
        n = self._counts[chunk_id]
        dim = self._streams[0].dim
        feats = np.zeros((n, dim), dtype=self.dtype)
        labels = np.zeros((n, 1), dtype=self.dtype)
        keys = np.arange(first, first + n, dtype=np.uint64)
        with open_store(self.path, "read", self._store_kind, storage_options=self._options) as s:
            s.resume_at(offset, first)
            for i in range(n):
                key, value = s.read()
                f, label = self._decode(value, first + i)
                if f.size != dim:
                    from recordkit.errors import FormatError
                    raise FormatError(self.path, f"record has {f.size} features, the first had {dim}",
                                      record=f"tuple {first + i}")
                if self._mean is not None:
                    f = f - self._mean
                if self._std is not None:
                    f = f / self._std
                feats[i] = f
                labels[i, 0] = label
                if key.isdigit():
                    keys[i] = int(key)
        offsets = np.arange(n + 1, dtype=np.int64)
        if self.trace_level >= TRACE_INFO:
            trace_chunk_loaded(self.path, self._chunks[chunk_id], level=self.trace_level)
        return ChunkData(chunk_id, keys, np.ones(n, dtype=np.int64),
                         {"features": DenseColumn(feats, offsets), "label": DenseColumn(labels, offsets.copy())})

    def iter_chunks(self, threads: int = 1, **_: Any) -> Iterator[ChunkData]:
        for info in self._chunks:
            yield self.load_chunk(info.id)

    def close(self) -> None:
        pass


def _load_mean(mean):
    """The mean as a flat float64 array: given directly, or read from a SINGA mean store."""
    if mean is None:
        return None
    if isinstance(mean, (str, bytes)) or hasattr(mean, "__fspath__"):
        with open_store(str(mean), "read") as s:
            item = s.read()
        if item is None:
            raise ValueError(f"{mean}: the mean store is empty")
        rec = records.decode_record(item[1], path=str(mean), record="tuple 0")
        if rec.get("data") is None:
            raise ValueError(f"{mean}: the mean record has no float data")
        return np.asarray(rec["data"], dtype=np.float64).reshape(-1)
    return np.asarray(mean, dtype=np.float64).reshape(-1)


def _dense_rows(seq) -> np.ndarray:
    """A sequence's samples as float32 rows (a sparse sequence densified)."""
    a = seq.toarray() if hasattr(seq, "toarray") else np.asarray(seq)
    a = np.asarray(a, dtype=np.float32)
    return a.reshape(len(a), -1) if a.ndim > 1 else a.reshape(1, -1)


class SingaRecordWriter:
    """Sequences (features + label streams, one sample each) out as SINGA records in a store."""

    def __init__(self, path: str | os.PathLike[str], streams: Sequence[StreamSpec], *, store: str = "kvfile",
                 feature_stream: str | None = None, label_stream: str | None = None,
                 storage_options: dict | None = None, checksums: bool = False) -> None:
        names = [s.name for s in streams]
        self.feature_stream = feature_stream or next((n for n in names if n != "label"), names[0])
        self.label_stream = label_stream or ("label" if "label" in names else None)
        self._store = open_store(str(path), "create", store, storage_options=storage_options, checksums=checksums)
        self.sequences_written = 0

    def write_chunk(self, chunk: ChunkData) -> None:
        """One record per sample, keyed by its sequence's key: a record holds one vector of the
        stream's dim, so a sequence of several samples becomes several records (joined into one
        vector, sequences of different lengths gave records of different sizes, which no reader
        of the store takes back)."""
        feats = chunk.columns[self.feature_stream]
        labels = chunk.columns[self.label_stream] if self.label_stream else None
        for i in range(len(chunk)):
            rows = _dense_rows(feats.sequence(i))
            label_rows = _dense_rows(labels.sequence(i)) if labels is not None else None
            key = b"%05d" % int(chunk.keys[i])
            for j, f in enumerate(rows):
                label = None
                if label_rows is not None:
                    row = label_rows[min(j, len(label_rows) - 1)] if len(label_rows) else np.zeros(1)
                    label = int(row.reshape(-1)[0]) if row.size else 0
                self._store.write(key, records.encode_record(shape=(f.size,), label=label, data=f))
            self.sequences_written += 1

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self._store.close()
        else:
            self._store.abort()


class SingaCSVDeserializer(ClosingReader):
    """A SINGA CSV text store (CSVInputLayer's input) as streams ``features`` (dim ``count``) and
    ``label``: one line = one sequence of one sample, parsed as CSVInputLayer does (label
    column first unless ``has_label=False``). Keys are 0-based line numbers."""

    def __init__(self, path: str | os.PathLike[str], count: int, *, separator: str = ",", has_label: bool = True,
                 precision: str = "float", lines_per_chunk: int = 65536, storage_options: dict | None = None,
                 trace_level: int | None = None) -> None:
        from recordkit.formats.singa.csvfile import parse_csv_record
        self.path = str(path)
        self.trace_level = _trace_level(trace_level)
        self.dtype = resolve_precision(precision)
        self._streams = [StreamSpec("features", "dense", int(count), dtype=self.dtype)]
        if has_label:
            self._streams.append(StreamSpec("label", "dense", 1, dtype=self.dtype))
        feats, spans = [], []
        with open_store(self.path, "read", "textfile", storage_options=storage_options) as s:
            start = 0
            for i, (_, line) in enumerate(s):
                line_start, start = start, s.position[0]  # the line's byte range [line_start, start)
                if not line.strip():
                    continue  # blank lines carry no record
                label, values = parse_csv_record(line, int(count), separator=separator, has_label=has_label,
                                                  path=self.path, line=i + 1)
                feats.append((i, values, label))
                spans.append((line_start, start))
        self._rows = feats
        self._per = int(lines_per_chunk)
        n = len(feats)
        self._chunks = []
        for c in range(-(-n // self._per)):
            lo, hi = c * self._per, min((c + 1) * self._per, n)
            offset = spans[lo][0]
            self._chunks.append(ChunkInfo(c, hi - lo, hi - lo, offset, spans[hi - 1][1] - offset))

    @property
    def streams(self) -> list[StreamSpec]:
        return list(self._streams)

    @property
    def chunks(self) -> list[ChunkInfo]:
        return list(self._chunks)

    def load_chunk(self, chunk_id: int, **_) -> ChunkData:
        rows = self._rows[chunk_id * self._per:(chunk_id + 1) * self._per]
        n = len(rows)
        offsets = np.arange(n + 1, dtype=np.int64)
        cols = {"features": DenseColumn(np.array([r[1] for r in rows], dtype=self.dtype).reshape(n, -1), offsets)}
        if len(self._streams) > 1:
            cols["label"] = DenseColumn(np.array([[r[2]] for r in rows], dtype=self.dtype).reshape(n, 1),
                                        offsets.copy())
        if self.trace_level >= TRACE_INFO:
            trace_chunk_loaded(self.path, self._chunks[chunk_id], level=self.trace_level)
        return ChunkData(chunk_id, np.array([r[0] for r in rows], dtype=np.uint64), np.ones(n, np.int64), cols)

    def iter_chunks(self, threads: int = 1, **_: Any) -> Iterator[ChunkData]:
        for info in self._chunks:
            yield self.load_chunk(info.id)

    def close(self) -> None:
        pass
