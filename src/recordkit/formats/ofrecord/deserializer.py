"""OFRecord data sets as a Deserializer, and sequences written back as records.

The mapping between records and the engine's streams (used by ``recordkit convert`` and
``MinibatchSource``), one record per sequence:

* a **dense** stream ``NAME`` of dim D is the numeric feature ``ALIAS`` (the stream's
  alias, default its name) holding the sequence's samples one after another: L samples
  are L*D values (float_list for float32, double_list for float64; integer lists are
  converted);
* a **sparse** stream ``NAME`` of dim D is three features: ``ALIAS:indices`` (int64_list,
  the column of every stored value), ``ALIAS:values`` (float_list/double_list) and
  ``ALIAS:nnz`` (int64_list, stored values per sample, so its length is the number of
  samples);
* a **bytes** stream ``NAME`` is the bytes_list feature ``ALIAS`` holding one value (an encoded
  image, a text), read and written byte for byte;
* the sequence key is the int64 feature ``key`` when present (CTF sequence ids survive a
  round trip), else the record's position in the data set.

Chunks are runs of at most ``records_per_chunk`` records of one part file.

Names: the feature is the stream's *alias* (as a CTF input name is), the stream's name is what
the engine and the other formats call it. A data set written from streams records them
(``_recordkit_streams.json``, see ``dataset.read_streams``), so ``streams=None`` reads it back
under the names, aliases, dims and precision it was written with; given streams are matched
against the recorded ones by name (a stream given without an alias of its own reads the
recorded stream's feature: ``features=dense:4`` finds the feature ``f`` that
``features=dense:4:f`` wrote).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator

import numpy as np

from recordkit.engine.chunk import BytesColumn, ChunkData, DenseColumn, SparseColumn, object_array
from recordkit.engine.deserializer import ChunkInfo
from recordkit.engine.streams import StreamSpec, check_streams, resolve_precision
from recordkit.errors import TRACE_INFO, FormatError, UsageError, trace_chunk_loaded, trace_level as _trace_level
from recordkit.formats.closing import ClosingReader
from recordkit.formats.ofrecord import codec
from recordkit.formats.ofrecord.blocks import Buffers
from recordkit.formats.ofrecord.buffers import COLUMNS
from recordkit.formats.ofrecord.dataset import STREAMS_SIDECAR, load_index, part_paths, read_streams
from recordkit.storage import open_source

if TYPE_CHECKING:
    import os

KEY_FEATURE = "key"
DECODE_PIECE = 1 << 20  # bytes of records read and decoded at a time (``_load_dense_records``)
# the pieces' read buffers, one set per process (a few of about DECODE_PIECE bytes): a loop that
# opens the data set every epoch zeroed and faulted in new ones every epoch
PIECES = Buffers()


class OFRecordDeserializer(ClosingReader):
    keeps_aliases = True  # feature names are the streams' aliases, as CTF input names are (README: Names)
    def __init__(self, path: str | os.PathLike[str], streams: Iterable[StreamSpec] | None = None, *,
                 precision: str | None = None, records_per_chunk: int = 4096,
                 data_part_num: int | None = None, part_name_prefix: str = "part-",
                 part_name_suffix_length: int = -1, key_feature: str | None = KEY_FEATURE,
                 trace_level: int | None = None, index_sidecar: bool = True, storage_options: dict | None = None,
                 cache_dir: str | None = None) -> None:
        """``streams``: None for the data set's recorded declarations; ``precision``: None for
        the recorded precision (else float). ``trace_level`` 2 (CNTK's traceLevel Info) reports
        each chunk loaded (``RecordkitInfo``). Chunks are planned from the parts' indexes: as
        ``OFRecordDataset``, a part scanned is indexed in its sidecar (``index_sidecar``), so
        that the next open reads only the index."""
        self.path = str(path)
        self.trace_level = _trace_level(trace_level)
        recorded = read_streams(self.path, storage_options=storage_options)
        self.recorded_streams = recorded
        if streams is not None:  # "NAME=FORMAT:DIM[:FEATURE]" texts, as every reader takes them
            from recordkit.formats.registry import _selection
            streams = _selection(streams) or None
        if streams is None:
            if recorded is None:
                raise UsageError(f"{self.path}: the data set records no stream declarations ({STREAMS_SIDECAR}): "
                                 f"declare them (--stream NAME=FORMAT:DIM[:FEATURE])")
            streams = recorded
        elif recorded is not None:
            streams = [_match_recorded(self.path, spec, recorded) for spec in streams]
        self._streams = check_streams(streams)
        if precision is None:
            kinds = {s.dtype for s in self._streams if s.dtype is not None}
            precision = kinds.pop() if len(kinds) == 1 else "float"
        self.dtype = resolve_precision(precision)
        self.key_feature = key_feature
        self._first_has_key = None
        self.paths = part_paths(path, data_part_num, part_name_prefix, part_name_suffix_length,
                                storage_options=storage_options)
        self._storage = dict(storage_options=storage_options, cache_dir=cache_dir)
        self._buffers = Buffers()  # chunk reads reuse a buffer once no chunk data refers to it
        self._chunks, self._where = [], []
        first = 0
        for part in self.paths:
            index = load_index(part, write=index_sidecar, **self._storage)
            err = index.error()
            if err is not None:
                raise err
            for lo in range(0, len(index), records_per_chunk):
                hi = min(lo + records_per_chunk, len(index))
                start = int(index.offsets[lo]) - 8
                end = int(index.offsets[hi - 1] + index.lengths[hi - 1])
                self._chunks.append(ChunkInfo(len(self._chunks), hi - lo, hi - lo, start, end - start))
                self._where.append((part, index, lo, hi, first))
                first += hi - lo

    @property
    def streams(self) -> list[StreamSpec]:
        return list(self._streams)

    @property
    def keys_are_ids(self) -> bool:
        """Whether the records carry their sequence key (the int64 ``key`` feature that CTF ids
        become), so that a composite joins them by key rather than by position."""
        if not self.key_feature or not self._chunks:
            return False
        if self._first_has_key is None:
            part, index, lo, _, _ = self._where[0]
            source = open_source(part, **self._storage)
            try:
                raw = source.pread(int(index.offsets[lo]), int(index.lengths[lo]))
            finally:
                source.close()
            f = codec.decode(raw, path=part, offset=int(index.offsets[lo]) - 8, index=lo).get(self.key_feature)
            self._first_has_key = f is not None and f.kind == "int64_list" and len(f) == 1
        return self._first_has_key

    def sequence_keys(self, chunk_id: int) -> np.ndarray:
        """The chunk's keys (decodes its records: OFRecord has no separate key index)."""
        return self.load_chunk(chunk_id).keys

    @property
    def chunks(self) -> list[ChunkInfo]:
        return list(self._chunks)

    def sequence_location(self, chunk_id: int, index: int, sample: int | None = None, *, key: int | None = None) -> str:
        """Where sequence ``index`` of a chunk is: part file, frame byte offset, record (what ``verify`` prints)."""
        part, pindex, lo, _, _ = self._where[chunk_id]
        sam = f", sample {sample}" if sample is not None else ""
        keyed = f"key {key}{sam}" if key is not None else sam.lstrip(", ")
        return f"{part}: byte offset {int(pindex.offsets[lo + index]) - 8}, record {lo + index}" + \
            (f" ({keyed})" if keyed else "")

    def load_chunk(self, chunk_id: int, **_) -> ChunkData:
        part, index, lo, hi, first = self._where[chunk_id]
        start = int(index.offsets[lo]) - 8
        stop = int(index.offsets[hi - 1] + index.lengths[hi - 1])
        source = open_source(part, **self._storage)
        try:
            # a local chunk is read a piece at a time by the fast path; a remote one in one request
            block = None if hasattr(source, "pread_into") else source.pread(start, stop - start, cache=False)
            fast = self._load_dense_records(source, block, index, lo, hi, first, chunk_id, part)
            if fast is not None:
                return fast
            if block is None:
                block = self._buffers.pread(source, start, stop - start)
        finally:
            source.close()
        if len(block) != stop - start:
            raise FormatError(part, f"file shrank while being read: expected {stop - start} bytes at offset {start}",
                              offset=start, record=f"record {lo}")
        view = memoryview(block)
        records = [codec.decode(view[o - start:o - start + n], path=part, offset=o - 8, index=lo + i)
                   for i, (o, n) in enumerate(zip(index.offsets[lo:hi].tolist(), index.lengths[lo:hi].tolist()))]
        keys = np.arange(first, first + len(records), dtype=np.uint64)
        if self.key_feature:
            found = [r.get(self.key_feature) for r in records]
            if all(f is not None and f.kind == "int64_list" and len(f) == 1 for f in found):
                keys = np.array([int(f.value[0]) for f in found], dtype=np.int64).view(np.uint64)
        columns, counts = {}, []
        for spec in self._streams:
            read = self._bytes if spec.is_bytes else self._sparse if spec.is_sparse else self._dense
            col = read(spec, records, part, lo)
            columns[spec.name] = col
            counts.append(np.diff(col.seq_offsets))
        defining = [i for i, s in enumerate(self._streams) if s.defines_mb_size]
        lengths = counts[defining[0]] if defining else np.max(np.vstack(counts), axis=0)
        if self.trace_level >= TRACE_INFO:
            trace_chunk_loaded(part, self._chunks[chunk_id], len(records), int(lengths.sum()),
                               level=self.trace_level)
        # every column is decoded into new arrays (the read block is not referred to): lendable
        return ChunkData(chunk_id, keys, lengths.astype(np.int64), columns, lendable=True)

    def _load_dense_records(self, source, block, index, lo, hi, first, chunk_id, part):
        """The common case on the wire, without record objects: every stream dense, every record one
        sample (exactly ``dim`` numeric values), keys an int64 ``key`` feature in every record or in
        none. The compiled batch decoder (``_kernel.decode_rows``) fills each column; anything
        else (a missing feature, other lengths, bytes, mixed key kinds, a malformed record, a
        short read) returns None and the record-by-record path reads the chunk again and reports
        what is wrong.

        ``block``: the chunk's bytes, already read (a remote chunk, one request); None: a local
        chunk, read and decoded a piece of about ``DECODE_PIECE`` bytes at a time, every stream of
        a piece while its bytes are still in the CPU cache, into one reused buffer (read whole and
        then decoded stream by stream, every byte came back from main memory once per stream:
        about a fifth of the decode, MNIST-like records)."""
        if not self._streams or any(s.is_sparse or s.is_bytes for s in self._streams):
            return None
        from recordkit.formats.ofrecord import _kernel
        n = hi - lo
        offsets = np.ascontiguousarray(index.offsets[lo:hi], dtype=np.int64)
        lengths = np.ascontiguousarray(index.lengths[lo:hi], dtype=np.int64)
        ends = offsets + lengths
        start = int(offsets[0]) - 8 if n else 0  # (records are framed by an 8-byte length)
        out_dtype = np.dtype(self.dtype).name
        columns = {spec.name: COLUMNS.empty((n, spec.dim), out_dtype) for spec in self._streams}
        names = [(spec.alias.encode("utf-8"), spec.dim, columns[spec.name]) for spec in self._streams]
        keyed = bool(self.key_feature)
        found = np.empty((n, 1), dtype=np.int64) if keyed else None
        key_name = self.key_feature.encode("utf-8") if keyed else b""
        if n == 0:
            bounds = [0]
        elif block is not None:
            bounds = [0, n]
        else:
            cuts = np.searchsorted(ends, np.arange(start + DECODE_PIECE, int(ends[-1]), DECODE_PIECE), side="right")
            bounds = [0, *sorted({int(c) for c in cuts if 0 < c < n}), n]
        for a, b in zip(bounds[:-1], bounds[1:]):
            at = int(offsets[a]) - 8
            piece = block if block is not None else PIECES.pread(source, at, int(ends[b - 1]) - at)
            if len(piece) != int(ends[b - 1]) - at:
                return None  # the file shrank: the record path reads the chunk and says so
            buf = np.frombuffer(piece, dtype=np.uint8)
            off = offsets[a:b] - at
            length = lengths[a:b]
            for name, dim, values in names:  # every value written (decode_rows), or None
                if _kernel.decode_rows(buf, off, length, name, dim, 0, values, a, -1) is not None:
                    return None
            if keyed:
                # keys in every record, else positions (the first record without one decides, as
                # one decode of the whole chunk would: no later record's key is looked at then)
                problem = _kernel.decode_rows(buf, off, length, key_name, 1, 0, found, a, 5)
                if problem is not None:
                    if problem[0] not in (1, 3, 6):  # malformed: the record-by-record path reports it
                        return None
                    keyed = False
                    found = None
            del buf, piece  # (the buffer is free for the next piece)
        keys = found.reshape(-1).view(np.uint64) if found is not None else np.arange(first, first + n, dtype=np.uint64)
        lengths_out = np.ones(n, dtype=np.int64)
        if self.trace_level >= TRACE_INFO:
            trace_chunk_loaded(part, self._chunks[chunk_id], n, n, level=self.trace_level)
        dense = {name: DenseColumn(values, np.arange(n + 1, dtype=np.int64)) for name, values in columns.items()}
        # the columns are memory nothing else refers to (``ColumnMemory``): lendable
        return ChunkData(chunk_id, keys, lengths_out, dense, lendable=True)

    def _feature(self, rec, name, part, index, numeric=True):
        f = rec.get(name)
        if f is None:
            raise FormatError(part, f"feature '{name}' is missing", record=f"record {index}")
        if numeric and f.kind == "bytes_list":
            raise FormatError(part, f"feature '{name}' is a bytes_list: expected a numeric list",
                              record=f"record {index}")
        return f

    def _bytes(self, spec, records, part, lo) -> BytesColumn:
        out = []
        for i, rec in enumerate(records):
            f = self._feature(rec, spec.alias, part, lo + i, numeric=False)
            if f.kind != "bytes_list" or len(f) != 1:
                what = f"a bytes_list of {len(f)} values" if f.kind == "bytes_list" else f"a {f.kind}"
                raise FormatError(part, f"feature '{spec.alias}' is {what}: bytes stream '{spec.name}' reads a "
                                        f"bytes_list of one value per record", record=f"record {lo + i}")
            out.append(bytes(f.value[0]))
        return BytesColumn(object_array(out))

    def _dense(self, spec, records, part, lo) -> DenseColumn:
        values, counts = [], np.zeros(len(records), dtype=np.int64)
        for i, rec in enumerate(records):
            v = self._feature(rec, spec.alias, part, lo + i).value
            if len(v) % spec.dim:
                raise FormatError(part, f"feature '{spec.alias}' has {len(v)} values, not a multiple of dim "
                                        f"{spec.dim}", record=f"record {lo + i}")
            values.append(v)
            counts[i] = len(v) // spec.dim
        flat = np.concatenate(values).astype(self.dtype, copy=False) if values else np.zeros(0, self.dtype)
        return DenseColumn(flat.reshape(-1, spec.dim), _offsets(counts))

    def _sparse(self, spec, records, part, lo) -> SparseColumn:
        idx, vals, nnz, counts = [], [], [], np.zeros(len(records), dtype=np.int64)
        for i, rec in enumerate(records):
            ind = self._feature(rec, spec.alias + ":indices", part, lo + i).value
            val = self._feature(rec, spec.alias + ":values", part, lo + i).value
            per = self._feature(rec, spec.alias + ":nnz", part, lo + i).value
            if len(ind) != len(val) or int(per.sum()) != len(val) or (len(per) and per.min() < 0):
                raise FormatError(part, f"sparse stream '{spec.alias}': {len(ind)} indices, {len(val)} values and "
                                        f"per-sample counts adding up to {int(per.sum())} do not agree",
                                  record=f"record {lo + i}")
            if len(ind) and (ind.min() < 0 or ind.max() >= spec.dim):
                raise FormatError(part, f"sparse stream '{spec.alias}': index outside [0, {spec.dim})",
                                  record=f"record {lo + i}")
            idx.append(ind)
            vals.append(val)
            nnz.append(per)
            counts[i] = len(per)
        per_sample = np.concatenate(nnz).astype(np.int64) if nnz else np.zeros(0, np.int64)
        indptr = _offsets(per_sample)
        return SparseColumn(np.concatenate(vals).astype(self.dtype, copy=False) if vals else np.zeros(0, self.dtype),
                            np.concatenate(idx).astype(np.int32) if idx else np.zeros(0, np.int32),
                            indptr, _offsets(counts), spec.dim)

    def iter_chunks(self, threads: int = 1, **_: Any) -> Iterator[ChunkData]:
        """Every chunk in order, the next one read and decoded on a second thread meanwhile (pread
        and the compiled decoder release the GIL)."""
        from recordkit.formats.ofrecord.blocks import read_ahead
        return read_ahead(self.load_chunk(info.id) for info in self._chunks)

    def __iter__(self):
        for chunk in self.iter_chunks():
            yield from chunk

    def close(self) -> None:
        pass


def _match_recorded(path, spec: StreamSpec, recorded) -> StreamSpec:
    """A given stream against the data set's recorded ones: one named like a recorded stream and
    given without an alias of its own reads that stream's feature (its dims must agree)."""
    match = next((r for r in recorded if r.name == spec.name), None)
    if match is None or spec.alias != spec.name:
        return spec
    if (match.format, match.dim) != (spec.format, spec.dim):
        raise UsageError(f"{path}: stream '{spec.name}' is declared {spec.format} dim {spec.dim}, but the data set "
                         f"records it as {match.format} dim {match.dim} ({STREAMS_SIDECAR})")
    return StreamSpec(spec.name, spec.format, spec.dim, alias=match.alias, defines_mb_size=spec.defines_mb_size,
                      dtype=spec.dtype if spec.dtype is not None else match.dtype)


def _offsets(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def chunk_records(chunk: ChunkData, streams, *, dtype=np.float32, key_feature: str | None = KEY_FEATURE):
    """The sequences of a ChunkData as OFRecord feature dicts (the mapping in this module's docstring)."""
    for i in range(len(chunk)):
        rec = {}
        if key_feature:
            rec[key_feature] = np.array([chunk.keys[i]], dtype=np.uint64).view(np.int64)
        for spec in streams:
            col = chunk.columns[spec.name]
            if spec.is_bytes:
                rec[spec.alias] = col.values[i]  # a bytes value: a bytes_list of one
                continue
            a, b = int(col.seq_offsets[i]), int(col.seq_offsets[i + 1])
            if spec.is_sparse:
                lo, hi = int(col.indptr[a]), int(col.indptr[b])
                rec[spec.alias + ":indices"] = col.indices[lo:hi].astype(np.int64)
                rec[spec.alias + ":values"] = col.values[lo:hi].astype(dtype)
                rec[spec.alias + ":nnz"] = np.diff(col.indptr[a:b + 1]).astype(np.int64)
            else:
                rec[spec.alias] = col.values[a:b].astype(dtype).reshape(-1)
        yield rec
