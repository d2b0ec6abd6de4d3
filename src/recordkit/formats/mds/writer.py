"""MDSWriter: sequences in, a MosaicML Streaming (MDS) data set out: ``index.json`` + ``shard.NNNNN.mds``.

The layout is MosaicML's (``streaming/base/format/mds``, index version 2, no compression), so
``streaming.StreamingDataset(local=DIR)`` reads it. One MDS sample per sequence, columns:

* ``key``: ``uint64``, the sequence key;
* dense stream NAME: ``ndarray:float32`` (``ndarray:float64`` for double data), shape (samples, DIM);
* sparse stream NAME: ``NAME.indices`` (``ndarray:int32``), ``NAME.values`` (``ndarray:float32`` or
  float64) and ``NAME.offsets`` (``ndarray:int64``, samples + 1, CSR row pointers);
* bytes stream NAME: ``bytes``, the value as it is (Streaming reads it back as ``bytes``).

Columns are stored in name order (as MosaicML's writer does). A shard is ``uint32 samples,
uint32 offsets[samples + 1], the shard's config JSON, the samples``; each sample is the uint32
sizes of its variable-size columns, then the columns' bytes; a dynamic-shape ndarray is
``[ndim << 2 | shape dtype] [shape] [values]``. (MosaicML's own writer refuses empty arrays;
a sequence without samples of a stream is stored with a 0 in its shape, which its decoder reads.)

``index.json`` also carries a ``recordkit`` object (stream declarations, per-shard sample
counts) so reading back needs no ``--stream``; MosaicML ignores it. Shard size: ``shard_size``
bytes (MosaicML's ``size_limit``, default 64 MiB, below 4 GiB since offsets are uint32) or
``parts``. With ``checksums=True`` each shard's SHA-1 goes into ``index.json`` (MosaicML's
``hashes``) and ``.rkcrc`` sidecars are written.
"""
from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

import numpy as np

from recordkit.engine.chunk import ChunkData
from recordkit.engine.streams import check_streams, resolve_precision, streams_to_json
from recordkit.formats.sharding import ShardSetWriter, declared_column

if TYPE_CHECKING:
    import os
    from typing import Sequence

    from recordkit.engine.streams import StreamSpec

FORMAT = "mds"
INDEX = "index.json"
DEFAULT_SHARD_SIZE = 1 << 26
KEY_COLUMN = "key"


def shard_name(i: int) -> str:
    return f"shard.{i:05d}.mds"


def owns(name: str) -> bool:
    import re
    return name == INDEX or re.fullmatch(r"shard\.\d{5,}\.mds", name) is not None


def columns_of(streams, dtype) -> dict:
    """MDS column name -> encoding for these streams."""
    vt = "float64" if np.dtype(dtype) == np.float64 else "float32"
    cols = {KEY_COLUMN: "uint64"}
    for s in streams:
        if s.is_bytes:
            cols[s.name] = "bytes"
        elif s.is_sparse:
            cols[s.name + ".indices"] = "ndarray:int32"
            cols[s.name + ".values"] = f"ndarray:{vt}"
            cols[s.name + ".offsets"] = "ndarray:int64"
        else:
            cols[s.name] = f"ndarray:{vt}"
    return cols


RAW = "raw"  # a column's dim in _encode_samples: bytes as they are, no ndarray shape header


def _encode_samples(n: int, columns: list, keys: np.ndarray, key_pos: int) -> tuple[np.ndarray, np.ndarray]:
    """Every sample of a chunk encoded into one buffer (MDS's sample layout, see the module docstring):
    per sample the uint32 sizes of its ``columns``, then the columns in name order with the 8-byte
    key at ``key_pos``. ``columns``: per variable-size column (source array, per-sample element bounds,
    per-sample first dimension, second dimension or None, or ``RAW`` for bytes written with no shape
    header). The pieces are interleaved by one compiled
    scatter (``_gather.copy_segments``), not a Python operation per sample."""
    from recordkit.engine._gather import copy_segments
    nvar = len(columns)
    heads, datas, part_len = [], [], []
    for src, bounds, lens, dim in columns:
        if dim is RAW:
            head, head_starts, head_len = np.zeros(0, np.uint8), np.zeros(n, np.int64), np.zeros(n, np.int64)
        else:
            head, head_starts, head_len = _shape_heads(np.asarray(lens, dtype=np.int64), dim)
        isz = src.dtype.itemsize
        b = np.asarray(bounds, dtype=np.int64) * isz
        data_len = b[1:] - b[:-1]
        heads.append((head, head_starts, head_len))
        datas.append((src.reshape(-1).view(np.uint8), b[:-1], data_len))
        part_len.append(head_len + data_len)
    part_len = np.stack(part_len, axis=1) if nvar else np.zeros((n, 0), np.int64)
    sizes = 4 * nvar + 8 + part_len.sum(axis=1)
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    out = np.empty(int(starts[-1]), dtype=np.uint8)
    # the size table of each sample
    table = np.ascontiguousarray(part_len.astype("<u4")).view(np.uint8).reshape(-1)
    copy_segments(table, np.arange(n, dtype=np.int64) * 4 * nvar, np.full(n, 4 * nvar, np.int64), out, starts[:-1])
    at = starts[:-1] + 4 * nvar
    key_bytes = keys.view(np.uint8)
    for c in range(nvar + 1):
        if c == key_pos:
            copy_segments(key_bytes, np.arange(n, dtype=np.int64) * 8, np.full(n, 8, np.int64), out, at)
            at = at + 8
        if c == nvar:
            break
        head, head_starts, head_len = heads[c]
        copy_segments(head, head_starts, head_len, out, at)
        at = at + head_len
        raw, from_, length = datas[c]
        copy_segments(raw, from_, length, out, at)
        at = at + length
    return out, sizes


