"""OFRecord numeric reading straight from the blocks read: each part read once (indexed while
read, the index kept for the next open), batches decoded in the blocks without the frame-by-frame
path, the next block read on a second thread, and the same batches as the frame-by-frame path."""
import os
import threading
import warnings

import numpy as np
import pytest

from recordkit import FormatError
from recordkit.formats.ofrecord import batch as of_batch
from recordkit.formats.ofrecord import dataset
from recordkit.formats.ofrecord.reader import OFRecordReader
from recordkit.formats.ofrecord.writer import OFRecordWriter
from recordkit.storage.source import LocalSource

SPEC = {"x": ((3,), np.float32), "y": ((1,), np.int64)}


def write_set(d, n=40, parts=2):
    with OFRecordWriter(d, parts) as w:
        for i in range(n):
            w.write({"x": np.full(3, i, np.float32), "y": np.array([i], np.int64)})
    return sorted(str(p) for p in d.iterdir() if p.name.startswith("part-"))


def frame_path_batches(d, **kw):
    """The reference: the frames of each batch decoded by the frame-by-frame decoder."""
    r = OFRecordReader(d, **kw)
    spec = of_batch.normalize_spec(SPEC)
    return [of_batch.decode_frames(frames, spec) for frames in r._batched(r.frames())]


@pytest.fixture
def spy_reads(monkeypatch):
    """Bytes read with pread, and the threads that read them."""
    seen = {"bytes": 0, "threads": set()}
    real, real_into = LocalSource.pread, LocalSource.pread_into

    def pread(self, offset, n, **kw):
        data = real(self, offset, n, **kw)
        seen["bytes"] += len(data)
        seen["threads"].add(threading.current_thread().name)
        return data

    def pread_into(self, offset, view):
        got = real_into(self, offset, view)
        seen["bytes"] += got
        seen["threads"].add(threading.current_thread().name)
        return got
    monkeypatch.setattr(LocalSource, "pread", pread)
    monkeypatch.setattr(LocalSource, "pread_into", pread_into)
    return seen


def test_batches_read_each_part_once_and_a_second_open_does_not_rescan(tmp_path, monkeypatch, spy_reads):
    parts = write_set(tmp_path / "set")
    size = sum(os.path.getsize(p) for p in parts)
    got = list(OFRecordReader(tmp_path / "set", batch_size=16, epochs=1).batches(SPEC))
    assert sum(len(b["y"]) for b in got) == 40
    assert spy_reads["bytes"] == size  # indexed while read: no separate scan pass
    monkeypatch.setattr(dataset, "scan_part", lambda *a: pytest.fail("a second open scanned a part again"))
    again = list(OFRecordReader(tmp_path / "set", batch_size=16, epochs=1).batches(SPEC))
    assert all(np.array_equal(a["x"], b["x"]) for a, b in zip(got, again))
    assert len(OFRecordReader(tmp_path / "set", batch_size=16, epochs=1)) == 3


def test_batches_without_a_problem_decode_in_the_blocks_not_frame_by_frame(tmp_path, monkeypatch):
    write_set(tmp_path / "set")
    want = frame_path_batches(tmp_path / "set", batch_size=16, epochs=1)
    monkeypatch.setattr(of_batch, "decode_frames", lambda *a, **k: pytest.fail("frame-by-frame decoding"))
    got = list(OFRecordReader(tmp_path / "set", batch_size=16, epochs=1).batches(SPEC))
    assert len(got) == len(want) == 3
    for a, b in zip(got, want):
        assert np.array_equal(a["x"], b["x"]) and np.array_equal(a["y"], b["y"]) and a["x"].dtype == np.float32


def test_the_next_block_is_read_on_a_second_thread(tmp_path, monkeypatch, spy_reads):
    write_set(tmp_path / "set")
    monkeypatch.setattr(OFRecordReader, "READ_BLOCK", 100)
    list(OFRecordReader(tmp_path / "set", batch_size=16, epochs=1).batches(SPEC))
    assert spy_reads["threads"] == {"recordkit-ofrecord-read"}


