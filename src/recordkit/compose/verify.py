"""Proving a conversion lossless: two data sets compared sequence by sequence, or one against a manifest.

``verify(src, dst)`` walks two Deserializers in storage order, side by side (their chunkings
may differ), and compares every sequence: its key (when both sides carry keys from the data:
CTF ids, OFRecord ``key`` features; a side that stores none, like CBF, is compared by position),
per stream its sample count, and its values, exactly. Precision follows what a conversion does:
where DST holds float32 and SRC float64, SRC is rounded to float32 (round to nearest even, as
NumPy and every recordkit writer do) before comparing; a wider DST must hold SRC's values exactly.
NaN equals NaN. Each difference names the sequence's place on both sides (``file:line`` for
CTF, byte offset + chunk/record/tuple for the binary formats).

``write_manifest(path, deserializer)`` records, per sequence, the key, the sample count per
stream and a BLAKE2b-128 digest of each stream's values in a canonical byte form (little-endian
values at the manifest's precision; sparse: per-sample counts, indices, values), so that
``verify_manifest(path, dst)`` checks a converted copy later without the source. Whole columns
are compared with NumPy; only differing runs are looked at sequence by sequence.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from recordkit.engine.chunk import ChunkData
from recordkit.engine.streams import StreamSpec, streams_from_json
from recordkit.engine.deserializer import chunk_sequence_keys, name_of
from recordkit.errors import FormatError

MANIFEST_MAGIC = "recordkit-manifest"
MANIFEST_VERSION = 1
DIGEST_SIZE = 16


@dataclass
class Difference:
    """The first difference found in one sequence (or a count/stream mismatch: ``position`` -1)."""

    kind: str            # "key", "length", "value", "nnz", "digest", "count", "stream"
    position: int        # the sequence's 0-based position in storage order
    message: str
    src: str | None = None   # where it is in SRC (or the manifest entry)
    dst: str | None = None   # where it is in DST

    def __str__(self) -> str:
        where = []
        if self.src:
            where.append(f"SRC {self.src}")
        if self.dst:
            where.append(f"DST {self.dst}")
        at = f"sequence {self.position}: " if self.position >= 0 else ""
        return f"{at}{self.message}" + (f"\n    {'; '.join(where)}" if where else "")

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class VerifyResult:
    sequences: int = 0                       # sequences compared
    src_sequences: int = 0
    dst_sequences: int = 0
    differing: int = 0                       # sequences (and count/stream mismatches) that differ
    differences: list = field(default_factory=list)   # the first ``max_differences``, in order
    keys_compared: bool = False
    notes: list = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return self.differing == 0

    def to_dict(self) -> dict:
        return {"equal": self.equal, "sequences": self.sequences, "src_sequences": self.src_sequences,
                "dst_sequences": self.dst_sequences, "differing": self.differing,
                "keys_compared": self.keys_compared, "notes": list(self.notes),
                "differences": [d.to_dict() for d in self.differences]}

    def _add(self, diff: Difference, max_differences: int) -> None:
        self.differing += 1
        if len(self.differences) < max_differences:
            self.differences.append(diff)


# -- where a sequence is -----------------------------------------------------------------------------

def describe(d, chunk: ChunkData, i: int, sample: int | None = None) -> str:
    """Where sequence ``i`` of a loaded chunk is in its files, as precisely as the format allows:
    the reader's ``sequence_location(chunk_id, index, sample)`` (``index``: the sequence's place in
    the chunk as stored; a reader naming ``key`` also gets the sequence's key), else chunk and place."""
    pos = int(chunk.positions[i]) if chunk.positions is not None else i
    key = int(chunk.keys[i])
    own = getattr(d, "sequence_location", None)
    if own is not None:
        return own(chunk.chunk_id, pos, sample, key=key) if _takes_key(own) else own(chunk.chunk_id, pos, sample)
    sam = f", sample {sample}" if sample is not None else ""
    return f"{name_of(d)}: chunk {chunk.chunk_id}, sequence {pos} of the chunk (key {key}{sam})"


