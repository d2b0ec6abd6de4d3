"""TFRecordReader: a directory of TFRecord files of ``tf.train.SequenceExample`` or
``tf.train.Example`` records as a Deserializer.

A file of up to ``chunk_size`` bytes (32 MB by default, CBF's chunk size) is one chunk; a larger
one, of Examples or SequenceExamples alike, is cut into runs of whole records of about
``chunk_size`` bytes, found by a walk over its record headers when the reader opens it (the CRCs
are checked when a run loads), so a big shard is loaded a run at a time, ahead on the engine's
loader threads, instead of whole. Streams come from ``__recordkit__.json`` beside the parts,
else from the ``__recordkit__`` context feature of the first record (``writer.py``); files of
Examples written by other tools have their streams inferred from their first records' features
(``examples.py``; every run is checked against them); SequenceExamples written by other tools
need ``streams`` (alias = the feature list name; sparse streams read ``ALIAS.indices`` and
``ALIAS.values``), which also select and rename an Example's features. The sequence key is the
context feature ``key`` (an Example's feature ``key``; int64_list of one value) where every
record of the chunk has one, else the record's position in the data set. An Example is a
sequence of one sample.

Both CRCs of every record are checked. A truncated file, a wrong CRC, a record that is not a
SequenceExample (or Example), a missing feature list or feature, a sample of the wrong length:
each is a ``FormatError`` with the file, the record's byte offset and its index.
"""
from __future__ import annotations

import json
import os
from typing import Sequence

import numpy as np

from recordkit.engine import DEFAULT_CHUNK_SIZE
from recordkit.engine.chunk import ChunkData, DenseColumn, SparseColumn
from recordkit.engine.deserializer import ChunkInfo, DeserializerBase
from recordkit.engine.streams import StreamSpec, resolve_precision, streams_from_json
from recordkit.errors import FormatError
from recordkit.formats import directories
from recordkit.formats.closing import ClosingReader
from recordkit.formats.sharding import (META_NAME, offsets, read_description, resolve_streams,
                                         sequence_lengths_of)
from recordkit.formats.tfrecord import examples, fastread, framing
from recordkit.formats.tfrecord.writer import EXAMPLE, FORMAT, KEY_FEATURE, KINDS, META_FEATURE, SEQUENCE
from recordkit.storage import location
from recordkit.storage.pool import SourcePool

SKIP = (KEY_FEATURE, META_FEATURE)  # features that are no streams


def looks_like(path, storage_options=None) -> bool:
    if location.isdir(path, storage_options):
        from recordkit.formats.bridge_probes import probe_tfrecord_parts
        return probe_tfrecord_parts(location.listdir(path, storage_options))
    return str(path).endswith((".tfrecord", ".tfrecords"))


def _is_part(name: str) -> bool:
    return name.endswith((".tfrecord", ".tfrecords"))


def part_paths(path, storage_options=None) -> list[str]:
    """A TFRecord file, or the numbered parts of a directory in part order (``formats/directories.py``)."""
    if not location.isdir(path, storage_options):
        return [path]
    return directories.part_paths(path, (".tfrecord", ".tfrecords"), storage_options)


def _schema():
    from recordkit.formats.tfrecord import schema
    return schema


