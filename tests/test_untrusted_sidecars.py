"""Sidecars and caches are untrusted input: an OFRecord ``.rkidx`` or a
CTF ``.rkindex`` whose (size, mtime) matches but whose content lies is ignored and rebuilt with a
warning naming it; readers then give exactly the records of the file, never fewer, never a
traceback or a huge allocation."""
import os
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from recordkit.engine.streams import StreamSpec
from recordkit.errors import RecordkitWarning
from recordkit.formats.ctf import CTFReader
from recordkit.formats.ctf import index as ctf_index
from recordkit.formats.ofrecord import dataset as ofr_dataset
from recordkit.formats.ofrecord.dataset import OFRecordDataset, sidecar_path
from recordkit.formats.ofrecord.reader import OFRecordReader
from recordkit.formats.ofrecord.writer import OFRecordWriter

HYPO = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# -- OFRecord ---------------------------------------------------------------------------------------
@pytest.fixture
def ofr(tmp_path):
    d = tmp_path / "set"
    with OFRecordWriter(d, 1) as w:
        for i in range(3):
            w.write({"x": np.full(i + 1, i, np.float32), "key": np.array([i], np.int64)})
    part = str(next(p for p in d.iterdir() if p.name.startswith("part-")))
    OFRecordDataset(d)  # writes the sidecar
    assert os.path.exists(sidecar_path(part))
    return d, part


def plant_index(part, offsets, lengths):
    """A sidecar with this part's current (size, mtime): only its content lies."""
    st = os.stat(part)
    np.savez(open(sidecar_path(part), "wb"), magic=np.array(ofr_dataset.INDEX_MAGIC),
             meta=np.array([st.st_size, st.st_mtime_ns], np.int64), offsets=np.asarray(offsets),
             lengths=np.asarray(lengths))


def read_every_way(d):
    """The records' x values by random access, by the reader, and by batches()."""
    with OFRecordDataset(d, index_sidecar=False) as ds:
        a = [ds[i]["x"].value.tolist() for i in range(len(ds))]
    r = OFRecordReader(d, batch_size=1, random_shuffle=False)
    b = [rec["x"].value.tolist() for batch in r.epoch() for rec in batch] if hasattr(r, "epoch") else None
    return a, b


TRUTH = [[0.0], [1.0, 1.0], [2.0, 2.0, 2.0]]


def true_index(part):
    idx = ofr_dataset.scan_part(part) if False else ofr_dataset.load_index(part, write=False)
    return idx.offsets.copy(), idx.lengths.copy()


@pytest.mark.parametrize("lie", ["negative", "huge", "two-of-three", "gap", "shifted-prefix", "floats", "empty"])
def test_a_lying_ofrecord_sidecar_is_ignored_and_rebuilt(ofr, lie):
    d, part = ofr
    off, ln = true_index(part)
    if lie == "negative":
        off = off - 1000
    elif lie == "huge":
        off, ln = np.array([8, 9]), np.array([1, 1 << 40])
    elif lie == "two-of-three":  # the frames of records 1 and 2 as one record
        off, ln = off[:2], np.array([ln[0], ln[1] + 8 + ln[2]])
    elif lie == "gap":
        off, ln = off[[0, 2]], ln[[0, 2]]
    elif lie == "shifted-prefix":  # tiles the part, but the frames are not where the prefixes are
        ln = np.array([ln[0] + 1, ln[1] - 1, ln[2]])
        off = np.array([8, 8 + ln[0] + 8, 8 + ln[0] + 8 + ln[1] + 8])
    elif lie == "floats":
        off, ln = off.astype(np.float64), ln.astype(np.float64)
    else:
        off, ln = np.zeros(0, np.int64), np.zeros(0, np.int64)
    plant_index(part, off, ln)
    with pytest.warns(RecordkitWarning, match=r"\.part-0+\.rkidx: index sidecar of .*part-0+ ignored and rebuilt"):
        ds = OFRecordDataset(d)
    assert [ds[i]["x"].value.tolist() for i in range(len(ds))] == TRUTH
    with warnings.catch_warnings():  # the rebuilt sidecar is trusted again
        warnings.simplefilter("error")
        assert len(OFRecordDataset(d)) == 3