def _takes_key(method) -> bool:
    import inspect
    try:
        return "key" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def keyed(d) -> bool:
    """Whether the deserializer's keys come from the data (ids), not from positions."""
    from recordkit.engine import composite
    return composite.keyed(d)


# -- walking a deserializer --------------------------------------------------------------------------

def _chunks(d) -> Iterator[ChunkData]:
    from recordkit.engine.deserializer import all_chunks
    yield from all_chunks(d, threads=2)


class _Cursor:
    """Sequences of a deserializer in order, handed out as runs within one loaded chunk."""

    def __init__(self, d):
        self.d = d
        self._it = _chunks(d)
        self.chunk = None
        self.i = 0
        self.seen = 0
        self._next()

    def _next(self) -> None:
        self.chunk, self.i = None, 0
        for chunk in self._it:
            if len(chunk):
                self.chunk = chunk
                return

    @property
    def left(self) -> int:
        return 0 if self.chunk is None else len(self.chunk) - self.i

    def advance(self, n: int) -> None:
        self.i += n
        self.seen += n
        if self.chunk is None or self.i >= len(self.chunk):
            self._next()

    def drain(self) -> int:
        n = 0
        while self.chunk is not None:
            n += self.left
            self.advance(self.left)
        return n


# -- comparing --------------------------------------------------------------------------------------

def _unequal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise "differs" after rounding ``a`` to ``b``'s type (NaN equals NaN)."""
    a = a.astype(b.dtype, copy=False)
    with np.errstate(invalid="ignore"):
        same = (a == b) | (np.isnan(a) & np.isnan(b))
    return ~same


def _fmt(x) -> str:
    return repr(float(x)) if np.asarray(x).dtype.kind == "f" else repr(int(x))


def _value_message(name, sample, column, a, b) -> str:
    rounded = ""
    if a.dtype != b.dtype:
        rounded = f" (SRC as {b.dtype}: {_fmt(a.astype(b.dtype))})"
    return f"stream '{name}', sample {sample}, column {column}: SRC {_fmt(a)}{rounded}, DST {_fmt(b)}"


def _bytes_message(name: str, va: bytes, vb: bytes) -> str:
    """Where two bytes values first differ (or that one is longer)."""
    k = next((i for i, (x, y) in enumerate(zip(va, vb)) if x != y), min(len(va), len(vb)))
    return f"stream '{name}': SRC holds {len(va)} bytes, DST {len(vb)}, first different at byte {k}"