@pytest.mark.parametrize("block", [30, 100, 1 << 20])
@pytest.mark.parametrize("kw", [dict(batch_size=7, epochs=2), dict(batch_size=16, epochs=1, drop_last=True),
                                dict(batch_size=5, epochs=1, rank=1, world_size=3),
                                dict(batch_size=3, epochs=1, rank=0, world_size=2)])
def test_batches_across_blocks_parts_epochs_and_ranks_are_those_of_the_frame_path(tmp_path, monkeypatch, block, kw):
    write_set(tmp_path / "set", n=23)
    want = frame_path_batches(tmp_path / "set", **kw)
    monkeypatch.setattr(OFRecordReader, "READ_BLOCK", block)
    got = list(OFRecordReader(tmp_path / "set", **kw).batches(SPEC))
    assert [b["y"][:, 0].tolist() for b in got] == [b["y"][:, 0].tolist() for b in want]
    assert all(np.array_equal(a["x"], b["x"]) for a, b in zip(got, want))


def test_an_index_that_disagrees_with_the_length_prefixes_is_a_located_error(tmp_path):
    """Two neighbouring frames swapped under the same size and mtime: the frames still tile the
    part and the sampled prefixes agree, but a share read from the index finds the difference."""
    from recordkit.formats.ofrecord.writer import frame
    from recordkit.formats.ofrecord import codec
    d = tmp_path / "set"
    d.mkdir()
    payloads = [codec.encode({"x": np.full(1 + i % 2, i, np.float32), "y": np.array([i], np.int64)})
                for i in range(40)]
    part = d / "part-0"
    part.write_bytes(b"".join(frame(p) for p in payloads))
    dataset.load_index(str(part), write=True)  # the sidecar of the true frames
    n = len(payloads)
    sampled = set(np.linspace(0, n - 1, dataset._SAMPLED_PREFIXES).astype(int).tolist()) | {0, n - 1}
    k = next(i for i in range(1, n - 1) if i not in sampled and i + 1 not in sampled
             and len(payloads[i]) != len(payloads[i + 1]))
    st = os.stat(part)
    payloads[k], payloads[k + 1] = payloads[k + 1], payloads[k]
    part.write_bytes(b"".join(frame(p) for p in payloads))
    os.utime(part, ns=(st.st_atime_ns, st.st_mtime_ns))
    dataset._KEPT.clear()
    reader = OFRecordReader(d, batch_size=4, epochs=1, rank=0, world_size=2)  # a share by records: the index
    disagree = rf"part-0: the part.s index disagrees with its length prefixes.*record {k}\)"
    with pytest.raises(FormatError, match=disagree):
        list(reader.batches({"x": ((1,), np.float32), "y": ((1,), np.int64)}))


def test_a_part_changed_under_the_same_fingerprint_is_scanned_again_not_read_by_the_kept_index(tmp_path):
    d = tmp_path / "set"
    parts = write_set(d, n=6, parts=1)
    assert len(OFRecordReader(d, batch_size=2, epochs=1)) == 3  # indexed and kept
    st = os.stat(parts[0])
    with OFRecordWriter(tmp_path / "other", 1) as w:  # the same size, frames of other lengths
        for i, k in enumerate([2, 4, 3, 3, 3, 3]):
            w.write({"x": np.full(k, 100 + i, np.float32), "y": np.array([i], np.int64)})
    data = (tmp_path / "other" / os.path.basename(parts[0])).read_bytes()
    assert len(data) == st.st_size
    with open(parts[0], "wb") as f:
        f.write(data)
    os.utime(parts[0], ns=(st.st_atime_ns, st.st_mtime_ns))
    got = list(OFRecordReader(d, batch_size=2, epochs=1).batches({"x": {"shape": (3,), "truncate": True}}))
    assert np.concatenate([b["x"][:, 0] for b in got]).tolist() == [100, 101, 102, 103, 104, 105]


