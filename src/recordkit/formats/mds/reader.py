"""MDSReader: a MosaicML Streaming (MDS) directory as a Deserializer (one chunk per shard).

Reads the layout ``writer.py`` describes (uncompressed MDS, index version 2). Streams come
from the ``recordkit`` object of ``index.json``; other MDS data sets are read with the streams
their ``column_encodings`` imply (``columns.py``: scalars, ndarrays) or with ``streams`` (alias =
column name; sparse streams read ``ALIAS.indices`` / ``.values`` / ``.offsets``) selecting
columns. Other columns are skipped. Errors are located ``FormatError``s
(shard, byte offset, sample). The shard digests ``index.json`` may record are compared by
``validate`` (``digest_problems``), not on every read.
"""
from __future__ import annotations

import hashlib
import math
import os
from typing import TYPE_CHECKING, Iterator, Sequence

import numpy as np

from recordkit.engine.chunk import BytesColumn, ChunkData, DenseColumn, SparseColumn, object_array
from recordkit.engine.deserializer import ChunkInfo, DeserializerBase
from recordkit.engine.streams import StreamSpec, resolve_precision
from recordkit.errors import FormatError
from recordkit.formats.closing import ClosingReader
from recordkit.formats.arrow_layouts import PROBE_ROWS, exact_values
from recordkit.formats.mds.columns import BYTES, SCALARS, infer_streams, refused, sample_rows, static_shape
from recordkit.formats.mds.index import read_index
from recordkit.formats.csr import join_offsets, offsets_problem
from recordkit.formats.mds.writer import INDEX, KEY_COLUMN
from recordkit.formats.sharding import gather_ranges, offsets, resolve_streams, sequence_lengths_of
from recordkit.storage import location
from recordkit.storage.pool import SourcePool

if TYPE_CHECKING:
    from recordkit.formats.validate import Problem

_VALUE_DTYPES = {8: "u1", 9: "i1", 16: "<u2", 17: "<i2", 18: "<f2", 32: "<u4", 33: "<i4", 34: "<f4",
                 64: "<u8", 65: "<i8", 66: "<f8"}
_FIXED = {"uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
          "float16": 2, "float32": 4, "float64": 8, "int": 8}


def _digest(algo: str, data: bytes) -> str | None:
    """The hex digest of ``data`` under a Streaming hash name (hashlib's, or xxhash's ``xxh*``), or None."""
    if not isinstance(algo, str):
        return None
    if algo.startswith("xxh"):
        try:
            import xxhash
        except ImportError:
            return None
        make = getattr(xxhash, algo, None)
        return make(data).hexdigest() if callable(make) else None
    try:
        return hashlib.new(algo, data).hexdigest()
    except (ValueError, TypeError):
        return None


def _sample_of(seq_offsets, k: int, dim: int) -> str:
    """The MDS sample (row) holding value ``k`` of a dense column (for messages)."""
    return f"sample {int(np.searchsorted(seq_offsets, k // dim, 'right')) - 1} of the shard"


def _sample_columns(data, offs, cols, n: int, path):
    """(sample, column, encoding, byte offset, size) of every column of the first ``n`` samples of a
    shard, in order (``column_spans``: a located error where a sample's sizes do not fit it)."""
    for k in range(n):
        for (c, enc, _), (pos, size) in zip(cols, column_spans(data, offs, cols, k, path)):
            yield k, c, enc, pos, size


def looks_like(path, storage_options=None) -> bool:
    return location.isdir(path, storage_options) and location.isfile(location.join(path, INDEX), storage_options)


def sample_table(data: bytes, path: str, n: int, nbytes: int) -> np.ndarray:
    """The ``n + 1`` sample offsets of a whole shard, checked against the index (``n`` samples,
    ``nbytes`` bytes) and the shard's length."""
    if nbytes and len(data) != nbytes:
        raise FormatError(path, f"shard has {len(data)} bytes, index.json says {nbytes} (truncated?)",
                          offset=min(len(data), nbytes))
    if len(data) < 4 + 4 * (n + 1):
        raise FormatError(path, "shard too short for its sample table", offset=0)
    stored_n = int(np.frombuffer(data, "<u4", 1, 0)[0])
    if stored_n != n:
        raise FormatError(path, f"shard says {stored_n} samples, index.json says {n}", offset=0)
    offs = np.frombuffer(data, "<u4", n + 1, 4).astype(np.int64)
    if n and (np.any(np.diff(offs) < 0) or offs[-1] > len(data) or offs[0] < 4 + 4 * (n + 1)):
        raise FormatError(path, "sample offsets are not increasing or run past the end of the shard "
                                "(truncated shard?)", offset=4)
    return offs


