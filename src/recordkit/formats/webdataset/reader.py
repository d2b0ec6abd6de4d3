"""WebDatasetReader: a directory of tar shards as a Deserializer (one chunk per shard).

Samples map to sequences as ``writer.py`` describes. The streams come from the data set's
``__recordkit__.json``; a WebDataset written by other tools has none, and then they are
inferred from the first samples' members (``members.py``: ``.npy`` and ``.cls`` numbers, images,
text and any other member a bytes stream), or ``streams`` are given (the alias of each is the member field:
``KEY.ALIAS.npy``, or ``KEY.ALIAS.indices.npy`` / ``.values.npy`` / ``.offsets.npy``; an
``.npy`` or ``.cls`` field itself, ``--stream label=dense:1:cls``). Members that no given
stream names (images, labels, ...) are skipped; with inferred streams a member the first
samples did not have is an error.

Every problem is a ``FormatError`` naming the shard, the byte offset of the member's header
and the sample: a truncated shard, a damaged header (checksum), a sample without one of its
stream's members, an array of the wrong shape or type, sparse offsets that do not add up,
a shard holding fewer samples than the description says.
"""
from __future__ import annotations

import os
import re
from typing import Sequence

import numpy as np

from recordkit.engine.chunk import BytesColumn, ChunkData, DenseColumn, SparseColumn, object_array
from recordkit.engine.deserializer import ChunkInfo, DeserializerBase
from recordkit.engine.streams import StreamSpec, resolve_precision
from recordkit.errors import FormatError
from recordkit.formats.closing import ClosingReader
from recordkit.formats.directories import part_paths
from recordkit.formats.csr import join_offsets, offsets_problem
from recordkit.formats.sharding import (META_NAME, gather_ranges, offsets, read_description,
                                         resolve_streams, sequence_lengths_of)
from recordkit.formats.webdataset import members, npy, tar
from recordkit.formats.webdataset.writer import FORMAT
from recordkit.storage import location
from recordkit.storage.pool import SourcePool


def looks_like(path, storage_options=None) -> bool:
    """A directory of numbered ``*.tar`` shards (or shards and their ``__recordkit__.json``), or a ``.tar`` file."""
    if location.isdir(path, storage_options):
        from recordkit.formats.bridge_probes import probe_webdataset_shards
        return probe_webdataset_shards(location.listdir(path, storage_options))
    return str(path).endswith(".tar")


def shard_paths(path, storage_options=None) -> list[str]:
    """A ``.tar`` file, or the numbered shards of a directory in shard order (``formats/directories.py``)."""
    if not location.isdir(path, storage_options):
        return [path]
    return part_paths(path, (".tar",), storage_options)


