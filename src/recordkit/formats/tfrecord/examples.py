"""``tf.train.Example`` records: streams inferred from their features, and read as one-sample sequences.

An Example is what ``tf.io.TFRecordWriter`` and the ``tfrecord`` package write most: one
``Features`` map per record, e.g. ``x`` (float_list of 4), ``label`` (int64_list of 1),
``image`` (bytes_list). On the wire it is a ``SequenceExample`` without ``feature_lists``
(both messages keep their map as field 1), so records are parsed as ``SequenceExample`` and
the features read from ``context``; a record that has feature lists is a SequenceExample.

Each record is one sequence of one sample. A data set without a stream description has its
streams inferred from its first ``INFER_RECORDS`` records: a float_list or int64_list feature of
the same length L > 0 in each is a dense stream of dim L, named after the feature; a bytes_list of
one value in each (an encoded image, a string as its writer encoded it) is a bytes stream. The
features ``key`` (the sequence key, as recordkit writes it) and ``__recordkit__`` are no streams.
What cannot be a stream is refused, naming the feature and the ``--stream`` list that selects
the others: a bytes_list of several values (a bytes stream is one value per record), a feature
with no values, a feature whose length varies. Every later record is checked against the inferred
streams: a missing or extra feature, another kind or length is a located ``FormatError``,
never a reinterpretation.

recordkit's streams are float32 or float64: int64 values are converted only where exact
(``formats/integers.py``); any other value is refused, naming the feature and record.
"""
from __future__ import annotations

import numpy as np

from recordkit.engine.chunk import BytesColumn, DenseColumn, SparseColumn, object_array
from recordkit.engine.streams import StreamSpec, stream_arguments
from recordkit.errors import FormatError
from recordkit.formats.integers import exact_floats, refusal
from recordkit.formats.sharding import offsets

INFER_RECORDS = 16
NUMERIC = ("float_list", "int64_list")


def first_messages(src, path, count: int = INFER_RECORDS):
    """The first ``count`` records of an open source, parsed as ``SequenceExample``:
    [(message, frame offset, index)]; only the first when it is a SequenceExample. Damage stops
    the list (the chunk's load locates it)."""
    from recordkit.formats.tfrecord import schema
    out, pos = [], 0
    while len(out) < count and pos + 12 <= src.size:
        n = int.from_bytes(src.pread(pos, 8), "little")
        if n > src.size - pos - 16:
            break
        msg = schema.SequenceExample()
        try:
            msg.ParseFromString(src.pread(pos + 12, n))
        except Exception:  # noqa: BLE001 - reported located when the chunk loads
            break
        out.append((msg, pos, len(out)))
        if not is_example(msg):
            break  # a SequenceExample: only its first record's description is looked at
        pos += 16 + n
    return out


def is_example(msg) -> bool:
    """An Example (features only) rather than a SequenceExample (feature lists)."""
    return not msg.HasField("feature_lists")


def infer(path, records, skip=()) -> tuple[list[StreamSpec], dict]:
    """(streams, {stream name: feature kind}) from the first records [(message, offset, index)]."""
    first, offset, _ = records[0]
    names = sorted(n for n in first.context.feature if n not in skip)
    streams, kinds, refused = [], {}, []
    for name in names:
        kind, length, why = None, None, None
        for msg, off, k in records:
            f = msg.context.feature.get(name) if name in msg.context.feature else None
            fk = f.WhichOneof("kind") if f is not None else None
            n = len(getattr(f, fk).value) if fk else 0
            if f is None:
                why = f"record {k} has no feature '{name}' (record 0 has)"
            elif fk == "bytes_list" and n != 1:
                why = (f"'{name}' is a bytes_list of {n} values in record {k}: a bytes stream holds one value per "
                       f"record")
            elif n == 0:
                why = f"'{name}' has no values in record {k}: its length cannot be inferred"
            elif kind is not None and fk != kind:
                why = f"'{name}' is a {kind} in record 0, a {fk} in record {k}"
            elif length is not None and n != length:
                why = f"'{name}' has {length} values in record 0, {n} in record {k} (a variable-length feature)"
            if why:
                break
            kind, length = fk, n
        if why:
            refused.append(why)
        else:
            streams.append(StreamSpec(name, "bytes", 1) if kind == "bytes_list" else StreamSpec(name, "dense", length))
            kinds[name] = kind
    if refused:
        hint = (f"select the others with {stream_arguments(streams)}" if streams else
                "declare the streams with --stream NAME=dense:DIM[:FEATURE]")
        raise FormatError(path, f"cannot infer streams from the tf.train.Example features: {'; '.join(refused)}; "
                                f"{hint}", offset=offset, record="record 0")
    if not streams:
        raise FormatError(path, "the first tf.train.Example has no features to read as streams", offset=offset,
                          record="record 0")
    return streams, kinds


