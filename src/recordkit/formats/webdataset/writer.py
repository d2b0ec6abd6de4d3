"""WebDatasetWriter: sequences in, a directory of ``shard-NNNNNN.tar`` out.

One WebDataset sample per sequence, its members named ``KEY.FIELD`` (KEY = the sequence key
``recordkit cat`` prints; WebDataset groups consecutive members by the part before the first
dot):

* dense stream NAME: ``KEY.NAME.npy``, a (samples, DIM) array;
* sparse stream NAME: ``KEY.NAME.indices.npy`` (int32), ``KEY.NAME.values.npy`` and
  ``KEY.NAME.offsets.npy`` (int64, samples + 1: CSR row pointers);
* bytes stream NAME: ``KEY.NAME`` holding the value as it is when NAME ends in an extension that
  says what it is (``jpg``, ``image.png``, ``txt``), else ``KEY.NAME.bin`` (``members.bytes_field``).

Values keep their precision (float32 or float64). The stream declarations and each shard's
sequence/sample counts go to ``__recordkit__.json`` beside the shards (``formats/sharding.py``),
never into a shard, where WebDataset would take it for a sample. The directory is written
aside and published whole (``StagedDirectory``).

``write_sample(key, members)`` writes any other sample (``{field: bytes or array}``), which is
how records convert feature by feature and encoded images are copied unchanged.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from recordkit.engine._gather import copy_segments
from recordkit.engine.chunk import ChunkData
from recordkit.engine.streams import check_streams, resolve_precision
from recordkit.formats.sharding import META_NAME, ShardSetWriter, declared_column, describe, join_described
from recordkit.formats.webdataset import npy, tar
from recordkit.formats.webdataset.members import bytes_field

if TYPE_CHECKING:
    import os

    from recordkit.engine.streams import StreamSpec

FORMAT = "webdataset"
DEFAULT_SHARD_SIZE = 256 << 20


def shard_name(i: int) -> str:
    return f"shard-{i:06d}.tar"


def owns(name: str) -> bool:
    """Entries of a directory that belong to a WebDataset data set written here."""
    import re
    return name == META_NAME or re.fullmatch(r"shard-\d{6,}\.tar", name) is not None


class WebDatasetWriter(ShardSetWriter, format=FORMAT, what="WebDataset directory", shard_name=shard_name,
                       owns=owns, default_size=DEFAULT_SHARD_SIZE):
    def __init__(self, path: str | os.PathLike[str], streams: Sequence[StreamSpec] | None, *,
                 parts: int | None = None, shard_size: int | None = None, total_sequences: int | None = None,
                 precision: str = "float", checksums: bool = False, storage_options: dict | None = None,
                 mtime: int | None = None) -> None:
        self._streams = check_streams(streams) if streams else []
        for s in self._streams:
            if "/" in s.name or s.name.startswith("."):
                raise ValueError(f"stream name {s.name!r} cannot name a tar member field")
        self.dtype = resolve_precision(precision)
        super().__init__(path, parts=parts, shard_size=shard_size, total_sequences=total_sequences,
                         checksums=checksums, storage_options=storage_options)
        self._headers = tar.HeaderBuilder(mtime)

    @property
    def streams(self):
        return list(self._streams)

    def declare_streams(self, streams: Sequence[StreamSpec]) -> None:
        """Streams the members written with ``write_sample`` hold (records converted feature by
        feature: their numeric features of one length), recorded in the description at ``close``
        so that recordkit reads the shards back as those streams."""
        self._streams = check_streams(streams)

    def _close_shard(self) -> None:
        if self._file is not None:
            self._file.write(tar.END)
        super()._close_shard()

    # -- stream data --------------------------------------------------------------------------------
    def write_chunk(self, chunk: ChunkData) -> None:
        n = len(chunk)
        if n == 0:
            return
        members = self._members(chunk)  # per member column: (field suffix, header per seq, sources)
        m = len(members)
        keys = [b"%d" % k for k in chunk.keys.tolist()]
        data_sizes = np.empty((n, m), dtype=np.int64)
        for j, (_, hdrs, starts, _) in enumerate(members):
            data_sizes[:, j] = np.fromiter((len(h) for h in hdrs), dtype=np.int64, count=n) + np.diff(starts)
        seq_bytes = (tar.BLOCK + tar.padded(data_sizes)).sum(axis=1)
        lengths = chunk.lengths
        for shard, a, b in self._cutter.assign(seq_bytes):
            self._switch(shard)
            self._write_run(members, keys, data_sizes, a, b)
            self._counted(b - a, lengths[a:b].sum())
        self.sequences_written += n

    def _members(self, chunk):
        """Per member kind: (field, npy header per sequence, byte starts per sequence (n+1), source bytes)."""
        out = []
        for spec in self._streams:
            col = declared_column(chunk, spec)
            if spec.is_bytes:  # the values as they are, no header
                values = col.values.tolist()
                starts = np.zeros(len(values) + 1, dtype=np.int64)
                np.cumsum(np.fromiter(map(len, values), dtype=np.int64, count=len(values)), out=starts[1:])
                out.append((bytes_field(spec.name), [b""] * len(values), starts,
                            np.frombuffer(b"".join(values), dtype=np.uint8)))
                continue
            counts = np.diff(col.seq_offsets).tolist()
            if not spec.is_sparse:
                vals = np.ascontiguousarray(col.values, dtype=self.dtype)
                row = spec.dim * self.dtype.itemsize
                table = {c: npy.header(self.dtype, (c, spec.dim)) for c in set(counts)}
                hdrs = [table[c] for c in counts]
                out.append((spec.name + ".npy", hdrs, col.seq_offsets.astype(np.int64) * row,
                            vals.reshape(-1).view(np.uint8)))
                continue
            so = col.seq_offsets.astype(np.int64)
            ptr = col.indptr.astype(np.int64)
            nnz_bounds = ptr[so]
            nnz = np.diff(nnz_bounds).tolist()
            ind = np.ascontiguousarray(col.indices, dtype=np.int32)
            vals = np.ascontiguousarray(col.values, dtype=self.dtype)
            # CSR row pointers of each sequence relative to its first sample: rows so[i] .. so[i+1]
            # (samples + 1 of them), i.e. row r of the concatenation is r - (sequences before it)
            c1 = np.asarray(counts, dtype=np.int64) + 1
            rows = np.arange(int(c1.sum()), dtype=np.int64) - np.repeat(np.arange(len(counts), dtype=np.int64), c1)
            rel = ptr[rows] - np.repeat(nnz_bounds[:-1], c1)
            rel_starts = (so + np.arange(len(so))) * 8
            ti = {k: npy.header(np.dtype(np.int32), (k,)) for k in set(nnz)}
            tv = {k: npy.header(self.dtype, (k,)) for k in set(nnz)}
            to = {c: npy.header(np.dtype(np.int64), (c + 1,)) for c in set(counts)}
            out.append((spec.name + ".indices.npy", [ti[k] for k in nnz], nnz_bounds * 4, ind.view(np.uint8)))
            out.append((spec.name + ".values.npy", [tv[k] for k in nnz], nnz_bounds * self.dtype.itemsize,
                        vals.view(np.uint8)))
            out.append((spec.name + ".offsets.npy", [to[c] for c in counts], rel_starts,
                        rel.astype("<i8").view(np.uint8)))
        return out

    def _write_run(self, members, keys, data_sizes, a: int, b: int) -> None:
        """Sequences a..b-1 as one tar stretch: member headers placed block by block, then each
        member kind's npy headers and data bytes scattered by two compiled copies
        (``engine/_gather.copy_segments``; a Python slice assignment per member cost more than the
        rest of the conversion). Only the last block of each member is zeroed (its padding):
        zeroing the whole stretch first wrote every byte twice."""
        m = len(members)
        fields = [f.encode() for f, *_ in members]
        names = [k + b"." + f for k in keys[a:b] for f in fields]
        sizes = data_sizes[a:b].reshape(-1)
        hdrs = self._headers.build(names, sizes)
        spans = tar.BLOCK + tar.padded(sizes)
        pos = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(spans, out=pos[1:])
        out = np.empty(int(pos[-1]), dtype=np.uint8)
        blocks = out.reshape(-1, tar.BLOCK)
        blocks[pos[:-1] // tar.BLOCK] = hdrs  # members start on block boundaries
        blocks[pos[1:][sizes > 0] // tar.BLOCK - 1] = 0  # the last data block of each member: its padding
        data_at = (pos[:-1] + tar.BLOCK).reshape(-1, m)
        for j, (_, heads, starts, src) in enumerate(members):
            st = np.asarray(starts, dtype=np.int64)
            d_len = np.ascontiguousarray(st[a + 1:b + 1] - st[a:b])
            h_len = np.ascontiguousarray(data_sizes[a:b, j] - d_len)  # a member's data: npy header, then bytes
            h_at = np.zeros(b - a, dtype=np.int64)
            np.cumsum(h_len[:-1], out=h_at[1:])
            dst = np.ascontiguousarray(data_at[:, j])
            copy_segments(np.frombuffer(b"".join(heads[a:b]), dtype=np.uint8), h_at, h_len, out, dst)
            copy_segments(src, np.ascontiguousarray(st[a:b]), d_len, out, dst + h_len)
        self._file.write(memoryview(out))

    # -- any sample ---------------------------------------------------------------------------------
    def write_sample(self, key: str | int, members: dict, *, samples: int = 1) -> None:
        """One sample of arbitrary members: ``{field: bytes | numpy array}`` (arrays become ``.npy``;
        the field should then end in ``.npy``). Used for records converted feature by feature."""
        keyb = str(key).encode()
        if b"." in keyb or b"/" in keyb:
            raise ValueError(f"sample key {key!r} contains '.' or '/'")
        names, blobs = [], []
        for field, value in members.items():
            if isinstance(value, np.ndarray):
                arr = np.ascontiguousarray(value)
                if arr.dtype.byteorder == ">":
                    arr = arr.astype(arr.dtype.newbyteorder("<"))
                blob = npy.header(arr.dtype, arr.shape) + arr.tobytes()
            else:
                blob = bytes(value)
            names.append(keyb + b"." + field.encode())
            blobs.append(blob)
        sizes = np.array([len(x) for x in blobs], dtype=np.int64)
        total = int((tar.BLOCK + tar.padded(sizes)).sum())
        for shard, _, _ in self._cutter.assign(np.array([total])):
            self._switch(shard)
        hdrs = self._headers.build(names, sizes)
        parts = []
        for h, blob in zip(hdrs, blobs):
            parts.append(h.tobytes())
            parts.append(blob)
            parts.append(bytes(-len(blob) % tar.BLOCK))
        self._file.write(b"".join(parts))
        self._counted(1, samples)
        self.sequences_written += 1

    def _describe(self) -> None:
        if self._streams:  # records converted feature by feature declare no streams: readers infer them
            self._dir.write_file(META_NAME, describe(FORMAT, self._streams, self.dtype, self._counts))


def join_sets(sources: list[str], output: str, *, storage_options=None, checksums: bool = False) -> list[str]:
    """Data sets written by this writer (same streams), joined in order into one at ``output``:
    shards renumbered, descriptions merged, the whole published at once (``--engine ray``'s
    write tasks each write one). Returns the shard names."""
    return join_described(FORMAT, shard_name, owns, "WebDataset directory", sources, output,
                          storage_options=storage_options, checksums=checksums)