def _compare_stream(name, ca, ia, cb, ib, n) -> dict:
    """{j: (kind, message, sample)} for the sequences ia+j / ib+j (j < n) whose stream ``name`` differs
    (the first difference of each)."""
    out: dict = {}
    oa, ob = ca.seq_offsets, cb.seq_offsets
    cnt_a = oa[ia + 1:ia + n + 1] - oa[ia:ia + n]
    cnt_b = ob[ib + 1:ib + n + 1] - ob[ib:ib + n]
    if not np.array_equal(cnt_a, cnt_b):
        for j in range(n):
            if cnt_a[j] != cnt_b[j]:
                out[j] = ("length", f"stream '{name}': SRC has {int(cnt_a[j])} samples, DST {int(cnt_b[j])}", None)
            else:
                got = _compare_stream(name, ca, ia + j, cb, ib + j, 1)
                if got:
                    out[j] = got[0]
        return out
    if ca.is_bytes:  # one value a sequence (the streams' formats were compared first)
        for j in range(n):
            va, vb = ca.values[ia + j], cb.values[ib + j]
            if va != vb:
                out[j] = ("value", _bytes_message(name, va, vb), 0)
        return out
    sa0, sa1, sb0 = int(oa[ia]), int(oa[ia + n]), int(ob[ib])
    starts = np.concatenate([[0], np.cumsum(cnt_a)])  # run-relative first sample of each sequence

    def seq_of(sample_in_run: int) -> int:
        return int(np.searchsorted(starts, sample_in_run, side="right")) - 1

    if not ca.is_sparse:
        va, vb = ca.values[sa0:sa1], cb.values[sb0:sb0 + (sa1 - sa0)]
        bad = _unequal(va, vb)
        for r in np.unique(np.nonzero(bad)[0]).tolist():
            j = seq_of(r)
            if j in out:
                continue
            k = int(np.nonzero(bad[r])[0][0])
            out[j] = ("value", _value_message(name, r - int(starts[j]), k, va[r, k], vb[r, k]), r - int(starts[j]))
        return out
    pa, pb = ca.indptr, cb.indptr
    nnz_a = np.diff(pa[sa0:sa1 + 1])
    nnz_b = np.diff(pb[sb0:sb0 + (sa1 - sa0) + 1])
    if not np.array_equal(nnz_a, nnz_b):
        for r in np.nonzero(nnz_a != nnz_b)[0].tolist():
            j = seq_of(r)
            if j not in out:
                out[j] = ("nnz", f"stream '{name}', sample {r - int(starts[j])}: SRC stores {int(nnz_a[r])} values, "
                                 f"DST {int(nnz_b[r])}", r - int(starts[j]))
        for j in range(n):
            if j not in out:
                got = _compare_stream(name, ca, ia + j, cb, ib + j, 1)
                if got:
                    out[j] = got[0]
        return out
    a0, a1, b0 = int(pa[sa0]), int(pa[sa1]), int(pb[sb0])
    ind_bad = ca.indices[a0:a1].astype(np.int64) != cb.indices[b0:b0 + (a1 - a0)].astype(np.int64)
    val_bad = _unequal(ca.values[a0:a1], cb.values[b0:b0 + (a1 - a0)])
    sample_starts = np.concatenate([[0], np.cumsum(nnz_a)])
    for e in np.nonzero(ind_bad | val_bad)[0].tolist():
        r = int(np.searchsorted(sample_starts, e, side="right")) - 1
        j = seq_of(r)
        if j in out:
            continue
        ia_, ib_ = int(ca.indices[a0 + e]), int(cb.indices[b0 + e])
        if ind_bad[e]:
            msg = f"stream '{name}', sample {r - int(starts[j])}: stored value {e - int(sample_starts[r])} has index " \
                  f"{ia_} in SRC, {ib_} in DST"
        else:
            msg = _value_message(name, r - int(starts[j]), ia_, ca.values[a0 + e], cb.values[b0 + e])
        out[j] = ("value", msg, r - int(starts[j]))
    return out


def _check_streams(src, dst, result: VerifyResult, max_differences: int) -> list[str]:
    """Names of the streams to compare; a stream on one side only, or declared differently, is a difference."""
    streams = list(src.streams)
    return [streams[i].name for i in _declared_alike(streams, "SRC", dst, result, max_differences)]


def _declared_alike(streams: list, side: str, dst, result: VerifyResult, max_differences: int) -> list[int]:
    """The indexes in ``streams`` (those of SRC or of a manifest: ``side`` names it in messages) of the
    streams ``dst`` declares alike; a stream on one side only, or declared differently, is a difference."""
    have = {s.name: s for s in dst.streams}
    alike = []
    for i, s in enumerate(streams):
        t = have.get(s.name)
        if t is None:
            result._add(Difference("stream", -1, f"stream '{s.name}' of {side} is not in DST (DST has: "
                                                 f"{', '.join(have) or 'none'})"), max_differences)
        elif (s.format, s.dim) != (t.format, t.dim):
            result._add(Difference("stream", -1, f"stream '{s.name}' is {s.format} dim {s.dim} in {side}, "
                                                 f"{t.format} dim {t.dim} in DST"), max_differences)
        else:
            alike.append(i)
    ours = {s.name for s in streams}
    for name in have:
        if name not in ours:
            result._add(Difference("stream", -1, f"stream '{name}' of DST is not in {side}"), max_differences)
    return alike


