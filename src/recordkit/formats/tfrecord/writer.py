"""TFRecordWriter: sequences in, a directory of ``part-NNNNN.tfrecord`` files out.

One ``tf.train.SequenceExample`` per sequence:

* context ``key``: int64_list with the sequence key (``recordkit cat``'s ``key``; keys above
  2^63 - 1 are stored as their two's complement, as protobuf's int64 holds them);
* dense stream NAME: feature list ``NAME``, one float_list of DIM values per sample;
* sparse stream NAME: feature lists ``NAME.indices`` (int64_list per sample) and ``NAME.values``
  (float_list per sample).

With ``tfrecord_kind="example"`` one ``tf.train.Example`` per sequence instead, for data sets
whose sequences are one sample each (classification data): dense stream NAME is the feature
``NAME`` (a float_list of DIM values), sparse stream NAME the features ``NAME.indices`` /
``NAME.values``, the key the int64 feature ``key``: what ``tf.io.parse_single_example`` and
most TensorFlow input pipelines expect. ``"auto"`` (the default) writes Examples when every
sequence of the first chunk is one sample in every stream, else SequenceExamples; a sequence
of another length after Examples were chosen is an ``UnrepresentableError`` naming it (never
a silently joined or dropped sample). The description records the kind.

TFRecord's float_list is float32: float64 data is narrowed, with a warning before writing.
The first record of every part also carries the context feature ``__recordkit__`` (a
bytes_list holding the stream declarations as JSON), so a part alone still reads back
without ``--stream``; ``__recordkit__.json`` beside the parts adds each part's counts.
TensorFlow's parsers ignore context features their spec does not name.

The feature-list bodies of a chunk are encoded at once (``wire.py``, the compiled ``Feature``
messages of ``_kernel.pyx``); a run of records is then framed, both CRC-32Cs included, in one
compiled call (``_kernel.frame_sequence_examples``). The directory is written aside and
published whole (``StagedDirectory``).
"""
from __future__ import annotations

import json
import warnings
from functools import lru_cache
from typing import TYPE_CHECKING, Sequence

import numpy as np


from recordkit.engine.chunk import ChunkData
from recordkit.engine.streams import check_streams, resolve_precision, streams_to_json
from recordkit.errors import RecordkitWarning, UnrepresentableError, UsageError
from recordkit.formats.sharding import (META_NAME, ShardSetWriter, declared_column, describe, join_described,
                                        read_whole)
from recordkit.formats.tfrecord import wire
from recordkit.formats.tfrecord.framing import FrameEncoder

if TYPE_CHECKING:
    import os

    from recordkit.engine.streams import StreamSpec

FORMAT = "tfrecord"
SEQUENCE, EXAMPLE = "sequence", "example"
KINDS = (SEQUENCE, EXAMPLE)
META_FEATURE = "__recordkit__"
KEY_FEATURE = "key"
DEFAULT_SHARD_SIZE = 256 << 20


def part_name(i: int) -> str:
    return f"part-{i:05d}.tfrecord"


def owns(name: str) -> bool:
    import re
    return name == META_NAME or re.fullmatch(r"part-\d{5,}\.tfrecord", name) is not None


varint = lru_cache(maxsize=1 << 16)(wire.varint_bytes)


@lru_cache(maxsize=256)
def _entry_head(name: bytes, body_len: int) -> bytes:
    return wire.entry(name, body_len)


@lru_cache(maxsize=16)
def _key_feature_prefix(n: int) -> bytes:
    """``Feature{int64_list{value: [k]}}`` up to the key's varint of ``n`` bytes."""
    return b"\x1a" + varint(2 + n) + b"\x0a" + varint(n)


@lru_cache(maxsize=16)
def _context_prefix(n: int) -> bytes:
    """``context: Features{feature: {"key": ...}}`` up to the key's varint of ``n`` bytes."""
    kf_len = len(_key_feature_prefix(n)) + n
    ctx_len = len(_entry_head(KEY_FEATURE.encode(), kf_len)) + kf_len
    return b"\x0a" + varint(ctx_len) + _entry_head(KEY_FEATURE.encode(), kf_len) + _key_feature_prefix(n)


def feature_list_names(spec) -> list[str]:
    return [spec.name + ".indices", spec.name + ".values"] if spec.is_sparse else [spec.name]