def test_compat_raw_decoders_read_the_blocks_not_frame_by_frame(tmp_path, monkeypatch):
    import recordkit.compat.oneflow as flow
    write_set(tmp_path / "set", n=10, parts=1)
    monkeypatch.setattr(of_batch, "decode_frames", lambda *a, **k: pytest.fail("frame-by-frame decoding"))
    reader = flow.nn.OFRecordReader(str(tmp_path / "set"), batch_size=4, data_part_num=1, part_name_suffix_length=5)
    x = flow.nn.OFRecordRawDecoder("x", (3,), flow.float32)
    y = flow.nn.OFRecordRawDecoder("y", (1,), flow.int64)
    seen = []
    for _ in range(4):  # endless: wraps into the next epoch
        rec = reader()
        assert np.array_equal(x(rec).numpy()[:, 0], y(rec).numpy()[:, 0].astype(np.float32))
        seen += y(rec).numpy()[:, 0].tolist()
    assert seen == list(range(10)) + list(range(6))
    assert [r["y"].value.tolist() for r in rec.records()] == [[2], [3], [4], [5]]


def test_the_deserializer_keeps_the_index_in_a_sidecar_and_reads_chunks_ahead(tmp_path):
    from recordkit.engine.streams import StreamSpec
    from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
    parts = write_set(tmp_path / "set", n=12, parts=2)
    des = OFRecordDeserializer(tmp_path / "set", [StreamSpec("x", "dense", 3)], records_per_chunk=4)
    assert all(os.path.exists(dataset.sidecar_path(p)) for p in parts)
    chunks = list(des.iter_chunks())
    assert [c.columns["x"].values[:, 0].tolist() for c in chunks] == [[0, 2, 4, 6], [8, 10], [1, 3, 5, 7], [9, 11]]


def test_a_framing_problem_is_charged_where_the_stream_reaches_it(tmp_path):
    parts = write_set(tmp_path / "set", n=10, parts=2)
    with open(parts[0], "ab") as f:
        f.write(b"\x05\x00")  # a cut length prefix after part 0's 5 records
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = list(OFRecordReader(tmp_path / "set", batch_size=4, epochs=1, max_errors=1).batches(SPEC))
    assert [b["y"][:, 0].tolist() for b in got] == [[0, 2, 4, 6], [8, 1, 3, 5], [7, 9]]
    assert len(caught) == 1 and "part-00000" in str(caught[0].message)
    with pytest.raises(FormatError, match="part-00000"):
        list(OFRecordReader(tmp_path / "set", batch_size=4, epochs=1).batches(SPEC))


def test_read_buffers_are_reused_only_when_nothing_refers_to_them(tmp_path, monkeypatch):
    """Batches of records kept undecoded (compat), and records kept, still hold their own bytes
    after many more blocks were read."""
    import recordkit.compat.oneflow as flow
    write_set(tmp_path / "set", n=40, parts=1)
    monkeypatch.setattr(OFRecordReader, "READ_BLOCK", 64)
    reader = flow.nn.OFRecordReader(str(tmp_path / "set"), batch_size=4, data_part_num=1, part_name_suffix_length=5)
    kept = [reader() for _ in range(10)]
    y = flow.nn.OFRecordRawDecoder("y", (1,), flow.int64)
    assert [v for rec in kept for v in y(rec).numpy()[:, 0].tolist()] == list(range(40))
    records = list(OFRecordReader(tmp_path / "set", batch_size=4, epochs=1).records())
    assert [r["x"].value.tolist() for r in records] == [[float(i)] * 3 for i in range(40)]


def test_a_read_abandoned_early_stops_its_reading_thread(tmp_path, monkeypatch):
    import time
    write_set(tmp_path / "set", n=40, parts=2)
    monkeypatch.setattr(OFRecordReader, "READ_BLOCK", 64)
    for batch in OFRecordReader(tmp_path / "set", batch_size=2, epochs=None).batches(SPEC):
        break  # an endless stream left after one batch
    deadline = time.monotonic() + 5
    while any(t.name == "recordkit-ofrecord-read" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(t.name == "recordkit-ofrecord-read" for t in threading.enumerate())