def verify(src, dst, *, max_differences: int = 10, compare_keys: bool | None = None) -> VerifyResult:
    """Compare every sequence of ``src`` and ``dst`` (Deserializers).

    ``compare_keys``: None matches sequences by key when both sides carry keys from the data
    (so a data set written in another order, e.g. OFRecord parts sharded round robin, still
    verifies; how many sequences moved is noted), else by position (noted in ``result.notes``)."""
    result = VerifyResult()
    names = _check_streams(src, dst, result, max_differences)
    both = keyed(src) and keyed(dst)
    result.keys_compared = both if compare_keys is None else bool(compare_keys)
    if not result.keys_compared:
        which = [n for n, d in (("SRC", src), ("DST", dst)) if not keyed(d)]
        why = f"{' and '.join(which)} {'store' if len(which) > 1 else 'stores'} no keys of its own" if which \
            else "as asked"
        result.notes.append(f"keys not compared ({why}): sequences are matched by position")
    narrowed: set = set()
    if result.keys_compared:
        index = _KeyIndex(dst)
        if index.duplicates:
            result.notes.append(f"DST has {index.duplicates} repeated key(s): sequences are matched by position")
        else:
            _verify_by_key(src, dst, index, names, result, max_differences, narrowed)
            _narrowing_notes(result, narrowed)
            return result
    a, b = _Cursor(src), _Cursor(dst)
    while a.chunk is not None and b.chunk is not None:
        n = min(a.left, b.left)
        found: dict = {}
        if result.keys_compared:
            ka, kb = a.chunk.keys[a.i:a.i + n], b.chunk.keys[b.i:b.i + n]
            for j in np.nonzero(ka != kb)[0].tolist():
                found[j] = ("key", f"key {int(ka[j])} in SRC, {int(kb[j])} in DST", None)
        for j, diff in _compare_columns(names, a.chunk, a.i, b.chunk, b.i, n, narrowed).items():
            found.setdefault(j, diff)
        for j in sorted(found):
            kind, message, sample = found[j]
            result._add(Difference(kind, a.seen + j, message, describe(src, a.chunk, a.i + j, sample),
                                   describe(dst, b.chunk, b.i + j, sample)), max_differences)
        result.sequences += n
        a.advance(n)
        b.advance(n)
    extra_a, extra_b = a.drain(), b.drain()
    result.src_sequences, result.dst_sequences = a.seen, b.seen
    if extra_a or extra_b:
        result._add(Difference("count", -1, f"SRC has {a.seen} sequences, DST {b.seen}: the first "
                                            f"{result.sequences} were compared"), max_differences)
    _narrowing_notes(result, narrowed)
    return result


def _compare_columns(names, ca, ia, cb, ib, n, narrowed) -> dict:
    found: dict = {}
    for name in names:
        x, y = ca.columns[name], cb.columns[name]
        if x.values.dtype.itemsize > y.values.dtype.itemsize:
            narrowed.add((name, str(x.values.dtype), str(y.values.dtype)))
        for j, diff in _compare_stream(name, x, ia, y, ib, n).items():
            found.setdefault(j, diff)
    return found


def _narrowing_notes(result, narrowed) -> None:
    for name, wide, narrow in sorted(narrowed):
        result.notes.append(f"stream '{name}': DST holds {narrow}, SRC {wide}: SRC was rounded to {narrow} "
                            f"(nearest, ties to even) before comparing")