def column_spans(data: bytes, offs: np.ndarray, cols, k: int, path: str) -> list[tuple[int, int]]:
    """``(position, size)`` of each of sample ``k``'s columns (``cols``: the index's (name, encoding,
    fixed size or None)), checked to stay inside the sample."""
    a, b = int(offs[k]), int(offs[k + 1])
    nvar = sum(size is None for _, _, size in cols)
    if b - a < 4 * nvar:
        raise FormatError(path, "sample too short for its column sizes", offset=a, record=f"sample {k}")
    sizes = iter(np.frombuffer(data, "<u4", nvar, a).tolist())
    pos = a + 4 * nvar
    spans = []
    for c, _, fixed in cols:
        size = int(fixed) if fixed is not None else next(sizes)
        if pos + size > b:
            raise FormatError(path, f"column '{c}' runs past its sample", offset=pos, record=f"sample {k}")
        spans.append((pos, size))
        pos += size
    return spans


class MDSReader(DeserializerBase, ClosingReader):
    keeps_aliases = True  # the data set records each stream's alias: CTF output keeps the input names
    def __init__(self, path: str | os.PathLike[str], streams: Sequence[StreamSpec] | None = None, *,
                 precision: str | None = None, storage_options: dict | None = None,
                 cache_dir: str | None = None) -> None:
        self.path = path if isinstance(path, str) else os.fspath(path)
        # one listing answers every "is it there", each file's metadata is read once per open
        self._files = SourcePool(self.path, storage_options=storage_options, cache_dir=cache_dir)
        index_path = location.join(self.path, INDEX)
        if not self._files.isfile(index_path):
            raise FormatError(index_path, "no index.json: not an MDS data set")
        index = read_index(self.path, storage_options, cache_dir, files=self._files)
        recorded = index.streams
        self._shards = [(sh.path, sh.samples, sh.columns, sh.nbytes) for sh in index.shards]
        inferred = None
        if streams is None and recorded is None:  # written by Streaming's MDSWriter: the encodings tell
            inferred = infer_streams(index_path, index.shards[0].columns if index.shards else [], self._probe,
                                     skip={KEY_COLUMN})
            streams = inferred
        streams, self._fields, self.keeps_alias = resolve_streams(self.path, recorded, streams)
        self.dtype = resolve_precision(precision) if precision is not None else (
            ({s.dtype for s in recorded if s.dtype is not None} or {np.dtype(np.float32)}).pop()
            if recorded else np.dtype(np.float32))
        self._streams = [StreamSpec(s.name, s.format, s.dim, s.alias, s.defines_mb_size,
                                    dtype=s.dtype if inferred and precision is None else self.dtype)
                         for s in streams]
        self._chunks = [ChunkInfo(i, sh.samples, sh.frames, 0, sh.nbytes) for i, sh in enumerate(index.shards)]
        self._first = [0]
        for sh in index.shards:
            self._first.append(self._first[-1] + sh.samples)
        # per shard, the digests index.json records (Streaming's ``hashes``): checked by ``digest_problems``
        self._digests = [sh.hashes for sh in index.shards]
        needed = {}  # column -> the stream reading it
        for s in self._streams:
            f = self._fields[s.name]
            needed.update({c: s for c in ([f + ".indices", f + ".values", f + ".offsets"] if s.is_sparse else [f])})
        for i, (p, _, cols, _) in enumerate(self._shards):
            have = {c for c, _, _ in cols}
            missing = sorted(set(needed) - have)
            if missing:
                raise FormatError(index_path, f"shards[{i}].column_names: shard {os.path.basename(p)} has no "
                                              f"column(s) {', '.join(missing)}")
            for j, (c, enc, _) in enumerate(cols):
                why = refused(enc, needed[c]) if c in needed else None
                if why is not None:
                    raise FormatError(index_path, f"shards[{i}].column_encodings[{j}]: column '{c}' {why}")

    def _shard_bytes(self, chunk_id: int):
        """(bytes, sample offsets) of a shard, its sizes checked against index.json."""
        path, n, cols, nbytes = self._shards[chunk_id]
        data = self._files.read_whole(path)
        offs = sample_table(data, path, n, nbytes)
        return data, offs

    def _probe(self, column: str):
        """(shapes, dtype) of ``column`` in the first samples of the first shard: what tells the dim of
        an ndarray encoded without a fixed shape (``columns.infer_streams``)."""
        path, n, cols, _ = self._shards[0]
        data, offs = self._shard_bytes(0)
        buf, shapes, dtype = memoryview(data), [], None
        for k, c, enc, pos, size in _sample_columns(data, offs, cols, min(n, PROBE_ROWS), path):
            if c == column:
                arr, _ = self._ndarray(enc, buf, pos, size, path, k, c)
                shapes.append(arr.shape)
                dtype = arr.dtype
        return shapes, dtype

    @property
    def paths(self) -> list[str]:
        return [p for p, _, _, _ in self._shards]

    def digest_problems(self) -> Iterator[Problem]:
        """A ``Problem`` for every shard whose bytes no longer match a digest ``index.json`` records
        for it (``raw_data.hashes``: SHA-1 when written with checksums, any of Streaming's algorithms);
        a warning for a digest it cannot compute. What ``validate`` checks; loading a chunk does not
        (reading would hash every shard: Streaming, too, checks only when asked, ``validate_hash``)."""
        from recordkit.formats.validate import Problem
        for i, ((path, _, _, _), digests) in enumerate(zip(self._shards, self._digests)):
            if not isinstance(digests, dict) or not digests:
                continue
            data = self._files.read_whole(path)
            for algo, want in sorted(digests.items()):
                digest = _digest(algo, data)
                if digest is None:
                    yield Problem(path, "mds-digest-unchecked", f"index.json records a {algo!r} digest, which "
                                                                f"recordkit cannot compute (unknown algorithm, or "
                                                                f"the xxhash package is missing)",
                                  record=f"shard {i}", severity="warning")
                elif not isinstance(want, str) or digest != want.lower():
                    yield Problem(path, "mds-digest-mismatch", f"the shard's {algo} digest is {digest}, index.json "
                                                               f"records {want!r}: the shard changed after it was "
                                                               f"written", record=f"shard {i}")


    def sequence_location(self, chunk_id: int, index: int, sample: int | None = None) -> str:
        """Where sequence ``index`` of a chunk (one shard) is: the shard file and the place in it (what
        ``verify`` prints)."""
        sam = f", sample {sample}" if sample is not None else ""
        return f"{self._shards[chunk_id][0]}: sample {index} of the shard{sam}"

    def load_chunk(self, chunk_id: int, **_) -> ChunkData:
        path, n, cols, nbytes = self._shards[chunk_id]
        data, offs = self._shard_bytes(chunk_id)
        where = {c: i for i, (c, _, _) in enumerate(cols)}
        wanted = {c for s in self._streams for f in [self._fields[s.name]]
                  for c in ([f + ".indices", f + ".values", f + ".offsets"] if s.is_sparse else [f])}
        fast = self._load_fast(chunk_id, data, offs, cols, wanted, n)
        if fast is not None:
            return fast
        buf = memoryview(data)
        per = {c: [] for c in wanted}
        keys = []
        has_key = KEY_COLUMN in where and cols[where[KEY_COLUMN]][1] in ("uint64", "int64", "int")
        for k, c, enc, pos, size in _sample_columns(data, offs, cols, n, path):
            if c in wanted:
                per[c].append((bytes(buf[pos:pos + size]), pos) if enc in BYTES else
                              self._ndarray(enc, buf, pos, size, path, k, c))
            elif has_key and c == KEY_COLUMN:
                keys.append(bytes(buf[pos:pos + 8]))
        cols_out, counts = {}, {}
        for spec in self._streams:
            if spec.is_bytes:
                col = BytesColumn(object_array(v for v, _ in per[self._fields[spec.name]]))
            elif spec.is_sparse:
                col = self._sparse(spec, per, path)
            else:
                col = self._dense(spec, per[self._fields[spec.name]], path)
            cols_out[spec.name] = col
            counts[spec.name] = np.diff(col.seq_offsets)
        first = self._first[chunk_id]
        key_arr = (np.frombuffer(b"".join(keys), "<u8").astype(np.uint64) if has_key and len(keys) == n
                   else np.arange(first, first + n, dtype=np.uint64))
        lengths = sequence_lengths_of(self._streams, counts) if n else np.zeros(0, np.int64)
        return ChunkData(chunk_id, key_arr, lengths, cols_out)

    # -- the fast path: every sample's columns located and gathered at once --------------------------
    def _load_fast(self, chunk_id, data, offs, cols, wanted, n):
        """The chunk with NumPy over all samples, or None when anything is unusual (dynamic dtypes,
        sizes that do not add up, bad offsets...): the sample-by-sample path then locates it."""
        if n == 0:
            return None
        try:
            arr = np.frombuffer(data, dtype=np.uint8)
            a = offs[:-1]
            var = [i for i, (_, _, size) in enumerate(cols) if size is None]
            sizes = np.zeros((n, len(cols)), dtype=np.int64)
            if var:
                raw = arr[a[:, None] + np.arange(4 * len(var))]
                sizes[:, var] = np.ascontiguousarray(raw).view("<u4").reshape(n, len(var))
            for i, (_, _, size) in enumerate(cols):
                if size is not None:
                    sizes[:, i] = int(size)
            starts = a[:, None] + 4 * len(var) + np.concatenate(
                [np.zeros((n, 1), np.int64), np.cumsum(sizes, axis=1)[:, :-1]], axis=1)
            if not np.array_equal(starts[:, -1] + sizes[:, -1], offs[1:]):
                return None
            where = {c: i for i, (c, _, _) in enumerate(cols)}
            got = {}
            for c in wanted:
                i = where[c]
                enc = str(cols[i][1])
                parts = enc.split(":")
                if enc in BYTES:  # the column's bytes as they are
                    got[c] = BytesColumn(object_array(bytes(data[x:x + z]) for x, z in
                                                      zip(starts[:, i].tolist(), sizes[:, i].tolist())))
                    continue
                if enc in SCALARS or len(parts) >= 3:  # one value, or a fixed shape: no header
                    shape = () if enc in SCALARS else static_shape(enc)
                    dtype = np.dtype(SCALARS[enc] if enc in SCALARS else np.dtype(parts[1]).newbyteorder("<"))
                    if not np.all(sizes[:, i] == math.prod(shape) * dtype.itemsize):
                        return None
                    got[c] = (np.tile(np.asarray(shape, np.int64), (n, 1)),
                              gather_ranges(arr, starts[:, i], sizes[:, i]).view(dtype))
                    continue
                if len(parts) != 2 or not parts[1]:
                    return None  # dynamic dtype: the general path
                got[c] = self._column_fast(arr, np.dtype(parts[1]).newbyteorder("<"), starts[:, i], sizes[:, i])
                if got[c] is None:
                    return None
            keys = None
            if KEY_COLUMN in where and cols[where[KEY_COLUMN]][1] in ("uint64", "int64", "int"):
                k = starts[:, where[KEY_COLUMN]]
                keys = np.ascontiguousarray(arr[k[:, None] + np.arange(8)]).view("<u8").reshape(-1).astype(np.uint64)
            cols_out, counts = {}, {}
            for spec in self._streams:
                f = self._fields[spec.name]
                col = (got[f] if spec.is_bytes else
                       self._sparse_fast(spec, got[f + ".indices"], got[f + ".values"], got[f + ".offsets"])
                       if spec.is_sparse else self._dense_fast(spec, got[f], self._shards[chunk_id][0], f))
                if col is None:
                    return None
                cols_out[spec.name] = col
                counts[spec.name] = np.diff(col.seq_offsets)
        except (ValueError, TypeError, IndexError):
            return None
        first = self._first[chunk_id]
        key_arr = keys if keys is not None else np.arange(first, first + n, dtype=np.uint64)
        return ChunkData(chunk_id, key_arr, sequence_lengths_of(self._streams, counts), cols_out)

    @staticmethod
    def _column_fast(arr, dtype, start, size):
        """(shapes (n, ndim), values) of a dynamic-shape ndarray column, or None."""
        head = arr[start]
        ndim = head >> 2
        if len(set(ndim.tolist())) != 1:
            return None
        nd = int(ndim[0])
        code = head & 3
        shapes = np.zeros((len(start), nd), dtype=np.int64)
        for c in set(code.tolist()):
            sel = np.flatnonzero(code == c)
            w = 1 << c
            raw = np.ascontiguousarray(arr[(start[sel] + 1)[:, None] + np.arange(nd * w)])
            shapes[sel] = raw.view(f"<u{w}").reshape(len(sel), nd).astype(np.int64)
        pay = start + 1 + nd * (1 << code.astype(np.int64))
        # a damaged shape's int64 product can wrap around to the column's size: estimated in float first
        if np.any(shapes < 0) or np.any(np.prod(shapes.astype(np.float64), axis=1) * dtype.itemsize > 2.0 ** 62):
            return None
        nbytes = np.prod(shapes, axis=1) * dtype.itemsize
        if not np.array_equal(pay + nbytes, start + size):
            return None
        return shapes, gather_ranges(arr, pay, nbytes).view(dtype)

    def _dense_fast(self, spec, got, path, field):
        """A dense column from every sample's shape at once (``columns.sample_rows``'s rule), or None."""
        shapes, values = got
        if shapes.shape[1] == 2 and np.all(shapes[:, 1] == spec.dim):
            counts = shapes[:, 0]
        elif shapes.shape[1] == 1 and np.all(shapes[:, 0] == spec.dim):
            counts = np.ones(len(shapes), dtype=np.int64)
        elif shapes.shape[1] == 1 and spec.dim == 1:
            counts = shapes[:, 0]
        elif shapes.shape[1] == 0 and spec.dim == 1:
            counts = np.ones(len(shapes), dtype=np.int64)
        else:
            return None
        so = offsets(counts)
        values = exact_values(values, spec.dtype or self.dtype, path=path, column=field, where="the shard",
                              row_of=lambda k: _sample_of(so, k, spec.dim))
        return DenseColumn(values.reshape(-1, spec.dim), so)

    def _sparse_fast(self, spec, ind, val, off):
        (si, vi), (sv, vv), (so, vo) = ind, val, off
        if si.shape[1] != 1 or sv.shape[1] != 1 or so.shape[1] != 1 or vi.dtype.kind not in "iu" \
                or vo.dtype.kind not in "iu":
            return None
        nnz = si[:, 0]
        if not np.array_equal(nnz, sv[:, 0]):
            return None
        joined = join_offsets(vo, so[:, 0], nnz)
        if joined is None:
            return None
        indices = vi.astype(np.int64)
        if len(indices) and (indices.min() < 0 or indices.max() >= spec.dim):
            return None
        indptr, counts = joined
        return SparseColumn(vv.astype(self.dtype), indices.astype(np.int32), indptr, offsets(counts), spec.dim)

    @staticmethod
    def _ndarray(enc, buf, pos, size, path, k, c):
        """Column ``c`` of sample ``k`` (an ndarray or a scalar encoding) as (array, byte offset)."""
        if enc in SCALARS:
            dtype = np.dtype(SCALARS[enc])
            if size != dtype.itemsize:
                raise FormatError(path, f"column '{c}': {size} bytes, a {enc} is {dtype.itemsize}", offset=pos,
                                  record=f"sample {k}")
            return np.frombuffer(buf, dtype, 1, pos).reshape(()), pos
        parts = enc.split(":")
        i = pos
        end = pos + size
        try:
            if len(parts) >= 2 and parts[1]:
                dtype = np.dtype(parts[1]).newbyteorder("<")
            else:
                dtype = np.dtype(_VALUE_DTYPES[buf[i]])
                i += 1
            if len(parts) >= 3:
                shape = tuple(int(x) for x in parts[2].split(","))
            else:
                byte = buf[i]
                i += 1
                ndim, code = byte >> 2, byte & 3
                w = 1 << code
                shape = tuple(int(x) for x in np.frombuffer(buf, f"<u{w}", ndim, i))
                i += ndim * w
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise FormatError(path, f"column '{c}': bad ndarray header ({e})", offset=pos, record=f"sample {k}") from None
        count = math.prod(shape)  # exactly: an int64 product of a damaged shape wraps around to a plausible size
        if i + count * dtype.itemsize != end:
            raise FormatError(path, f"column '{c}': shape {shape} of {dtype} needs {count * dtype.itemsize} bytes, "
                                    f"the column has {end - i}", offset=pos, record=f"sample {k}")
        return np.frombuffer(buf, dtype, count, i).reshape(shape), pos

    def _dense(self, spec, items, path) -> DenseColumn:
        field = self._fields[spec.name]
        parts, counts = [], np.zeros(len(items), dtype=np.int64)
        for k, (arr, pos) in enumerate(items):
            rows = sample_rows(arr, spec.dim)
            if rows is None:
                hint = (f"; to read 1-D arrays as sequences declare --stream {spec.name}=dense:1:{field}"
                        if arr.ndim == 1 else "")
                raise FormatError(path, f"column '{field}': shape {arr.shape}, expected (samples, {spec.dim}) or "
                                        f"({spec.dim},){hint}", offset=pos, record=f"sample {k}")
            parts.append(rows.reshape(-1))
            counts[k] = rows.shape[0]
        so = offsets(counts)
        flat = (exact_values(np.concatenate(parts), spec.dtype or self.dtype, path=path, column=field,
                             where="the shard", row_of=lambda k: _sample_of(so, k, spec.dim))
                if parts else np.zeros(0, spec.dtype or self.dtype))
        return DenseColumn(flat.reshape(-1, spec.dim), so)

    def _sparse(self, spec, per, path) -> SparseColumn:
        f = self._fields[spec.name]
        ind_l, val_l, off_l = per[f + ".indices"], per[f + ".values"], per[f + ".offsets"]
        ind_parts, val_parts, ptr_parts = [], [], []
        counts = np.zeros(len(ind_l), dtype=np.int64)
        base = 0
        for k, ((ind, pi), (val, pv), (off, po)) in enumerate(zip(ind_l, val_l, off_l)):
            ind, val, off = ind.reshape(-1), val.reshape(-1), off.reshape(-1)
            if len(ind) != len(val):
                raise FormatError(path, f"'{f}': {len(ind)} indices, {len(val)} values", offset=pv,
                                  record=f"sample {k}")
            problem = offsets_problem(off, len(ind))
            if problem is not None:
                raise FormatError(path, f"'{f}.offsets' must rise from 0 to {len(ind)} (CSR row pointers): {problem}",
                                  offset=po, record=f"sample {k}")
            if len(ind) and (int(ind.min()) < 0 or int(ind.max()) >= spec.dim):
                raise FormatError(path, f"'{f}.indices': index outside [0, {spec.dim})", offset=pi,
                                  record=f"sample {k}")
            ind_parts.append(ind)
            val_parts.append(val)
            ptr_parts.append(off[:-1].astype(np.int64) + base)
            base += len(ind)
            counts[k] = len(off) - 1
        ptr = np.concatenate(ptr_parts + [np.array([base], dtype=np.int64)])
        values = np.concatenate(val_parts).astype(self.dtype) if val_parts else np.zeros(0, self.dtype)
        indices = np.concatenate(ind_parts).astype(np.int32) if ind_parts else np.zeros(0, np.int32)
        return SparseColumn(values, indices, ptr, offsets(counts), spec.dim)


    def close(self) -> None:
        files = getattr(self, "_files", None)
        if files is not None:
            files.close()
