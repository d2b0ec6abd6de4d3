"""In-order minibatches inside one chunk are handed out as views of the chunk's columns (no copy),
where the chunk's arrays are its own (``ChunkData.lendable``: the OFRecord deserializer's).

They must be the minibatches the copying gather gives, byte for byte (file order and randomized,
several sizes, chunk boundaries inside minibatches, several sweeps, frames, sequences of equal
and of unequal lengths, sparse streams), and a caller who writes into a delivered minibatch must
never change what is delivered later (a later sweep, a restore), nor may anything delivered later
change what the caller holds."""
import dataclasses

import numpy as np
import pytest

import recordkit.engine.source as source_module
import recordkit.formats.ofrecord.deserializer as deserializer_module
from recordkit import StreamSpec
from recordkit.engine.source import MinibatchSource
from recordkit.formats.ofrecord import codec
from recordkit.formats.ofrecord.buffers import ColumnMemory
from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
from recordkit.formats.ofrecord.writer import OFRecordWriter

FRAMES = [StreamSpec("x", "dense", 3), StreamSpec("y", "dense", 1)]
SEQUENCES = [StreamSpec("s", "dense", 2), StreamSpec("v", "dense", 2), StreamSpec("p", "sparse", 10)]


def _write(d, records, parts=2):
    with OFRecordWriter(d, parts) as w:
        for r in records:
            w.write(codec.encode(r))
    return str(d)


@pytest.fixture(scope="module")
def frames(tmp_path_factory):
    """One-sample records (the compiled decoder's path), keyed: 23 records in 2 parts."""
    rng = np.random.default_rng(1)
    return _write(tmp_path_factory.mktemp("frames"), [
        {"x": rng.standard_normal(3).astype(np.float32), "y": np.array([i % 4], np.int64),
         "key": np.array([100 + i], np.int64)} for i in range(23)])


@pytest.fixture(scope="module")
def sequences(tmp_path_factory):
    """Records of several samples (the record-by-record path): ``s`` two samples each (equal
    lengths), ``v`` 1-3 samples, ``p`` sparse."""
    rng = np.random.default_rng(2)
    out = []
    for i in range(21):
        nv = int(rng.integers(1, 4))
        nnz = rng.integers(0, 3, size=2)
        out.append({"s": rng.standard_normal(4).astype(np.float32), "v": rng.standard_normal(2 * nv).astype(np.float32),
                    "p:indices": rng.integers(0, 10, size=int(nnz.sum())).astype(np.int64),
                    "p:values": rng.standard_normal(int(nnz.sum())).astype(np.float32),
                    "p:nnz": nnz.astype(np.int64)})
    return _write(tmp_path_factory.mktemp("sequences"), out)


@pytest.fixture(params=["allocated", "pooled"])
def columns(request, monkeypatch):
    """Chunk columns from the allocator, or all (however small) from a fresh ``ColumnMemory``,
    which reuses a column's memory once nothing refers to it."""
    if request.param == "pooled":
        pool = ColumnMemory()
        pool.MIN_BYTES = 0
        monkeypatch.setattr(deserializer_module, "COLUMNS", pool)
    return request.param


def _arrays(mb) -> list:
    """Every array of a minibatch, for comparing and scribbling."""
    out = [mb.keys, mb.lengths] + ([mb.sweeps] if mb.sweeps is not None else [])
    for name in sorted(mb.streams):
        sb = mb.streams[name]
        out += [sb.lengths] + ([sb.values, sb.indices, sb.indptr, sb.seq_offsets] if sb.is_sparse
                               else [sb.data, sb.mask])
    return out


def _snapshot(mb) -> tuple:
    return (mb.end_of_sweep, mb.sweep, [(a.dtype.str, a.shape, a.tobytes()) for a in _arrays(mb)])