def _shape_heads(first: np.ndarray, dim) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MosaicML's dynamic-shape prefix (one byte ``ndim << 2 | shape dtype``, then the shape in the
    smallest unsigned type that holds it) of every sample's shape, (first,) or (first, dim), in one buffer: (bytes,
    each head's start, each head's length)."""
    n = len(first)
    ndim = 1 if dim is None else 2
    top = first if dim is None else np.maximum(first, dim)
    code = np.where(top < 256, 0, np.where(top < 65536, 1, np.where(top < 1 << 32, 2, 3))).astype(np.int64)
    width = np.left_shift(1, code)  # bytes per shape value
    length = 1 + ndim * width
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(length, out=starts[1:])
    out = np.zeros(int(starts[-1]), dtype=np.uint8)
    out[starts[:-1]] = ((ndim << 2) | code).astype(np.uint8)
    for k, dt in enumerate(("<u1", "<u2", "<u4", "<u8")):
        rows = np.flatnonzero(code == k)
        if not len(rows):
            continue
        shape = first[rows][:, None] if dim is None else np.stack([first[rows], np.full(len(rows), dim)], axis=1)
        raw = np.ascontiguousarray(shape.astype(dt)).view(np.uint8).reshape(len(rows), -1)
        out[starts[rows][:, None] + 1 + np.arange(raw.shape[1])] = raw
    return out, starts[:-1], length



class MDSWriter(ShardSetWriter, format=FORMAT, what="MDS directory", shard_name=shard_name, owns=owns,
                default_size=DEFAULT_SHARD_SIZE):
    def __init__(self, path: str | os.PathLike[str], streams: Sequence[StreamSpec], *, parts: int | None = None,
                 shard_size: int | None = None, total_sequences: int | None = None, precision: str = "float",
                 checksums: bool = False, storage_options: dict | None = None) -> None:
        self._streams = check_streams(streams)
        names = {s.name for s in self._streams}
        if KEY_COLUMN in names:
            raise ValueError(f"'{KEY_COLUMN}' is the MDS column of the sequence key: rename the stream")
        self.dtype = resolve_precision(precision)
        self._start(path, parts=parts, shard_size=shard_size, total_sequences=total_sequences, checksums=checksums,
                    storage_options=storage_options)
        self._set_columns(columns_of(self._streams, self.dtype))

    def _start(self, path, *, parts, shard_size, total_sequences, checksums, storage_options) -> None:
        """The shard-directory writer's state; the columns come next (``_set_columns``)."""
        if shard_size is not None and int(shard_size) >= 1 << 32:
            raise ValueError("MDS shard_size must be below 4 GiB (sample offsets are uint32)")
        super().__init__(path, parts=parts, shard_size=shard_size, total_sequences=total_sequences,
                         checksums=checksums, storage_options=storage_options)
        self.checksums = bool(checksums)
        self.size_limit = int(shard_size) if shard_size is not None else DEFAULT_SHARD_SIZE
        self.hashes = ["sha1"] if self.checksums else []
        self._shards: list[dict] = []
        self._samples: list = []  # (encoded samples as one block, their sizes) per run of a chunk

    def _set_columns(self, cols: dict) -> None:
        """The data set's columns (name -> MDS encoding), in name order, and the shard config naming them."""
        self.column_names = sorted(cols)
        self.column_encodings = [cols[c] for c in self.column_names]
        self.column_sizes = [8 if e == "uint64" else None for e in self.column_encodings]
        self._config = {"version": 2, "format": FORMAT, "compression": None, "hashes": self.hashes,
                        "size_limit": self.size_limit, "column_names": self.column_names,
                        "column_encodings": self.column_encodings, "column_sizes": self.column_sizes}
        self._config_bytes = json.dumps(self._config, sort_keys=True).encode()

    @property
    def streams(self):
        return list(self._streams)

    def _open_shard(self, name: str) -> None:
        """A shard is kept in memory until it ends: its header needs its sample count."""

    def _close_shard(self) -> None:
        """The shard being filled, written whole."""
        if self._shard < 0:
            return
        blocks = [blk for blk, _ in self._samples]
        lengths = np.concatenate([ln for _, ln in self._samples]) if self._samples else np.zeros(0, np.int64)
        n = len(lengths)
        head = 4 + 4 * (n + 1) + len(self._config_bytes)
        offs = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offs[1:])
        offs += head
        if offs[-1] >= 1 << 32:
            raise ValueError(f"MDS shard {self._shard} would exceed 4 GiB: use a smaller shard_size")
        name = shard_name(self._shard)
        # the pieces written one after another (joining them first copied every shard twice more)
        pieces = [np.uint32(n).tobytes(), offs.astype("<u4").tobytes(), self._config_bytes] + blocks
        digests = [hashlib.new(algo) for algo in self.hashes]
        size = 0
        out = self._dir.open(name)
        for piece in pieces:
            view = memoryview(piece).cast("B")
            out.write(view)
            for d in digests:
                d.update(view)
            size += view.nbytes
        out.commit()
        hashes = {algo: d.hexdigest() for algo, d in zip(self.hashes, digests)}
        info = {"samples": n, "raw_data": {"basename": name, "bytes": size, "hashes": hashes}, "zip_data": None}
        info.update(self._config)
        self._shards.append(info)
        self._samples = []

    def write_chunk(self, chunk: ChunkData) -> None:
        n = len(chunk)
        if n == 0:
            return
        per_col = {}  # column -> (source array, per-sequence element bounds, shapes per sequence)
        for spec in self._streams:
            col = declared_column(chunk, spec)
            if spec.is_bytes:
                values = col.values.tolist()
                bounds = np.zeros(n + 1, dtype=np.int64)
                np.cumsum(np.fromiter(map(len, values), dtype=np.int64, count=n), out=bounds[1:])
                per_col[spec.name] = (np.frombuffer(b"".join(values), dtype=np.uint8), bounds, None, RAW)
                continue
            so = col.seq_offsets.astype(np.int64)
            counts = np.diff(so)
            if spec.is_sparse:
                ptr = col.indptr.astype(np.int64)
                nb = ptr[so]
                nnz = np.diff(nb)
                c1 = counts + 1
                rows = np.arange(int(c1.sum()), dtype=np.int64) - np.repeat(np.arange(n, dtype=np.int64), c1)
                rel = (ptr[rows] - np.repeat(nb[:-1], c1)).astype("<i8")
                per_col[spec.name + ".indices"] = (np.ascontiguousarray(col.indices, dtype="<i4"), nb, nnz, None)
                per_col[spec.name + ".values"] = (np.ascontiguousarray(col.values, dtype=self.dtype), nb, nnz, None)
                per_col[spec.name + ".offsets"] = (rel, so + np.arange(n + 1), c1, None)
            else:
                vals = np.ascontiguousarray(col.values, dtype=self.dtype).reshape(-1)
                per_col[spec.name] = (vals, so * spec.dim, counts, spec.dim)
        keys = np.ascontiguousarray(chunk.keys.astype("<u8"))
        order = [c for c in self.column_names if c != KEY_COLUMN]
        block, sizes = _encode_samples(n, [per_col[c] for c in order], keys, self.column_names.index(KEY_COLUMN))
        sizes = sizes + 4  # each sample's entry in the shard's offset table
        lengths = chunk.lengths
        starts = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sizes - 4, out=starts[1:])
        for shard, a, b in self._cutter.assign(sizes):
            self._switch(shard)
            self._samples.append((block[starts[a]:starts[b]], sizes[a:b] - 4))
            self._counted(b - a, lengths[a:b].sum())
        self.sequences_written += n

    def _describe(self) -> None:
        index = {"version": 2, "shards": self._shards}
        if self._streams:  # records converted feature by feature may hold none: readers then infer them
            index["recordkit"] = {"format": FORMAT, "version": 1, "streams": streams_to_json(self._streams, self.dtype),
                                  "sequences": self.sequences_written, "shards": self._counts}
        self._dir.write_file(INDEX, json.dumps(index, sort_keys=True).encode())

    def abort(self) -> None:
        self._samples = []
        super().abort()