class _KeyIndex:
    """Every key of a deserializer with its chunk and index in the chunk (keys sorted for lookup)."""

    def __init__(self, d):
        keys, chunk_of, index_in = [], [], []
        for info in d.chunks:
            k = chunk_sequence_keys(d, info.id)
            k = np.asarray(k).astype(np.uint64)
            keys.append(k)
            chunk_of.append(np.full(len(k), info.id, np.int64))
            index_in.append(np.arange(len(k), dtype=np.int64))
        self.keys = np.concatenate(keys) if keys else np.zeros(0, np.uint64)
        self.chunk_of = np.concatenate(chunk_of) if chunk_of else np.zeros(0, np.int64)
        self.index_in = np.concatenate(index_in) if index_in else np.zeros(0, np.int64)
        self.order = np.argsort(self.keys, kind="stable")
        self.sorted = self.keys[self.order]
        self.duplicates = int(np.count_nonzero(self.sorted[1:] == self.sorted[:-1])) if len(self.keys) else 0

    def find(self, keys: np.ndarray) -> np.ndarray:
        """Position (in storage order) of each key, -1 where absent."""
        at = np.searchsorted(self.sorted, keys)
        at = np.minimum(at, max(len(self.sorted) - 1, 0))
        hit = (self.sorted[at] == keys) if len(self.sorted) else np.zeros(len(keys), bool)
        return np.where(hit, self.order[at] if len(self.sorted) else -1, -1)


class _ChunkCache:
    """The last few chunks of a deserializer loaded (sequences moved by a re-sharding are usually near):
    at most ``size`` chunks and ``budget`` bytes of values (but always the last two)."""

    def __init__(self, d, size: int = 16, budget: int = 256 << 20):
        from collections import OrderedDict
        self.d, self.size, self.budget = d, size, budget
        self._chunks: OrderedDict = OrderedDict()

    @staticmethod
    def _bytes(chunk: ChunkData) -> int:
        return sum(c.values.nbytes + getattr(c, "indices", c.values).nbytes for c in chunk.columns.values())

    def get(self, chunk_id: int) -> ChunkData:
        chunk = self._chunks.pop(chunk_id, None)
        if chunk is None:
            chunk = self.d.load_chunk(chunk_id)
            if chunk.positions is not None:  # index by described position
                chunk = chunk.take(np.maximum(chunk.position_lookup(self.d.chunks[chunk_id].num_sequences), 0))
        self._chunks[chunk_id] = chunk
        while len(self._chunks) > 2 and (len(self._chunks) > self.size or
                                         sum(map(self._bytes, self._chunks.values())) > self.budget):
            self._chunks.popitem(last=False)
        return chunk


def _verify_by_key(src, dst, index: _KeyIndex, names, result, max_differences, narrowed) -> None:
    cache = _ChunkCache(dst)
    matched = np.zeros(len(index.keys), bool)
    moved = 0
    seen = 0
    for chunk in _chunks(src):
        n = len(chunk)
        if n == 0:
            continue
        keys = chunk.keys.astype(np.uint64)
        where = index.find(keys)
        moved += int(np.count_nonzero(where != np.arange(seen, seen + n)))
        found: dict = {}
        for j in np.nonzero(where < 0)[0].tolist():
            found[j] = Difference("key", seen + j, f"key {int(keys[j])} of SRC is not in DST", describe(src, chunk, j))
        hit = np.nonzero(where >= 0)[0]
        again = hit[matched[where[hit]]]
        for j in again.tolist():
            found[j] = Difference("key", seen + j, f"key {int(keys[j])} appears more than once in SRC",
                                  describe(src, chunk, j))
        hit = hit[~matched[where[hit]]]
        matched[where[hit]] = True
        for c in np.unique(index.chunk_of[where[hit]]).tolist():
            js = hit[index.chunk_of[where[hit]] == c]
            other = cache.get(c)
            mine = chunk.take(js)
            theirs = other.take(index.index_in[where[js]])
            for k, (kind, message, sample) in _compare_columns(names, mine, 0, theirs, 0, len(js), narrowed).items():
                j = int(js[k])
                found.setdefault(j, Difference(kind, seen + j, message, describe(src, chunk, j, sample),
                                               describe(dst, other, int(index.index_in[where[j]]), sample)))
        for j in sorted(found):
            result._add(found[j], max_differences)
        result.sequences += len(hit)
        seen += n
    result.src_sequences, result.dst_sequences = seen, len(index.keys)
    missing = np.nonzero(~matched)[0]
    for p in missing.tolist():
        c, i = int(index.chunk_of[p]), int(index.index_in[p])
        at = describe(dst, cache.get(c), i) if len(result.differences) < max_differences else None
        result._add(Difference("key", -1, f"key {int(index.keys[p])} of DST is not in SRC", None, at),
                    max_differences)
    if moved:
        result.notes.append(f"{moved} of {seen} sequences are at another position in DST than in SRC: matched by key")