def _read(path, streams, *, copy: bool, scribble: bool = False, keep: list | None = None, size=4,
          records_per_chunk=5, **kw):
    """Snapshots of every minibatch; ``copy`` forces the copying gather (the way before views);
    ``scribble`` writes into every array of each minibatch once it is snapshotted; ``keep``
    collects the minibatches themselves."""
    saved = source_module.lend_from_table
    if copy:
        source_module.lend_from_table = lambda *a, **k: None
    try:
        des = OFRecordDeserializer(path, streams, records_per_chunk=records_per_chunk)
        with MinibatchSource(des, **kw) as src:
            out = []
            while (mb := src.next_minibatch(size)) is not None:
                out.append(_snapshot(mb))
                if scribble:
                    for a in _arrays(mb):
                        a[...] = 1 if a.dtype == bool else 77
                if keep is not None:
                    keep.append(mb)
            return out
    finally:
        source_module.lend_from_table = saved


@pytest.mark.parametrize("data,streams", [("frames", FRAMES), ("sequences", SEQUENCES)])
@pytest.mark.parametrize("randomize", [False, True])
@pytest.mark.parametrize("size", [1, 3, 5, 7])
def test_lent_minibatches_are_the_copied_ones_byte_for_byte(request, data, streams, randomize, size):
    path = request.getfixturevalue(data)
    want = _read(path, streams, copy=True, randomize=randomize, size=size, max_sweeps=3)
    assert _read(path, streams, copy=False, randomize=randomize, size=size, max_sweeps=3) == want
    assert len(want) > 3


def test_an_in_order_minibatch_inside_a_chunk_is_not_copied(frames):
    """Consecutive minibatches of one chunk lie side by side in the chunk's column; a minibatch
    across a chunk boundary is copied; every array is writable (torch.from_numpy takes it as it is)."""
    des = OFRecordDeserializer(frames, FRAMES, records_per_chunk=5)
    with MinibatchSource(des, randomize=False, max_sweeps=1) as src:
        a, b, c = (src.next_minibatch(2) for _ in range(3))
    assert b["x"].data.__array_interface__["data"][0] == a["x"].data.__array_interface__["data"][0] + a["x"].data.nbytes
    assert a["x"].data.base is b["x"].data.base  # the chunk's column
    assert c["x"].data.base is not a["x"].data.base  # sequences 4 and 5: two chunks, copied
    assert all(arr.flags.writeable for mb in (a, b, c) for arr in _arrays(mb))


@pytest.mark.parametrize("data,streams", [("frames", FRAMES), ("sequences", SEQUENCES)])
@pytest.mark.parametrize("randomize", [False, True])
@pytest.mark.parametrize("size", [1, 4])
def test_writing_into_a_minibatch_changes_nothing_delivered_later(request, data, streams, randomize, size, columns):
    """Every minibatch is scribbled over once snapshotted: the later ones (the rest of the sweep,
    the next sweeps, which reuse chunks still held) are still the copying gather's."""
    path = request.getfixturevalue(data)
    want = _read(path, streams, copy=True, randomize=randomize, size=size, max_sweeps=3)
    assert _read(path, streams, copy=False, scribble=True, randomize=randomize, size=size, max_sweeps=3) == want


def test_writing_into_a_minibatch_of_a_one_chunk_data_set_changes_no_later_sweep(tmp_path):
    """One chunk, held from sweep to sweep: the next sweep takes it from a fresh load."""
    path = _write(tmp_path, [{"x": np.full(3, i, np.float32), "y": np.array([i], np.int64)} for i in range(10)], 1)
    want = _read(path, FRAMES, copy=True, randomize=False, size=3, max_sweeps=4, records_per_chunk=100)
    assert _read(path, FRAMES, copy=False, scribble=True, randomize=False, size=3, max_sweeps=4,
                 records_per_chunk=100) == want


def test_writing_into_a_minibatch_changes_nothing_read_again_after_a_restore(frames):
    des = OFRecordDeserializer(frames, FRAMES, records_per_chunk=5)
    with MinibatchSource(des, randomize=False, max_sweeps=2) as src:
        src.next_minibatch(2)
        state = src.get_checkpoint_state()
        first = [_snapshot(src.next_minibatch(2)) for _ in range(4)]
        for mb in [src.next_minibatch(2) for _ in range(2)]:
            mb["x"].data[...] = -1
        src.restore_from_checkpoint(state)
        again = []
        for _ in range(4):
            mb = src.next_minibatch(2)
            again.append(_snapshot(mb))
            mb["x"].data[...] = -2
        src.restore_from_checkpoint(state)
        assert [_snapshot(src.next_minibatch(2)) for _ in range(4)] == first == again