def test_every_ofrecord_read_path_agrees_with_or_without_a_sidecar(ofr, tmp_path):
    """cat/validate (scan), OFRecordDataset, OFRecordReader and the deserializer give the same
    records, with a good sidecar, a lying one and none."""
    from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
    d, part = ofr
    off, ln = true_index(part)
    for state in ("good", "lying", "none"):
        if state == "lying":
            plant_index(part, off[:2], np.array([ln[0], ln[1] + 8 + ln[2]]))
        elif state == "none":
            os.unlink(sidecar_path(part))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RecordkitWarning)
            with OFRecordDataset(d) as ds:
                by_index = [ds[i]["x"].value.tolist() for i in range(len(ds))]
            reader = OFRecordReader(d, batch_size=3, random_shuffle=False, index_sidecar=True)
            by_reader = [rec["x"].value.tolist() for rec in reader.read_batch()] if hasattr(reader, "read_batch") \
                else [rec["x"].value.tolist() for rec in next(iter(reader))]
            deser = OFRecordDeserializer(d, [StreamSpec("x", "dense", 1)])
            by_deser = [c.columns["x"].values[:, 0].tolist() for c in (deser.load_chunk(i.id) for i in deser.chunks)]
        assert by_index == TRUTH, state
        assert by_reader == TRUTH, state
        assert sum(by_deser, []) == sum(TRUTH, []), state


@HYPO
@given(off=st.lists(st.integers(-2**62, 2**62), max_size=5), ln=st.lists(st.integers(-2**62, 2**62), max_size=5))
def test_random_ofrecord_sidecars_never_change_what_is_read(ofr, off, ln):
    d, part = ofr
    plant_index(part, np.array(off, np.int64), np.array(ln, np.int64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RecordkitWarning)
        with OFRecordDataset(d, index_sidecar=False) as ds:
            assert [ds[i]["x"].value.tolist() for i in range(len(ds))] == TRUTH


# -- CTF ------------------------------------------------------------------------------------------
STREAMS = [StreamSpec("a", "dense", 2)]


@pytest.fixture
def ctf(tmp_path):
    p = tmp_path / "a.ctf"
    p.write_text("|# a comment line first\n5 |a 1 2\n5 |a 3 4\n7 |a 5 6\n9 |a 7 8\n9 |a 9 10\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CTFReader(p, STREAMS, cache_index=True)
        assert CTFReader(p, STREAMS, cache_index=True).index_from_cache  # a legit preamble is trusted
    return p


def read_ctf(p):
    with CTFReader(p, STREAMS, cache_index=True) as r:
        return [(s.key, s["a"].tolist()) for s in r], r.index_from_cache


def plant_cache(p, **arrays):
    idx = ctf_index.load_cached(str(p), False)
    for k, v in arrays.items():
        setattr(idx, k, np.asarray(v, dtype=np.uint64))
    mtime = os.stat(p).st_mtime_ns
    ctf_index.write_cache(str(p), False, idx)
    os.utime(ctf_index.cache_path(str(p), False), ns=(mtime + 1, mtime + 1))
    return idx


@pytest.mark.parametrize("lie", ["gap", "duplicate-keys", "huge-rows", "shifted", "lines"])
def test_a_lying_ctf_cache_is_ignored_and_rebuilt(ctf, lie):
    truth, _ = read_ctf(ctf)
    idx = ctf_index.load_cached(str(ctf), False)
    o, s = idx.offsets.astype(np.int64), idx.sizes.astype(np.int64)
    if lie == "gap":  # drop sequence 7
        plant_cache(ctf, offsets=o[[0, 2]], sizes=s[[0, 2]], keys=idx.keys[[0, 2]],
                    first_lines=idx.first_lines[[0, 2]], rows=idx.rows[[0, 2]])
    elif lie == "duplicate-keys":
        plant_cache(ctf, keys=[7, 7, 7])
    elif lie == "huge-rows":
        plant_cache(ctf, rows=[2**32, 1, 2])
    elif lie == "shifted":
        plant_cache(ctf, offsets=o + [0, 3, 3], sizes=s + [3, 0, -3])
    else:
        plant_cache(ctf, first_lines=idx.first_lines + 3)
    with pytest.warns(RecordkitWarning, match=r"a\.ctf\.0\.rkindex: index cache of .*a\.ctf ignored and rebuilt"):
        got, from_cache = read_ctf(ctf)
    assert not from_cache and got == truth


@HYPO
@given(data=st.data())
def test_random_ctf_caches_never_change_what_is_read(ctf, data):
    truth, _ = read_ctf(ctf)
    n = data.draw(st.integers(1, 4))
    vals = st.lists(st.integers(0, 2**64 - 1), min_size=n, max_size=n)
    plant_cache(ctf, **{k: data.draw(vals) for k in ("offsets", "sizes", "keys", "first_lines", "rows")})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RecordkitWarning)
        got, _ = read_ctf(ctf)
    assert got == truth