# -- manifests --------------------------------------------------------------------------------------

def _digests(col, dtype: np.dtype, lo: int, n: int) -> list[bytes]:
    """BLAKE2b-128 of sequences lo..lo+n of a column, in the canonical little-endian byte form."""
    dt = np.dtype(dtype).newbyteorder("<")
    off = col.seq_offsets
    out = []
    if col.is_bytes:
        return [hashlib.blake2b(col.values[j], digest_size=DIGEST_SIZE).digest() for j in range(lo, lo + n)]
    if not col.is_sparse:
        vals = col.values
        for j in range(lo, lo + n):
            a, b = int(off[j]), int(off[j + 1])
            out.append(hashlib.blake2b(np.ascontiguousarray(vals[a:b], dtype=dt).data,
                                       digest_size=DIGEST_SIZE).digest())
        return out
    ptr = col.indptr
    for j in range(lo, lo + n):
        a, b = int(off[j]), int(off[j + 1])
        lo_nz, hi_nz = int(ptr[a]), int(ptr[b])
        h = hashlib.blake2b(digest_size=DIGEST_SIZE)
        h.update(np.ascontiguousarray(np.diff(ptr[a:b + 1]), dtype="<i8").data)
        h.update(np.ascontiguousarray(col.indices[lo_nz:hi_nz], dtype="<i8").data)
        h.update(np.ascontiguousarray(col.values[lo_nz:hi_nz], dtype=dt).data)
        out.append(h.digest())
    return out


class _Table:
    """keys, per-stream sample counts and digests of every sequence of a deserializer, chunk by chunk."""

    def __init__(self, d, streams: list[StreamSpec], dtypes: list[np.dtype]):
        self.d, self.streams, self.dtypes = d, streams, dtypes

    def chunks(self) -> Iterator[tuple]:
        """(chunk, keys, lengths (n, S), digests (n, S, 16)) per loaded chunk."""
        for chunk in _chunks(self.d):
            n = len(chunk)
            if n == 0:
                continue
            lengths = np.zeros((n, len(self.streams)), np.int64)
            digests = np.zeros((n, len(self.streams), DIGEST_SIZE), np.uint8)
            for s, (spec, dt) in enumerate(zip(self.streams, self.dtypes)):
                col = chunk.columns[spec.name]
                lengths[:, s] = np.diff(col.seq_offsets)
                digests[:, s] = np.frombuffer(b"".join(_digests(col, dt, 0, n)), np.uint8).reshape(n, DIGEST_SIZE)
            yield chunk, chunk.keys.astype(np.uint64), lengths, digests


def _dtype_of(spec: StreamSpec, precision) -> np.dtype:
    from recordkit.engine.streams import resolve_precision
    if precision is not None:
        return resolve_precision(precision)
    return np.dtype(spec.dtype) if spec.dtype is not None else np.dtype(np.float32)