class WebDatasetReader(DeserializerBase, ClosingReader):
    keeps_aliases = True  # the data set records each stream's alias: CTF output keeps the input names
    def __init__(self, path: str | os.PathLike[str], streams: Sequence[StreamSpec] | None = None, *,
                 precision: str | None = None, storage_options: dict | None = None,
                 cache_dir: str | None = None) -> None:
        self.path = path if isinstance(path, str) else os.fspath(path)
        self._storage = dict(storage_options=storage_options, cache_dir=cache_dir)
        location.ensure_regular(self.path, storage_options)
        is_dir = location.isdir(self.path, storage_options)
        # one listing answers every "is it there", each file's metadata is read once per open
        self._files = SourcePool(self.path if is_dir else None, storage_options=storage_options, cache_dir=cache_dir)
        # a sample is at least one member: a 512-byte header
        doc = read_description(self.path, FORMAT, storage_options, is_shard=lambda n: n.endswith(".tar"),
                               sequence_bytes=tar.BLOCK, files=self._files) if is_dir else None
        self.description = doc
        stored = None
        if doc is not None:
            stored = doc["streams"]
            self.paths = [location.join(self.path, s["name"]) for s in doc["shards"]]
        else:
            self.paths = shard_paths(self.path, storage_options)
        self.inferred = doc is None and not streams  # streams inferred from the members (``members.py``)
        if self.inferred:
            self._streams = self._infer()
            self._fields, self.keeps_alias = {s.name: s.alias for s in self._streams}, True
        else:
            self._streams, self._fields, self.keeps_alias = resolve_streams(self.path, stored, streams)
        if precision is not None:
            self.dtype = resolve_precision(precision)
        else:
            dts = {s.dtype for s in self._streams if s.dtype is not None}
            self.dtype = dts.pop() if len(dts) == 1 else np.dtype(np.float32)
        self._streams = [StreamSpec(s.name, s.format, s.dim, s.alias, s.defines_mb_size, dtype=self.dtype)
                         for s in self._streams]
        if doc is not None:
            counts = [(s["sequences"], s["samples"], s["size"]) for s in doc["shards"]]
        else:
            counts = [self._count(p) + (self._size(p),) for p in self.paths]
        self._kept_scan = None  # no shard's bytes stay with the reader
        self._chunks = []
        self._first = [0]
        for i, (nseq, nsamp, size) in enumerate(counts):
            self._chunks.append(ChunkInfo(i, nseq, nsamp, 0, size))
            self._first.append(self._first[-1] + nseq)

    def _size(self, path) -> int:
        return self._files.size(path)

    def _infer(self):
        """The streams of the first shard's first samples (``members.infer``)."""
        path = self.paths[0]
        data, (names, offs, sizes, hdr_offs) = self._scan_once(path)
        limit = 64 * (members.INFER_SAMPLES + 1)
        while True:  # only the first samples' names are split (a shard may have millions)
            keys, fields = _split(list(names[:limit]))
            bounds = _group_starts(keys)
            if len(bounds) > members.INFER_SAMPLES + 1 or limit >= len(names):
                break
            limit *= 4
        samples = []
        for i in range(min(len(bounds) - 1, members.INFER_SAMPLES)):
            a, b = bounds[i], bounds[i + 1]
            got = {fields[j]: data[int(offs[j]):int(offs[j]) + int(sizes[j])] for j in range(a, b)}
            samples.append((keys[a].decode(errors="replace"), got, int(hdr_offs[a]), i))
        if not samples:
            raise FormatError(path, f"no {META_NAME} stream description and no samples to infer the streams from "
                                    f"(--stream NAME=FORMAT:DIM[:FIELD])", offset=0)
        return members.infer(path, samples)

    def _member_field(self, spec, present) -> str:
        return members.member_of(self._fields[spec.name], present)

    def _count(self, path) -> tuple[int, int]:
        """Samples in a shard without a description: scan it (samples counted as sequences;
        sample counts are those of one stream, known only after decoding: use the sequences)."""
        names = self._scan_once(path)[1][0]
        split = _split_fast(names) if isinstance(names, np.ndarray) else None
        n = len(split[2]) - 1 if split is not None else len(_group_starts(_split(names)[0])) - 1
        return n, n

    def _scan_once(self, path):
        """(data, ``_scan``) of a shard, kept for the next call on the same shard (opening a data set
        infers from its first shard, then counts it)."""
        kept = getattr(self, "_kept_scan", None)
        if kept is not None and kept[0] == path:
            self._kept_scan = None
            return kept[1]
        data = self._files.read_whole(path)
        got = (data, _scan(data, path))
        self._kept_scan = (path, got)
        return got

    def sequence_location(self, chunk_id: int, index: int, sample: int | None = None) -> str:
        """Where sequence ``index`` of a chunk (one shard) is: the shard file and the place in it (what
        ``verify`` prints)."""
        sam = f", sample {sample}" if sample is not None else ""
        return f"{self.paths[chunk_id]}: sample {index} of the shard{sam}"

    def load_chunk(self, chunk_id: int, **_) -> ChunkData:
        path = self.paths[chunk_id]
        data = self._files.read_whole(path)
        fast = tar.scan_fast(data, path)
        split = _split_fast(fast[0]) if fast is not None else None
        if split is not None:
            names, offs, sizes, hdr_offs = fast
            keys, fields, bounds = split
        else:
            names, offs, sizes, hdr_offs = tar.scan(data, path)
            keys, fields = _split(names)
            bounds = _group_starts(keys)
        n = len(bounds) - 1
        expected = self._chunks[chunk_id].num_sequences
        if self.description is not None and n != expected:
            raise FormatError(path, f"the shard holds {n} samples, {META_NAME} says {expected} "
                                    f"(shard replaced or truncated?)", offset=len(data))
        cols, counts = self._columns_fast(data, fields, bounds, offs, sizes, n)
        if cols is None:
            if split is not None:  # the checked path works on lists
                keys = list(keys.tolist())
                fields = [f.decode("utf-8", "replace") for f in fields.tolist()]
                bounds = list(bounds.tolist())
            cols, counts = self._columns_checked(data, keys, fields, bounds, offs, sizes, hdr_offs, path, n)
        first = self._first[chunk_id]
        sample_keys = [keys[b] for b in list(bounds)[:-1]]
        if all(k.isdigit() and len(k) <= 20 for k in sample_keys) and (n == 0 or max(map(int, sample_keys)) < 2**64):
            key_arr = np.array([int(k) for k in sample_keys], dtype=np.uint64)
        else:
            key_arr = np.arange(first, first + n, dtype=np.uint64)
        lengths = sequence_lengths_of(self._streams, counts) if n else np.zeros(0, np.int64)
        return ChunkData(chunk_id, key_arr, lengths, cols)

    # -- the fast path: whole columns at once ---------------------------------------------------------
    def _columns_fast(self, data, fields, bounds, offs, sizes, n):
        """Every stream's column with NumPy over all members at once, or (None, None) when anything
        is off (a missing or repeated member, an unusual header...): the checked path then finds
        and locates the problem."""
        arr = np.frombuffer(data, dtype=np.uint8)
        farr = fields if isinstance(fields, np.ndarray) else np.array([f.encode() for f in fields], dtype=object)
        barr = np.asarray(bounds, dtype=np.int64)
        cols, counts = {}, {}
        present = {f.decode("utf-8", "replace") if isinstance(f, bytes) else f for f in set(farr.tolist())}
        if self.inferred and not present <= set(self._fields.values()):
            return None, None  # a member the first samples did not have: the checked path names it
        try:
            for spec in self._streams:
                f = self._fields[spec.name]
                if spec.is_bytes:
                    col = self._bytes_fast(data, farr, barr, n, members.bytes_member(f, present), offs, sizes)
                elif spec.is_sparse:
                    got = [self._arrays(arr, data, farr, barr, n, f + x, offs, sizes)
                           for x in (".indices.npy", ".values.npy", ".offsets.npy")]
                    if any(g is None for g in got):
                        return None, None
                    col = self._sparse_fast(spec, *got, n)
                else:
                    member = self._member_field(spec, present)
                    if members.extension(member) == "cls":
                        col = self._cls_fast(spec, data, farr, barr, n, member, offs, sizes)
                    else:
                        got = self._arrays(arr, data, farr, barr, n, member, offs, sizes)
                        if got is None:
                            return None, None
                        col = self._dense_fast(spec, *got)
                if col is None:
                    return None, None
                cols[spec.name] = col
                counts[spec.name] = np.diff(col.seq_offsets)
        except (npy.NpyError, ValueError, TypeError):
            return None, None
        return cols, counts

    @staticmethod
    def _arrays(arr, data, farr, barr, n, field, offs, sizes):
        """(dtype, shapes, values) of member ``field`` of every sample, or None."""
        idx = np.flatnonzero(farr == field.encode())
        if len(idx) != n or (n and not np.array_equal(np.searchsorted(barr, idx, side="right") - 1, np.arange(n))):
            return None
        if n == 0:
            return None, [], np.zeros(0, np.uint8)
        o, sz = offs[idx], sizes[idx]
        if np.any(sz < 10):
            return None
        head = arr[o[:, None] + np.arange(10)]
        if not (head[:, :6] == np.frombuffer(npy.MAGIC, np.uint8)).all() or np.any(head[:, 6] != 1):
            return None
        hlen = head[:, 8].astype(np.int64) | (head[:, 9].astype(np.int64) << 8)
        starts = o + 10 + hlen
        parsed = [npy.parse_text(data[a:b]) for a, b in zip((o + 10).tolist(), starts.tolist())]
        dtype = parsed[0][0]
        if any(p[0] != dtype for p in parsed):
            return None
        nbytes = np.array([p[2] for p in parsed], dtype=np.int64)
        if np.any(starts + nbytes > o + sz):
            return None
        values = gather_ranges(arr, starts, nbytes).view(dtype)
        return dtype, [p[1] for p in parsed], values

    @staticmethod
    def _bytes_fast(data, farr, barr, n, field, offs, sizes):
        """Member ``field`` of every sample (one each) as bytes values, or None (the checked path locates)."""
        idx = np.flatnonzero(farr == field.encode())
        if len(idx) != n or (n and not np.array_equal(np.searchsorted(barr, idx, side="right") - 1, np.arange(n))):
            return None
        return BytesColumn(object_array(bytes(data[a:a + b]) for a, b in zip(offs[idx].tolist(), sizes[idx].tolist())))

    def _cls_fast(self, spec, data, farr, barr, n, field, offs, sizes):
        """The ``.cls`` labels of every sample (one member each), or None (the checked path locates)."""
        idx = np.flatnonzero(farr == field.encode())
        if spec.dim != 1 or len(idx) != n or (n and not np.array_equal(np.searchsorted(barr, idx, side="right") - 1,
                                                                         np.arange(n))):
            return None
        try:
            labels = np.array([members.cls_value(data[a:a + b]) for a, b in zip(offs[idx].tolist(),
                                                                                 sizes[idx].tolist())], dtype=np.int64)
        except (ValueError, UnicodeDecodeError, OverflowError):
            return None
        values, bad = members.to_floats(labels, self.dtype)
        if bad is not None:
            return None
        return DenseColumn(values.reshape(-1, 1), offsets(np.ones(n, dtype=np.int64)))

    def _dense_fast(self, spec, dtype, shapes, values):
        if shapes and dtype is not None and dtype.kind not in "fiu":
            return None
        counts = np.zeros(len(shapes), dtype=np.int64)
        for i, shape in enumerate(shapes):
            if len(shape) == 2 and shape[1] == spec.dim:
                counts[i] = shape[0]
            elif shape == (spec.dim,):
                counts[i] = 1
            else:
                return None
        values, bad = members.to_floats(values, self.dtype)
        if bad is not None:
            return None  # an integer without an exact float: the checked path locates it
        return DenseColumn(values.reshape(-1, spec.dim), offsets(counts))

    def _sparse_fast(self, spec, ind, val, off, n):
        (di, si, vi), (dv, sv, vv), (do, so, vo) = ind, val, off
        if n == 0:
            return SparseColumn(np.zeros(0, self.dtype), np.zeros(0, np.int32), np.zeros(1, np.int64),
                                np.zeros(1, np.int64), spec.dim)
        if di.kind not in "iu" or do.kind not in "iu" or dv.kind not in "fiu":
            return None
        if any(len(x) != 1 for x in si) or any(len(x) != 1 for x in sv) or any(len(x) != 1 for x in so):
            return None
        nnz = np.array([x[0] for x in si], dtype=np.int64)
        if not np.array_equal(nnz, np.array([x[0] for x in sv], dtype=np.int64)):
            return None
        joined = join_offsets(vo, np.array([x[0] for x in so], dtype=np.int64), nnz)
        if joined is None:
            return None
        indices = vi.astype(np.int64)
        if len(indices) and (indices.min() < 0 or indices.max() >= spec.dim):
            return None
        indptr, counts = joined
        return SparseColumn(vv.astype(self.dtype), indices.astype(np.int32), indptr, offsets(counts), spec.dim)

    # -- the checked path: sample by sample, every problem located ------------------------------------
    def _columns_checked(self, data, keys, fields, bounds, offs, sizes, hdr_offs, path, n):
        # field -> member index, per sample
        samples = [dict(zip(fields[bounds[i]:bounds[i + 1]], range(bounds[i], bounds[i + 1]))) for i in range(n)]
        buf = memoryview(data)
        if self.inferred:
            known = set(self._fields.values())
            for i, sample in enumerate(samples):
                extra = sorted(set(sample) - known)
                if extra:
                    j = sample[extra[0]]
                    raise FormatError(path, f"sample '{keys[j].decode(errors='replace')}' has member '{extra[0]}', "
                                            f"which the first samples did not have (the streams inferred from them: "
                                            f"{', '.join(sorted(known))})", offset=int(hdr_offs[j]),
                                      record=f"sample {i}")
        cols, counts = {}, {}
        for spec in self._streams:
            if spec.is_bytes:
                field = members.bytes_member(self._fields[spec.name], {f for s in samples for f in s})
                col = BytesColumn(object_array(
                    bytes(buf[int(offs[j]):int(offs[j]) + int(sizes[j])])
                    for j in (self._member_at(spec, field, samples, i, keys, bounds, hdr_offs, path)
                              for i in range(n))))
            elif spec.is_sparse:
                col = self._sparse(spec, samples, keys, bounds, buf, offs, sizes, hdr_offs, path)
            else:
                col = self._dense(spec, samples, keys, bounds, buf, offs, sizes, hdr_offs, path)
            cols[spec.name] = col
            counts[spec.name] = np.diff(col.seq_offsets)
        return cols, counts

    @staticmethod
    def _member_at(spec, field, samples, i, keys, bounds, hdr_offs, path) -> int:
        """Where sample ``i``'s member ``field`` is among the shard's members; its absence located."""
        j = samples[i].get(field)
        if j is None:
            raise FormatError(path, f"sample '{keys[bounds[i]].decode(errors='replace')}' has no member "
                                    f"'{field}' (stream '{spec.name}')", offset=int(hdr_offs[bounds[i]]),
                              record=f"sample {i}")
        return j

    def _member(self, spec, field, samples, i, keys, bounds, buf, offs, sizes, hdr_offs, path):
        j = self._member_at(spec, field, samples, i, keys, bounds, hdr_offs, path)
        try:
            dtype, shape, start, nbytes = npy.parse(buf, int(offs[j]), int(sizes[j]))
        except npy.NpyError as e:
            raise FormatError(path, f"member '{keys[j].decode(errors='replace')}.{field}': {e}",
                              offset=int(hdr_offs[j]), record=f"sample {i}") from None
        return j, dtype, shape, start, nbytes

    def _bad(self, path, hdr_offs, j, i, keys, field, what):
        return FormatError(path, f"member '{keys[j].decode(errors='replace')}.{field}': {what}",
                           offset=int(hdr_offs[j]), record=f"sample {i}")

    def _cls(self, spec, field, samples, i, keys, bounds, buf, offs, sizes, hdr_offs, path):
        """A ``.cls`` member: one sample of dim 1."""
        j = self._member_at(spec, field, samples, i, keys, bounds, hdr_offs, path)
        try:
            value = members.cls_value(bytes(buf[int(offs[j]):int(offs[j]) + int(sizes[j])]))
        except (ValueError, UnicodeDecodeError) as e:
            raise self._bad(path, hdr_offs, j, i, keys, field, f"not a class label: {e}") from None
        return j, np.array([value], dtype=np.int64)

    def _dense(self, spec, samples, keys, bounds, buf, offs, sizes, hdr_offs, path) -> DenseColumn:
        field = members.member_of(self._fields[spec.name], {f for s in samples for f in s})
        parts, counts = [], np.zeros(len(samples), dtype=np.int64)
        for i in range(len(samples)):
            if members.extension(field) == "cls":
                j, arr = self._cls(spec, field, samples, i, keys, bounds, buf, offs, sizes, hdr_offs, path)
                if spec.dim != 1:
                    raise self._bad(path, hdr_offs, j, i, keys, field, f"a class label is dim 1, stream "
                                                                       f"'{spec.name}' is declared dim {spec.dim}")
                parts.append(self._exact(arr, path, hdr_offs, j, i, keys, field))
                counts[i] = 1
                continue
            j, dtype, shape, start, nbytes = self._member(spec, field, samples, i, keys, bounds, buf, offs, sizes,
                                                          hdr_offs, path)
            if dtype.kind not in "fiu":
                raise self._bad(path, hdr_offs, j, i, keys, field, f"dtype {dtype} is not numeric")
            if len(shape) == 1 and shape[0] == spec.dim:
                shape = (1, spec.dim)
            if len(shape) != 2 or shape[1] != spec.dim:
                raise self._bad(path, hdr_offs, j, i, keys, field,
                                f"shape {shape}, expected (samples, {spec.dim}) for dense stream '{spec.name}'")
            arr = np.frombuffer(buf, dtype=dtype, count=shape[0] * shape[1], offset=start)
            parts.append(self._exact(arr, path, hdr_offs, j, i, keys, field))
            counts[i] = shape[0]
        flat = np.concatenate(parts).astype(self.dtype, copy=False) if parts else np.zeros(0, self.dtype)
        return DenseColumn(flat.reshape(-1, spec.dim), offsets(counts))

    def _exact(self, arr, path, hdr_offs, j, i, keys, field):
        """``arr`` as the stream's floats; an integer they do not hold exactly is a located error."""
        from recordkit.formats.integers import refusal
        out, bad = members.to_floats(arr, self.dtype)
        if bad is not None:
            raise self._bad(path, hdr_offs, j, i, keys, field, refusal(int(arr.flat[bad]), self.dtype))
        return out

    def _sparse(self, spec, samples, keys, bounds, buf, offs, sizes, hdr_offs, path) -> SparseColumn:
        f = self._fields[spec.name]
        fi, fv, fo = f + ".indices.npy", f + ".values.npy", f + ".offsets.npy"
        ind_parts, val_parts, ptr_parts = [], [], []
        counts = np.zeros(len(samples), dtype=np.int64)
        base = 0
        for i in range(len(samples)):
            got = {}
            for f in (fi, fv, fo):
                j, dtype, shape, start, nbytes = self._member(spec, f, samples, i, keys, bounds, buf, offs, sizes,
                                                              hdr_offs, path)
                if len(shape) != 1 or dtype.kind not in ("iu" if f != fv else "fiu"):
                    raise self._bad(path, hdr_offs, j, i, keys, f, f"expected a 1-D {'numeric' if f == fv else 'integer'} "
                                                                   f"array, got {dtype} {shape}")
                got[f] = (j, np.frombuffer(buf, dtype=dtype, count=shape[0], offset=start))
            (ji, ind), (jv, val), (jo, off) = got[fi], got[fv], got[fo]
            if len(ind) != len(val):
                raise self._bad(path, hdr_offs, jv, i, keys, fv, f"{len(val)} values for {len(ind)} indices")
            problem = offsets_problem(off, len(ind))
            if problem is not None:
                raise self._bad(path, hdr_offs, jo, i, keys, fo, f"offsets must rise from 0 to the {len(ind)} stored "
                                                                 f"values (CSR row pointers): {problem}")
            if len(ind) and (int(ind.min()) < 0 or int(ind.max()) >= spec.dim):
                raise self._bad(path, hdr_offs, ji, i, keys, fi, f"sparse index outside [0, {spec.dim})")
            ind_parts.append(ind)
            val_parts.append(val)
            ptr_parts.append(off[:-1].astype(np.int64) + base)
            base += len(ind)
            counts[i] = len(off) - 1
        ptr = np.concatenate(ptr_parts + [np.array([base], dtype=np.int64)])
        values = np.concatenate(val_parts).astype(self.dtype) if val_parts else np.zeros(0, self.dtype)
        indices = np.concatenate(ind_parts).astype(np.int32) if ind_parts else np.zeros(0, np.int32)
        return SparseColumn(values, indices, ptr, offsets(counts), spec.dim)


    def close(self) -> None:
        files = getattr(self, "_files", None)
        if files is not None:
            files.close()