class TFRecordWriter(ShardSetWriter, format=FORMAT, what="TFRecord directory", shard_name=part_name, owns=owns,
                     default_size=DEFAULT_SHARD_SIZE):
    def __init__(self, path: str | os.PathLike[str], streams: Sequence[StreamSpec] | None = None, *,
                 parts: int | None = None, shard_size: int | None = None, total_sequences: int | None = None,
                 precision: str = "float", checksums: bool = False, storage_options: dict | None = None,
                 tfrecord_kind: str = "auto") -> None:
        if tfrecord_kind not in ("auto",) + KINDS:
            raise UsageError(f"tfrecord_kind must be auto, {' or '.join(KINDS)}, not {tfrecord_kind!r}")
        self.kind = None if tfrecord_kind == "auto" else tfrecord_kind  # auto: decided by the first chunk
        self._auto = tfrecord_kind == "auto"
        self._streams = check_streams(streams) if streams else []  # none: records via write_example
        self.source_dtype = resolve_precision(precision)
        if self.source_dtype == np.float64:
            warnings.warn(f"{path}: TFRecord's float_list holds float32: the float64 values are narrowed to "
                          f"float32 (values beyond float32's range become inf, others lose digits)",
                          RecordkitWarning, stacklevel=2)
        self.dtype = np.dtype(np.float32)
        super().__init__(path, parts=parts, shard_size=shard_size, total_sequences=total_sequences,
                         checksums=checksums, storage_options=storage_options)
        self._frames = FrameEncoder()
        self._meta_feature = self._meta()
        self._names = [[n.encode() for n in feature_list_names(s)] for s in self._streams]
        self._fresh = False  # the next record is the first of its part

    @property
    def streams(self):
        return list(self._streams)

    def _open_shard(self, name: str) -> None:
        super()._open_shard(name)
        self._fresh = True

    def _bodies(self, chunk):
        """Per feature list, in record order: (name, bytes, per-sequence offsets)."""
        out = []
        for spec, names in zip(self._streams, self._names):
            col = declared_column(chunk, spec)
            if spec.is_bytes:
                raise UnrepresentableError(f"bytes stream '{spec.name}': recordkit writes bytes in tf.train.Example "
                                           f"records (a bytes_list of one value each), and this data's sequences "
                                           f"have several samples (tf.train.SequenceExample records)")
            if spec.is_sparse:
                (ib, io), (vb, vo) = wire.sparse_feature_lists(col.indices, col.values.astype(np.float32, copy=False),
                                                               col.indptr, col.seq_offsets)
                out.append((names[0], ib, io))
                out.append((names[1], vb, vo))
            else:
                body, off = wire.dense_feature_list(col.values.astype(np.float32, copy=False), col.seq_offsets)
                out.append((names[0], body, off))
        return out

    def _meta(self) -> bytes:
        doc = {"format": FORMAT, "streams": streams_to_json(self._streams, "float")}
        if self.kind == EXAMPLE:
            doc["kind"] = EXAMPLE
        return json.dumps(doc, separators=(",", ":")).encode()

    def _choose_kind(self, chunk: ChunkData) -> None:
        """``auto``: Examples when every sequence of the first chunk is one sample in every stream."""
        single = all(np.all(chunk.columns[s.name].sample_counts() == 1) for s in self._streams
                     if s.name in chunk.columns)
        self.kind = EXAMPLE if single and self._streams else SEQUENCE
        self._meta_feature = self._meta()

    def _check_one_sample(self, chunk: ChunkData) -> None:
        for spec in self._streams:
            counts = declared_column(chunk, spec).sample_counts()
            bad = np.flatnonzero(counts != 1)
            if len(bad):
                i = int(bad[0])
                why = ("the first chunk's sequences were all one sample, so the data set holds tf.train.Example "
                       "records" if self._auto else "--tfrecord-kind example")
                raise UnrepresentableError(f"stream '{spec.name}', sequence {int(chunk.keys[i])}: {int(counts[i])} "
                                           f"samples, a tf.train.Example holds one ({why}): convert with "
                                           f"--tfrecord-kind sequence")

    def write_chunk(self, chunk: ChunkData) -> None:
        n = len(chunk)
        if n == 0:
            return
        if self.kind is None:
            self._choose_kind(chunk)
        if self.kind == EXAMPLE:
            return self._write_examples(chunk)
        bodies = self._bodies(chunk)
        approx = np.full(n, 40, dtype=np.int64)
        for _, _, off in bodies:
            approx += np.diff(off) + 16
        keys = chunk.keys.astype(np.uint64).tolist()
        lengths = chunk.lengths
        for shard, a, b in self._cutter.assign(approx):
            self._switch(shard)
            self._write_run(bodies, keys, a, b)
            self._counted(b - a, lengths[a:b].sum())
        self.sequences_written += n

    def _write_run(self, bodies, keys, a: int, b: int) -> None:
        if self._fresh:  # the part's first record carries the description: built one by one
            self._write_run_records(bodies, keys, a, a + 1)
            a += 1
        if b > a:
            self._file.write(memoryview(self._assemble(bodies, keys, a, b)))

    def _assemble(self, bodies, keys, a: int, b: int) -> np.ndarray:
        """Framed records a..b-1, built and CRC'd by the compiled framing in one call
        (``_kernel.frame_sequence_examples``; per record in Python, the two CRC calls alone
        cost more than the rest of the conversion on small sequences)."""
        from recordkit.formats.tfrecord import _kernel
        return _kernel.frame_sequence_examples(
            np.array(keys[a:b], dtype=np.uint64), [name for name, _, _ in bodies],
            [np.ascontiguousarray(body, dtype=np.uint8).reshape(-1) for _, body, _ in bodies],
            [np.ascontiguousarray(off[a:b + 1], dtype=np.int64) for _, _, off in bodies])

    def _write_run_records(self, bodies, keys, a: int, b: int) -> None:
        views = [(name, memoryview(body), off.tolist()) for name, body, off in bodies]
        frame = self._frames.frame
        # the key varints of the run at once; per record only slices and cached prefixes
        kmat, klen = wire.varint_matrix(np.array(keys[a:b], dtype=np.uint64), width=10)
        kflat = wire.compact(kmat, klen).tobytes()
        kcum = [0] + np.cumsum(klen).tolist()
        out = []
        for i in range(a, b):
            kv = kflat[kcum[i - a]:kcum[i - a + 1]]
            if self._fresh:
                ctx = self._context(kv, with_meta=True)
                self._fresh = False
                prefix = b"\x0a" + varint(len(ctx)) + ctx
            else:
                prefix = _context_prefix(len(kv)) + kv
            parts = [prefix, b"\x12", None]
            fl_len = 0
            for name, body, off in views:
                s0, s1 = off[i], off[i + 1]
                head = _entry_head(name, s1 - s0)
                parts.append(head)
                parts.append(body[s0:s1])
                fl_len += len(head) + s1 - s0
            parts[2] = varint(fl_len)
            out.append(frame(b"".join(parts)))
        self._file.write(b"".join(out))

    def _context(self, kv: bytes, with_meta: bool) -> bytes:
        kf = _key_feature_prefix(len(kv)) + kv
        ctx = _entry_head(KEY_FEATURE.encode(), len(kf)) + kf
        if with_meta:
            mf = wire.bytes_feature(self._meta_feature)
            ctx += wire.entry(META_FEATURE.encode(), len(mf)) + mf
        return ctx

    def _write_examples(self, chunk: ChunkData) -> None:
        """One ``tf.train.Example`` per (one-sample) sequence, encoded column by column: per record only
        the key's varint and a join of the streams' ready-made Feature entries."""
        self._check_one_sample(chunk)
        n = len(chunk)
        entries = []  # per stream field: (entry head + Feature bytes) of every record
        for name, kind, rows in self._example_features(chunk):
            entries.append([_entry_head(name, len(f)) + f for f in rows])
        keys = chunk.keys.astype(np.uint64).tolist()
        records = []
        for i in range(n):
            kv = varint(keys[i])
            kf = _key_feature_prefix(len(kv)) + kv
            body = [_entry_head(KEY_FEATURE.encode(), len(kf)), kf]
            body += [e[i] for e in entries]
            records.append(b"".join(body))
        sizes = np.array([len(r) + 24 for r in records], dtype=np.int64)
        lengths = np.ones(n, dtype=np.int64)
        for shard, a, b in self._cutter.assign(sizes):
            self._switch(shard)
            out = []
            for i in range(a, b):
                body = records[i]
                if self._fresh:
                    mf = wire.bytes_feature(self._meta_feature)
                    body += wire.entry(META_FEATURE.encode(), len(mf)) + mf
                    self._fresh = False
                out.append(self._frames.frame(b"\x0a" + varint(len(body)) + body))
            self._file.write(b"".join(out))
            self._counted(b - a, lengths[a:b].sum())
        self.sequences_written += n

    def _example_features(self, chunk: ChunkData):
        """(feature name, kind, [Feature bytes per record]) of every stream's one-sample sequences."""
        for spec, names in zip(self._streams, self._names):
            col = chunk.columns[spec.name]
            if spec.is_bytes:
                yield names[0], "bytes_list", [wire.bytes_feature(v) for v in col.values.tolist()]
            elif spec.is_sparse:
                ptr = np.asarray(col.indptr, dtype=np.int64)[np.asarray(col.seq_offsets, dtype=np.int64)]
                idx = np.asarray(col.indices, dtype=np.int64)
                if len(idx) and idx.min() < 0:
                    raise ValueError(f"stream '{spec.name}': negative sparse index")
                vals = np.ascontiguousarray(col.values, dtype="<f4").tobytes()
                ind_rows, val_rows = [], []
                for a, b in zip(ptr[:-1].tolist(), ptr[1:].tolist()):
                    iv = b"".join(varint(int(x)) for x in idx[a:b].tolist())
                    inner = b"\x0a" + varint(len(iv)) + iv if b > a else b""
                    ind_rows.append(b"\x1a" + varint(len(inner)) + inner)
                    fv = vals[4 * a:4 * b]
                    inner = b"\x0a" + varint(len(fv)) + fv if b > a else b""
                    val_rows.append(b"\x12" + varint(len(inner)) + inner)
                yield names[0], "int64_list", ind_rows
                yield names[1], "float_list", val_rows
            else:
                payload = 4 * spec.dim
                inner = 1 + len(varint(payload)) + payload
                head = b"\x12" + varint(inner) + b"\x0a" + varint(payload)
                data = np.ascontiguousarray(col.values, dtype="<f4").tobytes()
                yield names[0], "float_list", [head + data[k:k + payload]
                                               for k in range(0, len(data), payload)]

    def write_example(self, features: dict, *, samples: int = 1) -> None:
        """One ``tf.train.Example`` record: ``{name: (kind, values)}`` with kind ``bytes_list``,
        ``float_list`` or ``int64_list`` (records converted feature by feature)."""
        from recordkit.formats.tfrecord import schema
        ex = schema.Example()
        for name, (kind, values) in features.items():
            getattr(ex.features.feature[name], kind).value.extend(
                values if kind == "bytes_list" else np.asarray(values).tolist())
        data = ex.SerializeToString(deterministic=True)
        for shard, _, _ in self._cutter.assign(np.array([len(data) + 16])):
            self._switch(shard)
        self._fresh = False
        self.kind = EXAMPLE
        self._file.write(self._frames.frame(data))
        self._counted(1, samples)
        self.sequences_written += 1

    def _describe(self) -> None:
        if self._streams:  # records converted feature by feature declare no streams: readers infer them
            self._dir.write_file(META_NAME, describe(FORMAT, self._streams, "float", self._counts,
                                                     kind=self.kind or SEQUENCE))


def join_sets(sources: list[str], output: str, *, storage_options=None, checksums: bool = False) -> list[str]:
    """Data sets written by this writer (same streams), joined in order into one at ``output``:
    parts renumbered (each keeps its first record's description), descriptions merged, the whole
    published at once (``--engine ray``'s write tasks each write one). Returns the part names."""
    kinds = {_recorded_kind(s, storage_options) for s in sources} - {None}
    if len(kinds) > 1:  # each write task chose by its own first chunk (--tfrecord-kind auto)
        raise UsageError(f"{', '.join(map(str, sources))}: some hold tf.train.Example records, others "
                         f"SequenceExamples: only sets of one kind join (convert with --tfrecord-kind)")
    return join_described(FORMAT, part_name, owns, "TFRecord directory", sources, output,
                          storage_options=storage_options, checksums=checksums)


def _recorded_kind(directory, storage_options=None) -> str | None:
    """The record kind a data set's description records (None when it has no readable one: the
    join reports that)."""
    from recordkit.storage import location
    try:
        doc = json.loads(read_whole(location.join(directory, META_NAME), storage_options))
    except (OSError, ValueError):
        return None
    return doc.get("kind", SEQUENCE) if isinstance(doc, dict) else None