def write_manifest(path, d, *, precision=None, source: str | None = None, storage_options=None) -> int:
    """Write the manifest of every sequence of ``d`` to ``path`` (atomically); returns the sequence count.

    ``precision`` ('float'/'double'): the values' type in the manifest (what the converted copy
    holds); default each stream's own type (float32 when unknown)."""
    from recordkit.storage.atomic import AtomicFile
    streams = list(d.streams)
    dtypes = [_dtype_of(s, precision) for s in streams]
    keys, lengths, digests = [], [], []
    for _, k, ln, dg in _Table(d, streams, dtypes).chunks():
        keys.append(k)
        lengths.append(ln)
        digests.append(dg)
    n = int(sum(len(k) for k in keys))
    meta = {"magic": MANIFEST_MAGIC, "version": MANIFEST_VERSION, "source": source or name_of(d, ""),
            "sequences": n, "keyed": keyed(d), "digest": f"blake2b-{DIGEST_SIZE * 8}",
            "streams": [dict(s.to_dict(), precision="double" if dt == np.float64 else "float")
                        for s, dt in zip(streams, dtypes)]}
    S = len(streams)
    with AtomicFile(path, storage_options=storage_options) as f:
        np.savez(f.file, meta=np.array(json.dumps(meta)),
                 keys=np.concatenate(keys) if keys else np.zeros(0, np.uint64),
                 lengths=np.concatenate(lengths) if lengths else np.zeros((0, S), np.int64),
                 digests=np.concatenate(digests) if digests else np.zeros((0, S, DIGEST_SIZE), np.uint8))
    return n


@dataclass
class Manifest:
    path: str
    meta: dict
    streams: list
    keys: np.ndarray
    lengths: np.ndarray
    digests: np.ndarray

    @property
    def precision(self) -> str:
        """'double' when any stream's values are float64, else 'float' (for reading a text copy)."""
        return "double" if any(s.get("precision") == "double" for s in self.meta["streams"]) else "float"


def load_manifest(path, *, storage_options=None) -> Manifest:
    """A manifest written by ``write_manifest``, checked for consistency (a FormatError naming it if not)."""
    from recordkit.storage.source import open_source
    import io
    src = open_source(os.fspath(path), storage_options=storage_options, verify=False)
    try:
        data = src.pread(0, src.size)
    finally:
        src.close()
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            keys, lengths, digests = z["keys"], z["lengths"], z["digests"]
    except Exception as e:
        raise FormatError(os.fspath(path), f"not a recordkit manifest ({type(e).__name__}: {e})") from None
    if not isinstance(meta, dict) or meta.get("magic") != MANIFEST_MAGIC or meta.get("version") != MANIFEST_VERSION:
        raise FormatError(os.fspath(path), "not a recordkit manifest (magic or version)")
    try:
        streams = streams_from_json(meta["streams"])
    except (KeyError, ValueError) as e:
        raise FormatError(os.fspath(path), f"manifest streams: {e}") from None
    n, S = int(meta.get("sequences", -1)), len(streams)
    if keys.shape != (n,) or lengths.shape != (n, S) or digests.shape != (n, S, DIGEST_SIZE):
        raise FormatError(os.fspath(path), f"manifest arrays do not match its {n} sequences x {S} streams")
    return Manifest(os.fspath(path), meta, streams, keys, lengths, digests)