def iter_samples(path, storage_options=None, cache_dir=None):
    """(shard path, header offset, sample index in the shard, key, {field: bytes}) of every sample,
    shard by shard in order, its members grouped as WebDataset groups them (``_split``): what
    converts a data set member by member (``formats/records_bridge.py``). A damaged tar is a located
    ``FormatError`` (``tar.scan``)."""
    from recordkit.formats.sharding import read_whole
    for shard in shard_paths(path, storage_options):
        data = read_whole(shard, storage_options=storage_options, cache_dir=cache_dir)
        names, offs, sizes, hdr_offs = tar.scan(data, shard)
        keys, fields = _split(list(names))
        bounds = _group_starts(keys)
        view = memoryview(data)
        for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
            members = {fields[j]: bytes(view[int(offs[j]):int(offs[j]) + int(sizes[j])]) for j in range(a, b)}
            yield shard, int(hdr_offs[a]), i, keys[a].decode(errors="replace"), members


def _scan(data, path):
    """``tar.scan``'s members, column-wise where the shard allows (``tar.scan_fast``: names a NumPy array)."""
    fast = tar.scan_fast(data, path)
    return tar.scan(data, path) if fast is None else fast


_SPLIT = re.compile(rb"^((?:.*/)?[^/.]*)\.(.*)$", re.S)


def _split(names):
    """WebDataset's grouping: key = the member path up to the first dot of its base name."""
    keys, fields = [], []
    for name in names:
        m = _SPLIT.match(name)
        if m is None:
            keys.append(name)
            fields.append("")
        else:
            keys.append(m.group(1))
            fields.append(m.group(2).decode("utf-8", "replace"))
    return keys, fields


def _split_fast(names):
    """``_split`` + ``_group_starts`` column-wise for plain names (no '/'; each with a dot), else None."""
    if len(names) == 0 or (np.char.find(names, b"/") >= 0).any():
        return None
    parts = np.char.partition(names, b".")
    if (parts[:, 1] != b".").any():
        return None
    keys, fields = parts[:, 0], parts[:, 2]
    change = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    bounds = np.concatenate([[0], change, [len(keys)]]).astype(np.int64)
    return keys, fields, bounds


def _group_starts(keys) -> list[int]:
    bounds = [0]
    for i in range(1, len(keys)):
        if keys[i] != keys[i - 1]:
            bounds.append(i)
    if keys:
        bounds.append(len(keys))
    return bounds if keys else [0]