@pytest.mark.parametrize("data,streams", [("frames", FRAMES), ("sequences", SEQUENCES)])
def test_minibatches_a_caller_holds_never_change(request, data, streams, columns):
    """Later loads (the chunks' read buffers, new chunks, reused column memory) never write into
    memory a held minibatch views."""
    path = request.getfixturevalue(data)
    held: list = []
    got = _read(path, streams, copy=False, keep=held, randomize=False, size=3, max_sweeps=3)
    assert [_snapshot(mb) for mb in held] == got


class Counting(OFRecordDeserializer):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.loads: list = []

    def load_chunk(self, chunk_id, **kw):
        self.loads.append(chunk_id)
        return super().load_chunk(chunk_id, **kw)


def _loads(path, *, copy: bool, **kw) -> list:
    saved = source_module.lend_from_table
    if copy:
        source_module.lend_from_table = lambda *a, **k: None
    try:
        des = Counting(path, FRAMES, records_per_chunk=5)
        with MinibatchSource(des, max_sweeps=3, **kw) as src:
            list(src.minibatches(2))
        return sorted(des.loads)
    finally:
        source_module.lend_from_table = saved


@pytest.mark.parametrize("randomize", [False, True])
def test_lending_loads_no_chunk_more_often_than_copying(frames, randomize):
    """The chunks lent from are dropped as a sweep starts; the sweep's end had dropped them anyway
    (their last use is behind it), so a read of several chunks loads each one once a sweep, as before."""
    assert _loads(frames, copy=False, randomize=randomize) == _loads(frames, copy=True, randomize=randomize) \
        == sorted(list(range(6)) * 3)


class ReadOnlyColumns(OFRecordDeserializer):
    """Chunks marked lendable whose columns are read-only (as arrays over bytes would be)."""

    def load_chunk(self, chunk_id, **kw):
        data = super().load_chunk(chunk_id, **kw)
        for col in data.columns.values():
            col.values.flags.writeable = False
        return dataclasses.replace(data)


def test_read_only_columns_are_copied_not_lent(frames):
    """A view of a read-only column would be a read-only minibatch (torch.from_numpy warns)."""
    with MinibatchSource(ReadOnlyColumns(frames, FRAMES, records_per_chunk=5), randomize=False,
                         max_sweeps=1) as src:
        mbs = list(src.minibatches(2))
    assert all(arr.flags.writeable for mb in mbs for arr in _arrays(mb))
    assert [_snapshot(mb) for mb in mbs] == _read(frames, FRAMES, copy=True, randomize=False, size=2, max_sweeps=1)


def test_column_memory_is_reused_only_once_nothing_refers_to_it():
    pool = ColumnMemory()
    pool.MIN_BYTES = 0
    a = pool.empty((4, 3), np.float32)
    b = pool.empty((4, 3), np.float32)
    view = a[1:3].view(np.uint8)  # what a lent minibatch is
    addr_a, addr_b = a.ctypes.data, b.ctypes.data
    assert addr_a != addr_b
    del a
    c = pool.empty((4, 3), np.float32)  # a's memory is still viewed
    assert c.ctypes.data not in (addr_a, addr_b)
    del view
    d = pool.empty((2, 3), np.float64)  # a's memory, nothing refers to it any more
    assert d.ctypes.data == addr_a and d.shape == (2, 3) and d.dtype == np.float64 and d.flags.writeable
    assert pool.empty((4, 300), np.float32).ctypes.data not in (addr_a, addr_b, c.ctypes.data)  # too small


def test_column_memory_keeps_at_most_its_bound():
    pool = ColumnMemory()
    pool.MIN_BYTES, pool.KEEP_BYTES = 0, 100
    held = [pool.empty((40,), np.uint8) for _ in range(4)]
    assert sum(a.nbytes for a in pool._arrays) == 80  # the third and fourth are the allocator's
    del held[:2]
    new = pool.empty((60,), np.uint8)  # a free one is forgotten to make room
    assert sorted(a.nbytes for a in pool._arrays) == [40, 60] and any(a is new.base for a in pool._arrays)