def verify_manifest(manifest: Manifest, dst, *, max_differences: int = 10,
                    compare_keys: bool | None = None) -> VerifyResult:
    """Compare every sequence of ``dst`` with the manifest: keys, sample counts, digests of values."""
    result = VerifyResult()
    cols = _declared_alike(list(manifest.streams), "the manifest", dst, result, max_differences)
    names = [manifest.streams[i] for i in cols]
    dst_keyed = keyed(dst)
    both = bool(manifest.meta.get("keyed")) and dst_keyed
    result.keys_compared = both if compare_keys is None else bool(compare_keys)
    dtypes = [np.dtype(np.float64) if spec.dtype == np.float64 else np.dtype(np.float32) for spec in names]
    sel = np.asarray(cols, dtype=np.int64)
    n_total = len(manifest.keys)
    by_key = None
    why = "the manifest says its source stores no keys of its own"
    if result.keys_compared:
        order = np.argsort(manifest.keys, kind="stable")
        sorted_keys = manifest.keys[order]
        if len(sorted_keys) and (sorted_keys[1:] == sorted_keys[:-1]).any():
            why = "the manifest has repeated keys"
        else:
            by_key = (order, sorted_keys)
    # The manifest cannot turn the key check off: where it does not match by key (it says its source
    # stored none, or its keys repeat), the keys a keyed DST stores are still compared with the
    # manifest's, position by position (a source without keys of its own wrote its ordinals or line
    # numbers as the keys of a keyed output). Only the caller (compare_keys=False) skips them.
    by_position = by_key is None and (dst_keyed if compare_keys is None else bool(compare_keys))
    result.keys_compared = by_key is not None or by_position
    if by_position:
        result.notes.append(f"{why}: sequences are matched by position, their keys compared position by position")
    elif by_key is None:
        result.notes.append("keys not compared (DST stores no keys of its own): sequences are matched by position"
                            if compare_keys is None else "keys not compared: sequences are matched by position")
    matched = np.zeros(n_total, bool)
    moved = 0
    pos = 0
    for chunk, keys, lengths, digests in _Table(dst, names, dtypes).chunks():
        n = len(keys)
        if by_key is not None:
            order, sorted_keys = by_key
            at = np.minimum(np.searchsorted(sorted_keys, keys), max(n_total - 1, 0))
            hit = (sorted_keys[at] == keys) if n_total else np.zeros(n, bool)
            entry = np.where(hit, order[at] if n_total else -1, -1)
            moved += int(np.count_nonzero(entry != np.arange(pos, pos + n)))
        else:
            entry = np.arange(pos, pos + n)
            entry[entry >= n_total] = -1
        ok = entry >= 0
        twice = np.zeros(n, bool)
        twice[ok] = matched[entry[ok]]
        use = ok & ~twice
        e = np.where(use, entry, 0)
        if n_total:
            bad_len = (lengths != manifest.lengths[e][:, sel]) & use[:, None]
            bad_dig = (digests != manifest.digests[e][:, sel]).any(axis=2) & use[:, None]
            bad_key = (keys != manifest.keys[e]) & use if by_position else np.zeros(n, bool)
        else:
            bad_len = bad_dig = np.zeros((n, len(names)), bool)
            bad_key = np.zeros(n, bool)
        matched[entry[use]] = True
        for j in np.nonzero(~use | bad_key | bad_len.any(axis=1) | bad_dig.any(axis=1))[0].tolist():
            k = int(keys[j])
            if not ok[j]:
                kind, msg, where = ("key", f"key {k} of DST is not in the manifest" if by_key is not None
                                    else "DST has more sequences than the manifest", None)
            else:
                where = f"{manifest.path}: entry {int(entry[j])} (key {int(manifest.keys[entry[j]])})"
                if twice[j]:
                    kind, msg = "key", f"key {k} appears more than once in DST"
                elif bad_key[j]:
                    kind, msg = "key", f"key {k} in DST, {int(manifest.keys[entry[j]])} at this position in the manifest"
                elif bad_len[j].any():
                    s = int(np.nonzero(bad_len[j])[0][0])
                    kind, msg = "length", (f"stream '{names[s].name}': {int(manifest.lengths[entry[j], sel[s]])} "
                                           f"samples in the manifest, {int(lengths[j, s])} in DST")
                else:
                    s = int(np.nonzero(bad_dig[j])[0][0])
                    kind, msg = "digest", f"stream '{names[s].name}': the values differ from the manifest's digest"
            result._add(Difference(kind, pos + j, msg, where, describe(dst, chunk, j)), max_differences)
        result.sequences += int(use.sum())
        pos += n
    result.src_sequences, result.dst_sequences = n_total, pos
    missing = np.nonzero(~matched)[0]
    if len(missing):
        first = ", ".join(str(int(manifest.keys[p])) for p in missing[:5])
        result._add(Difference("count", -1, f"{len(missing)} sequence(s) of the manifest are not in DST (keys "
                                            f"{first}{', ...' if len(missing) > 5 else ''})"), max_differences)
    if moved:
        result.notes.append(f"{moved} of {pos} sequences are at another position in DST than in the manifest: "
                            f"matched by key")
    return result
