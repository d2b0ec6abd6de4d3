"""OFRecordDeserializer decodes one-sample dense records straight from the wire (the compiled batch
decoder, so that reading through MinibatchSource stays close to ``OFRecordReader.batches()``).
It must give exactly what the record-by-record path gives, and leave every other case to it."""
from __future__ import annotations

import numpy as np
import pytest

from recordkit import StreamSpec
from recordkit.errors import FormatError
from recordkit.formats.ofrecord import codec, deserializer
from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
from recordkit.formats.ofrecord.writer import OFRecordWriter

DENSE = [StreamSpec("x", "dense", 3), StreamSpec("y", "dense", 1)]


def write(d, records, parts=2):
    with OFRecordWriter(d, parts) as w:
        for r in records:
            w.write(codec.encode(r))
    return d


def chunks(d, streams=DENSE, slow=False, monkeypatch=None, **kw):
    if slow:
        monkeypatch.setattr(OFRecordDeserializer, "_load_dense_records", lambda self, *a: None)
    with OFRecordDeserializer(d, streams, records_per_chunk=7, **kw) as r:
        out = [r.load_chunk(c.id) for c in r.chunks]
    if slow:
        monkeypatch.undo()
    return out


def same(a, b):
    assert len(a) == len(b)
    for p, q in zip(a, b):
        assert p.keys.tolist() == q.keys.tolist() and p.lengths.tolist() == q.lengths.tolist()
        for name in p.columns:
            x, y = p.columns[name], q.columns[name]
            assert x.values.dtype == y.values.dtype and np.array_equal(x.values, y.values), name
            assert np.array_equal(x.seq_offsets, y.seq_offsets)


def rng_records(n, key=None, x_dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        r = {"x": (rng.standard_normal(3) * 100).astype(x_dtype), "y": np.array([i % 5], np.int64)}
        if key is not None:
            r["key"] = key(i)
        out.append(r)
    return out


@pytest.mark.parametrize("x_dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("keys", ["none", "int64", "int32", "some"])
def test_the_wire_path_equals_the_record_path(tmp_path, monkeypatch, x_dtype, keys):
    key = {"none": None, "int64": lambda i: np.array([1000 + 3 * i], np.int64),
           "int32": lambda i: np.array([i], np.int32), "some": None}[keys]
    recs = rng_records(40, key, x_dtype)
    if keys == "some":
        for i in range(0, 40, 3):
            recs[i]["key"] = np.array([i], np.int64)
    d = write(tmp_path / "d", recs)
    for precision in ("float", "double"):
        fast = chunks(d, precision=precision)
        slow = chunks(d, precision=precision, slow=True, monkeypatch=monkeypatch)
        same(fast, slow)
    if keys == "int64":
        assert fast[0].keys.tolist()[:3] == [1000, 1006, 1012]  # part 0 of a round-robin set: records 0, 2, 4


@pytest.mark.parametrize("keys", ["none", "all", "some", "all but a late one"])
def test_the_wire_path_read_in_small_pieces_equals_the_record_path(tmp_path, monkeypatch, keys):
    """A chunk is read and decoded a piece at a time (here one or two records a piece, so a chunk
    is many pieces): the same columns and keys; a record without a key in a later piece than the
    first makes the chunk's keys positions, as in a chunk decoded whole."""
    recs = rng_records(40, None if keys == "none" else lambda i: np.array([1000 + i], np.int64))
    if keys == "some":
        for i in range(1, 40, 3):
            del recs[i]["key"]
    if keys == "all but a late one":
        del recs[36]["key"]  # part 0, chunk 2 (records 28..38 of part 0 hold 28, 30, ..., 38)
    d = write(tmp_path / "d", recs)
    slow = chunks(d, slow=True, monkeypatch=monkeypatch)
    monkeypatch.setattr(deserializer, "DECODE_PIECE", 40)
    fast = chunks(d)
    same(fast, slow)
    assert fast[0].keys.tolist()[:2] == ([1000, 1002] if keys in ("all", "all but a late one") else [0, 1])
    assert fast[2].keys.tolist()[:2] == ([14, 15] if keys == "all but a late one" else fast[2].keys.tolist()[:2])


def test_multi_sample_and_sparse_records_take_the_record_path(tmp_path, monkeypatch):
    recs = rng_records(10)
    recs[4]["x"] = np.arange(6, dtype=np.float32)  # two samples
    d = write(tmp_path / "d", recs, parts=1)
    same(chunks(d), chunks(d, slow=True, monkeypatch=monkeypatch))
    assert chunks(d)[0].lengths.tolist()[4] == 2


@pytest.mark.parametrize("damage, message", [
    (lambda r: r.pop("y"), "feature 'y' is missing"),
    (lambda r: r.__setitem__("y", codec.Feature("bytes_list", [b"ab"])), "bytes_list"),
    (lambda r: r.__setitem__("x", np.arange(4, dtype=np.float32)), "not a multiple of dim"),
])
def test_bad_records_are_reported_by_the_record_path(tmp_path, damage, message):
    recs = rng_records(12)
    damage(recs[9])
    d = write(tmp_path / "d", recs, parts=1)
    with pytest.raises(FormatError, match=message):
        chunks(d)


def test_clean_one_sample_records_do_take_the_wire_path(tmp_path, monkeypatch):
    d = write(tmp_path / "d", rng_records(20, lambda i: np.array([i], np.int64)))
    taken = []
    original = OFRecordDeserializer._load_dense_records

    def spy(self, *a):
        out = original(self, *a)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(OFRecordDeserializer, "_load_dense_records", spy)
    chunks(d)
    assert taken and all(taken)