class TFRecordReader(DeserializerBase, ClosingReader):
    keeps_aliases = True  # the data set records each stream's alias: CTF output keeps the input names
    def __init__(self, path: str | os.PathLike[str], streams: Sequence[StreamSpec] | None = None, *,
                 precision: str | None = None, verify_crc: bool = True, storage_options: dict | None = None,
                 cache_dir: str | None = None, chunk_size: int | None = DEFAULT_CHUNK_SIZE) -> None:
        self.path = path if isinstance(path, str) else os.fspath(path)
        self._storage = dict(storage_options=storage_options, cache_dir=cache_dir)
        self.verify_crc = bool(verify_crc)
        self.chunk_size = int(chunk_size) if chunk_size else DEFAULT_CHUNK_SIZE
        location.ensure_regular(self.path, storage_options)
        is_dir = location.isdir(self.path, storage_options)
        # one listing answers every "is it there", each file's metadata is read once per open
        self._files = SourcePool(self.path if is_dir else None, storage_options=storage_options, cache_dir=cache_dir)
        # a record is framed by 16 bytes: length, its CRC, the data's CRC
        doc = read_description(self.path, FORMAT, storage_options, is_shard=_is_part,
                               sequence_bytes=framing.FRAME_BYTES, files=self._files) if is_dir else None
        self.description = doc
        self.inferred = False  # streams inferred from tf.train.Example features (``examples.py``)
        kinds = None
        if doc is not None:
            self.paths = [location.join(self.path, s["name"]) for s in doc["shards"]]
            recorded = doc["streams"]
            counts = [(s["sequences"], s["samples"], s["size"]) for s in doc["shards"]]
            self.kind = doc.get("kind", SEQUENCE)
            if self.kind not in KINDS:
                raise FormatError(location.join(self.path, META_NAME), f"kind: expected one of {', '.join(KINDS)}, "
                                                                       f"found {self.kind!r}")
        else:
            self.paths = part_paths(self.path, storage_options)
            first = self._first_records()
            self.kind = EXAMPLE if first and examples.is_example(first[0][0]) else SEQUENCE
            recorded = self._streams_in_first_record(first[0][0]) if first else None
            counts = None
            if streams is None and recorded is None and self.kind == EXAMPLE:
                recorded, kinds = examples.infer(self.paths[0], first, skip=SKIP)
                self.inferred = True
        if streams is None and recorded is None:
            raise FormatError(self.paths[0], f"no stream description ({META_NAME} or a '{META_FEATURE}' context "
                                             f"feature; not written by recordkit?): declare the streams "
                                             f"(--stream NAME=FORMAT:DIM[:FEATURE_LIST])", offset=0,
                              record="record 0")
        streams, self._fields, self.keeps_alias = resolve_streams(self.path, recorded, streams)
        self.dtype = resolve_precision(precision) if precision is not None else np.dtype(np.float32)
        self._streams = [StreamSpec(s.name, s.format, s.dim, s.alias, s.defines_mb_size, dtype=self.dtype)
                         for s in streams]
        self._examples = examples.ExampleColumns(self._streams, self._fields, kinds, self.dtype, skip=SKIP,
                                                 key=KEY_FEATURE) \
            if self.kind == EXAMPLE else None
        held = [s.name for s in self._streams if s.is_bytes]
        if held and self._examples is None:
            raise FormatError(self.paths[0], f"stream '{held[0]}' is declared bytes, which recordkit reads from "
                                             f"tf.train.Example records (a bytes_list of one value each); this data "
                                             f"set holds SequenceExamples", record="record 0")
        scans = [None] * len(self.paths)  # the header walks done already: not read twice
        if counts is None:
            counts = []
            for i, p in enumerate(self.paths):
                data = self._files.read_whole(p)
                scans[i] = framing.scan(data, p, verify=False)
                counts.append((len(scans[i][0]), len(scans[i][0]), len(data)))
        # per chunk: (its file, byte range, the index of its first record in the file)
        self._chunks, self._first, self._ranges = [], [0], []
        self._whole = []  # per file: one chunk holds it all (read whole, checked as before)
        for i, (p, (nseq, nsamp, size)) in enumerate(zip(self.paths, counts)):
            runs = self._cut(p, size, nseq, scans[i])
            self._whole.append(len(runs) == 1)
            for first_rec, n, lo, hi in runs:
                samples = nsamp if n == nseq else int(round(nsamp * n / max(nseq, 1)))
                self._chunks.append(ChunkInfo(len(self._chunks), n, samples, lo, hi - lo))
                self._ranges.append((i, lo, hi, first_rec))
                self._first.append(self._first[-1] + n)

    def _cut(self, path, size: int, nseq: int, scanned=None) -> list:
        """The chunks of one file as (first record, records, byte start, byte end): the whole file
        when it is no larger than ``chunk_size``, else runs of whole records of about that size
        (from a walk over the record headers, ``scanned`` if done already; a file whose framing
        is broken stays one chunk, and its load reports where). A run's sample count is its share
        of the file's (exact for Examples, one sample each)."""
        if size <= self.chunk_size:
            return [(0, nseq, 0, size)]
        if scanned is None:
            try:
                scanned = framing.scan(self._files.read_whole(path), path, verify=False)
            except FormatError:
                return [(0, nseq, 0, size)]
        offs, lens = scanned
        if self.description is not None and len(offs) != nseq:
            raise FormatError(path, f"the file holds {len(offs)} records, {META_NAME} says {nseq} "
                                    f"(file replaced or truncated?)", offset=size)
        starts = offs.astype(np.int64) - 12  # each record's header
        ends = offs.astype(np.int64) + lens.astype(np.int64) + 4  # past its data CRC
        cuts = [0]
        while cuts[-1] < len(offs):
            a = cuts[-1]
            b = int(np.searchsorted(ends, starts[a] + self.chunk_size, side="right"))
            cuts.append(max(b, a + 1))
        out = []
        for a, b in zip(cuts[:-1], cuts[1:]):
            lo = int(starts[a])
            hi = int(ends[b - 1]) if b < len(offs) else size
            out.append((a, b - a, lo, hi))
        return out or [(0, nseq, 0, size)]

    def _first_records(self):
        """The first records of the first part, parsed (``examples.first_messages``)."""
        src = self._files.source(self.paths[0])
        try:
            return examples.first_messages(src, self.paths[0])
        finally:
            self._files.release(src)

    def _streams_in_first_record(self, msg):
        """The declarations in the first record's ``__recordkit__`` context feature, if any."""
        path = self.paths[0]
        f = msg.context.feature.get(META_FEATURE) if META_FEATURE in msg.context.feature else None
        if f is None or f.WhichOneof("kind") != "bytes_list" or len(f.bytes_list.value) != 1:
            return None
        try:
            return streams_from_json(json.loads(f.bytes_list.value[0])["streams"])
        except (ValueError, KeyError, TypeError) as e:
            raise FormatError(path, f"bad '{META_FEATURE}' context feature: {e}", offset=0, record="record 0") from None


    def sequence_location(self, chunk_id: int, index: int, sample: int | None = None) -> str:
        """Where sequence ``index`` of a chunk (one shard) is: the shard file and the place in it (what
        ``verify`` prints)."""
        sam = f", sample {sample}" if sample is not None else ""
        return f"{self.paths[chunk_id]}: record {index} of the file{sam}"

    def load_chunk(self, chunk_id: int, **_) -> ChunkData:
        shard, lo, hi, first_rec = self._ranges[chunk_id]
        path = self.paths[shard]
        whole = self._whole[shard]
        data = self._files.read_whole(path) if whole else self._read_range(path, lo, hi)
        first = self._first[chunk_id]
        try:
            offs, lens = framing.scan(data, path, verify=self.verify_crc, first_record=first_rec)
        except FormatError as e:
            if whole or e.offset is None:
                raise
            raise FormatError(path, e.message, offset=lo + e.offset, record=e.record) from None
        n = len(offs)
        expected = self._chunks[chunk_id].num_sequences
        if whole and self.description is not None and n != expected:
            raise FormatError(path, f"the file holds {n} records, {META_NAME} says {expected} "
                                    f"(file replaced or truncated?)", offset=len(data))
        if not whole and n != expected:
            raise FormatError(path, f"bytes {lo}..{hi} hold {n} records, {expected} were found there when "
                                    f"the data set was opened (file replaced?)", offset=lo + len(data))
        try:
            if self._examples is None:
                return self._load_fast(chunk_id, data, offs, lens, first)
            cols, keys = self._examples.columns_fast(data, offs, lens)
            keys = np.arange(first, first + n, dtype=np.uint64) if keys is None else keys
            return ChunkData(chunk_id, keys, np.ones(n, dtype=np.int64), cols)
        except fastread.NotCanonical:
            pass  # not the canonical layout, or damaged: protobuf decodes it (and locates problems)
        schema = _schema()
        buf = memoryview(data)
        msgs = []
        for k in range(n):
            msg = schema.SequenceExample()
            o = int(offs[k])
            try:
                msg.ParseFromString(buf[o:o + int(lens[k])])
            except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
                what = "Example" if self._examples is not None else "SequenceExample"
                raise FormatError(path, f"record is not a tf.train.{what}: {e}", offset=lo + o - 12,
                                  record=f"record {first_rec + k}") from None
            msgs.append(msg)
        where = [(path, lo + int(offs[k]) - 12, first_rec + k) for k in range(n)]
        if self._examples is not None:
            cols = self._examples.columns(msgs, where)
            lengths = np.ones(n, dtype=np.int64)
            return ChunkData(chunk_id, self._keys(msgs, first), lengths, cols)
        cols, counts = {}, {}
        for spec in self._streams:
            col = self._sparse(spec, msgs, where) if spec.is_sparse else self._dense(spec, msgs, where)
            cols[spec.name] = col
            counts[spec.name] = np.diff(col.seq_offsets)
        keys = self._keys(msgs, first)
        lengths = sequence_lengths_of(self._streams, counts) if n else np.zeros(0, np.int64)
        return ChunkData(chunk_id, keys, lengths, cols)

    def _read_range(self, path, lo: int, hi: int) -> bytes:
        """Bytes [lo, hi) of a file; a file that shrank meanwhile is a located error."""
        src = self._files.source(path)
        try:
            data = src.pread(lo, hi - lo)
        finally:
            self._files.release(src)
        if len(data) != hi - lo:
            raise FormatError(path, f"file shrank while being read: bytes {lo}..{hi} expected, got "
                                    f"{len(data)}", offset=lo + len(data))
        return data

    def _load_fast(self, chunk_id, data, offs, lens, first) -> ChunkData:
        """The canonical layout decoded by the compiled walker (``_kernel.sequence_examples``: every
        record's fields walked once); ``NotCanonical`` where it does not apply (the protobuf path
        decides and locates)."""
        from recordkit.formats.tfrecord import _kernel
        arr = np.frombuffer(data, dtype=np.uint8)
        names, tags = [], []
        for spec in self._streams:
            f = self._fields[spec.name]
            if spec.is_sparse:
                names += [f + ".indices", f + ".values"]
                tags += [0x1A, 0x12]
            else:
                names.append(f)
                tags.append(0x12)
        got = _kernel.sequence_examples(arr, np.ascontiguousarray(offs, dtype=np.int64),
                                        np.ascontiguousarray(lens, dtype=np.int64), [x.encode() for x in names],
                                        tags, KEY_FEATURE.encode())
        if got is None:
            raise fastread.NotCanonical
        keys, has_key, per_list, starts, lengths = got
        n = len(offs)
        cols, counts, j = {}, {}, 0
        for spec in self._streams:
            if spec.is_sparse:
                ci, pi, li = per_list[:, j], starts[j], lengths[j]
                cv, pv, lv = per_list[:, j + 1], starts[j + 1], lengths[j + 1]
                j += 2
                if not np.array_equal(ci, cv) or np.any(lv % 4):
                    raise fastread.NotCanonical
                values = fastread.gather(arr, pv, lv).view("<f4")
                decoded = _kernel.packed_varints(arr, pi, li)
                if decoded is None:
                    raise fastread.NotCanonical
                idx, per = decoded
                if not np.array_equal(per, lv // 4) or (len(idx) and int(idx.max()) >= spec.dim):
                    raise fastread.NotCanonical  # the protobuf path reports which record
                col = SparseColumn(values.astype(self.dtype, copy=False), idx.astype(np.int32), offsets(per),
                                   offsets(ci), spec.dim)
                counts[spec.name] = ci
            else:
                c, ps, pl = per_list[:, j], starts[j], lengths[j]
                j += 1
                if np.any(pl != 4 * spec.dim):
                    raise fastread.NotCanonical
                flat = fastread.gather(arr, ps, pl).view("<f4").astype(self.dtype, copy=False)
                col = DenseColumn(flat.reshape(-1, spec.dim), offsets(c))
                counts[spec.name] = c
            cols[spec.name] = col
        if n and has_key.all():
            key_arr = keys
        else:
            key_arr = np.arange(first, first + n, dtype=np.uint64)
        lengths = sequence_lengths_of(self._streams, counts) if n else np.zeros(0, np.int64)
        return ChunkData(chunk_id, key_arr, lengths, cols)

    @staticmethod
    def _keys(msgs, first):
        found = []
        for m in msgs:
            ctx = m.context.feature
            if KEY_FEATURE not in ctx:
                break
            f = ctx[KEY_FEATURE]
            if f.WhichOneof("kind") != "int64_list" or len(f.int64_list.value) != 1:
                break
            found.append(f.int64_list.value[0])
        if len(found) == len(msgs):
            return np.array(found, dtype=np.int64).view(np.uint64)
        return np.arange(first, first + len(msgs), dtype=np.uint64)

    @staticmethod
    def _list(msg, name, where, spec):
        fl = msg.feature_lists.feature_list
        if name not in fl:
            path, offset, k = where
            raise FormatError(path, f"no feature list '{name}' (stream '{spec.name}')", offset=offset,
                              record=f"record {k}")
        return fl[name].feature

    @staticmethod
    def _values(feature, want, where, name, j):
        kind = feature.WhichOneof("kind")
        if kind == want or (want == "float_list" and kind == "int64_list"):
            return getattr(feature, kind).value
        if kind is None:
            return ()
        path, offset, k = where
        raise FormatError(path, f"feature list '{name}', sample {j}: a {kind}, expected a {want}", offset=offset,
                          record=f"record {k}")

    def _dense(self, spec, msgs, where) -> DenseColumn:
        name = self._fields[spec.name]
        parts, counts = [], np.zeros(len(msgs), dtype=np.int64)
        for k, msg in enumerate(msgs):
            feats = self._list(msg, name, where[k], spec)
            for j, f in enumerate(feats):
                v = self._values(f, "float_list", where[k], name, j)
                if len(v) != spec.dim:
                    path, offset, kk = where[k]
                    raise FormatError(path, f"feature list '{name}', sample {j}: {len(v)} values, expected dim "
                                            f"{spec.dim}", offset=offset, record=f"record {kk}")
                parts.append(v)
            counts[k] = len(feats)
        flat = np.array(parts, dtype=self.dtype).reshape(-1, spec.dim) if parts else np.zeros((0, spec.dim), self.dtype)
        return DenseColumn(flat, offsets(counts))

    def _sparse(self, spec, msgs, where) -> SparseColumn:
        field = self._fields[spec.name]
        ni, nv = field + ".indices", field + ".values"
        ind, val, nnz = [], [], []
        counts = np.zeros(len(msgs), dtype=np.int64)
        for k, msg in enumerate(msgs):
            fi = self._list(msg, ni, where[k], spec)
            fv = self._list(msg, nv, where[k], spec)
            if len(fi) != len(fv):
                path, offset, kk = where[k]
                raise FormatError(path, f"'{ni}' has {len(fi)} samples, '{nv}' has {len(fv)}", offset=offset,
                                  record=f"record {kk}")
            for j in range(len(fi)):
                a = self._values(fi[j], "int64_list", where[k], ni, j)
                b = self._values(fv[j], "float_list", where[k], nv, j)
                if len(a) != len(b):
                    path, offset, kk = where[k]
                    raise FormatError(path, f"sample {j}: {len(a)} indices, {len(b)} values", offset=offset,
                                      record=f"record {kk}")
                ind.extend(a)
                val.extend(b)
                nnz.append(len(a))
            counts[k] = len(fi)
        indices = np.array(ind, dtype=np.int64)
        if len(indices) and (indices.min() < 0 or indices.max() >= spec.dim):
            bad = int(np.flatnonzero((indices < 0) | (indices >= spec.dim))[0])
            row = int(np.searchsorted(np.cumsum(nnz), bad, side="right"))
            seq = int(np.searchsorted(np.cumsum(counts), row, side="right"))
            path, offset, k = where[seq]
            raise FormatError(path, f"'{ni}': index {int(indices[bad])} outside [0, {spec.dim})", offset=offset,
                              record=f"record {k}")
        return SparseColumn(np.array(val, dtype=self.dtype), indices.astype(np.int32), offsets(np.array(nnz, np.int64)),
                            offsets(counts), spec.dim)


    def close(self) -> None:
        files = getattr(self, "_files", None)
        if files is not None:
            files.close()