class ExampleColumns:
    """The columns of a chunk of Example records (messages already parsed)."""

    def __init__(self, streams, fields: dict, kinds: dict | None, dtype, skip=(), key: str = "key"):
        self.streams, self.fields, self.kinds, self.dtype = streams, fields, kinds, np.dtype(dtype)
        self.skip, self.key = set(skip), key
        self.known = {f for s in streams for f in ([fields[s.name] + ".indices", fields[s.name] + ".values"]
                                                   if s.is_sparse else [fields[s.name]])}

    def columns(self, msgs, where) -> dict:
        for k, msg in enumerate(msgs):
            self._check_record(msg, where[k])
        return {s.name: (self._bytes(s, msgs, where) if s.is_bytes else self._sparse(s, msgs, where)
                         if s.is_sparse else self._dense(s, msgs, where)) for s in self.streams}

    def columns_fast(self, data, offs, lens):
        """(columns, keys or None) of a whole file, decoded by the compiled walker
        (``_kernel.example_features``): dense streams of canonical records only; anything else
        raises ``fastread.NotCanonical`` and ``columns`` (protobuf, located errors) takes over."""
        from recordkit.formats.tfrecord import _kernel
        from recordkit.formats.tfrecord.fastread import NotCanonical
        arr = np.frombuffer(data, dtype=np.uint8)
        n = len(offs)
        if any(s.is_sparse or s.is_bytes for s in self.streams) or n == 0:
            raise NotCanonical  # bytes values are Python objects a record each: the protobuf path makes them
        names = sorted(self.known | self.skip)
        got = _kernel.example_features(arr, np.ascontiguousarray(offs, dtype=np.int64),
                                       np.ascontiguousarray(lens, dtype=np.int64), [x.encode() for x in names])
        if got is None:
            raise NotCanonical
        tags, starts, lengths, all_known = got
        if self.kinds is not None and not all_known:
            raise NotCanonical  # a feature the first records did not have: located by the protobuf path
        column = {name: j for j, name in enumerate(names)}
        cols = {}
        for spec in self.streams:
            j = column[self.fields[spec.name]]
            kind, values, per = self._packed(arr, tags[:, j], starts[:, j].copy(), lengths[:, j].copy())
            expected = self.kinds.get(spec.name) if self.kinds is not None else None
            if np.any(per != spec.dim) or (expected is not None and kind != expected):
                raise NotCanonical
            if kind == "float_list":
                values = values.astype(self.dtype, copy=False)
            else:
                values, bad = exact_floats(values, self.dtype)
                if bad is not None:
                    raise NotCanonical
            cols[spec.name] = DenseColumn(values.reshape(n, spec.dim), offsets(np.ones(n, dtype=np.int64)))
        keys = None
        if self.key in self.skip and np.any(tags[:, column[self.key]]):
            j = column[self.key]
            kind, keys, per = self._packed(arr, tags[:, j], starts[:, j].copy(), lengths[:, j].copy())
            if kind != "int64_list" or np.any(per != 1):
                raise NotCanonical
            keys = keys.view(np.uint64)
        return cols, keys

    @staticmethod
    def _packed(arr, tags, starts, lengths):
        """(kind, values, values per record) of one feature that every record holds once, all of one
        kind and packed."""
        from recordkit.formats.tfrecord import _kernel, fastread
        if np.all(tags == 0x12):
            if np.any(lengths % 4):
                raise fastread.NotCanonical
            return "float_list", fastread.gather(arr, starts, lengths).view("<f4"), lengths // 4
        if np.all(tags == 0x1A):
            got = _kernel.packed_varints(arr, starts, lengths)
            if got is None:
                raise fastread.NotCanonical
            values, per = got
            return "int64_list", values.view(np.int64), per
        raise fastread.NotCanonical  # missing, empty, bytes or mixed kinds: the protobuf path decides

    def _check_record(self, msg, where) -> None:
        path, offset, k = where
        if not is_example(msg):
            raise FormatError(path, "record is a tf.train.SequenceExample (feature lists), the data set's first "
                                    "record a tf.train.Example", offset=offset, record=f"record {k}")
        if self.kinds is not None:  # inferred streams: every feature is one of them
            extra = sorted(set(msg.context.feature) - self.known - self.skip)
            if extra:
                raise FormatError(path, f"feature '{extra[0]}' is not in the first records (the streams inferred "
                                        f"from them: {', '.join(sorted(self.known))})", offset=offset,
                                  record=f"record {k}")

    def _values(self, msg, name, want, where, spec):
        path, offset, k = where
        feats = msg.context.feature
        if name not in feats:
            raise FormatError(path, f"no feature '{name}' (stream '{spec.name}')", offset=offset, record=f"record {k}")
        f = feats[name]
        kind = f.WhichOneof("kind")
        expected = self.kinds.get(spec.name) if self.kinds is not None and not spec.is_sparse else None
        if kind not in want or (expected is not None and kind != expected):
            raise FormatError(path, f"feature '{name}' is a {kind or 'empty Feature'}, expected "
                                    f"{expected or ' or '.join(want)} (stream '{spec.name}')", offset=offset,
                              record=f"record {k}")
        return kind, getattr(f, kind).value

    def _numbers(self, kind, values, name, where):
        if kind == "float_list":
            return np.asarray(values, dtype=np.float32).astype(self.dtype, copy=False)
        ints = np.asarray(values, dtype=np.int64)
        out, bad = exact_floats(ints, self.dtype)
        if bad is not None:
            path, offset, k = where
            raise FormatError(path, f"feature '{name}': int64 {refusal(int(ints[bad]), self.dtype)}", offset=offset,
                              record=f"record {k}")
        return out

    def _dense(self, spec, msgs, where) -> DenseColumn:
        """Values gathered per kind across the chunk and converted once (per record, NumPy's call
        overhead would cost more than the values)."""
        name = self.fields[spec.name]
        flat = np.empty((len(msgs), spec.dim), dtype=self.dtype)
        rows = {"float_list": ([], []), "int64_list": ([], [])}  # kind -> (records, values)
        for k, msg in enumerate(msgs):
            kind, v = self._values(msg, name, NUMERIC, where[k], spec)
            if len(v) != spec.dim:
                path, offset, kk = where[k]
                raise FormatError(path, f"feature '{name}': {len(v)} values, expected dim {spec.dim} (stream "
                                        f"'{spec.name}')", offset=offset, record=f"record {kk}")
            records, values = rows[kind]
            records.append(k)
            values.extend(v)
        for kind, (records, values) in rows.items():
            if not records:
                continue
            if kind == "float_list":
                flat[records] = np.asarray(values, dtype=np.float32).reshape(-1, spec.dim)
                continue
            ints = np.asarray(values, dtype=np.int64)
            out, bad = exact_floats(ints, self.dtype)
            if bad is not None:
                path, offset, k = where[records[bad // spec.dim]]
                raise FormatError(path, f"feature '{name}': int64 {refusal(int(ints[bad]), self.dtype)}",
                                  offset=offset, record=f"record {k}")
            flat[records] = out.reshape(-1, spec.dim)
        return DenseColumn(flat, offsets(np.ones(len(msgs), dtype=np.int64)))

    def _bytes(self, spec, msgs, where) -> BytesColumn:
        """A bytes_list of one value per record."""
        name = self.fields[spec.name]
        out = []
        for k, msg in enumerate(msgs):
            _, v = self._values(msg, name, ("bytes_list",), where[k], spec)
            if len(v) != 1:
                path, offset, kk = where[k]
                raise FormatError(path, f"feature '{name}': a bytes_list of {len(v)} values, a bytes stream holds one "
                                        f"per record (stream '{spec.name}')", offset=offset, record=f"record {kk}")
            out.append(v[0])
        return BytesColumn(object_array(out))

    def _sparse(self, spec, msgs, where) -> SparseColumn:
        field = self.fields[spec.name]
        ind, val, nnz = [], [], np.zeros(len(msgs), dtype=np.int64)
        for k, msg in enumerate(msgs):
            _, a = self._values(msg, field + ".indices", ("int64_list",), where[k], spec)
            kind, b = self._values(msg, field + ".values", NUMERIC, where[k], spec)
            a = np.asarray(a, dtype=np.int64)
            path, offset, kk = where[k]
            if len(a) != len(b):
                raise FormatError(path, f"'{field}.indices' has {len(a)} values, '{field}.values' {len(b)}",
                                  offset=offset, record=f"record {kk}")
            if len(a) and (a.min() < 0 or a.max() >= spec.dim):
                raise FormatError(path, f"'{field}.indices': index outside [0, {spec.dim})", offset=offset,
                                  record=f"record {kk}")
            ind.append(a)
            val.append(self._numbers(kind, b, field + ".values", where[k]))
            nnz[k] = len(a)
        indices = np.concatenate(ind).astype(np.int32) if ind else np.zeros(0, np.int32)
        values = np.concatenate(val).astype(self.dtype) if val else np.zeros(0, self.dtype)
        return SparseColumn(values, indices, offsets(nnz), offsets(np.ones(len(msgs), dtype=np.int64)), spec.dim)
