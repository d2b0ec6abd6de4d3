"""Runs of small CBF chunks: adjacent chunks are read with one read and decoded by one kernel call,
and nothing a reader of minibatches sees changes (order, values, partitions, checkpoints), nor
which chunk an error names."""
import struct
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from helpers import dense, sparse
from recordkit import FormatError
from recordkit.engine import memory as plan
from recordkit.engine.chunk_partition import ChunkPartition
from recordkit.engine.source import MinibatchSource
from recordkit.formats.cbf import CBFReader, CBFWriter, _kernel

STREAMS = [dense("x", 3), sparse("y", 40)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """About 60 chunks of a few hundred bytes, dense and sparse streams, sequences of 0-4 samples."""
    rng = np.random.default_rng(7)
    path = tmp_path_factory.mktemp("runs") / "t.cbf"
    with CBFWriter(path, STREAMS, chunk_size=300) as w:
        for k in range(300):
            nx, ny = int(rng.integers(1, 5)), int(rng.integers(0, 4))
            w.write({"x": np.full((nx, 3), k, dtype=np.float32),
                     "y": sp.random(ny, 40, density=0.2, random_state=k, dtype=np.float32, format="csr")})
    return str(path)


class OneAtATime(CBFReader):
    """The reader as it loads without runs: a chunk per ``load_chunk`` call, a length table per
    ``sequence_lengths`` call."""
    load_chunks = None
    load_joined = None
    all_sequence_lengths = None
    run_bytes = 0


class NotJoined(CBFReader):
    """The reader as it loads runs of chunks without holding them as one unit: a ChunkData per chunk."""
    load_joined = None


class CountingReads(CBFReader):
    """Notes every read of the file and every kernel call."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.reads = 0
        self.decodes = 0
        source = self._source
        read_into, read = source.pread_into, source.pread

        def pread_into(*a, **kw):
            self.reads += 1
            return read_into(*a, **kw)

        def pread(*a, **kw):
            self.reads += 1
            return read(*a, **kw)
        source.pread_into, source.pread = pread_into, pread

    def _decode_run(self, run, **kw):
        self.decodes += 1
        return super()._decode_run(run, **kw)


def minibatches(reader, sizes=(37, 5, 120), limit=None, **kw):
    """Every minibatch as plain values: keys, lengths, sweeps, x's padded data, y's CSR arrays."""
    src = MinibatchSource(reader, max_sweeps=2, **{"max_memory": None, **kw})
    out = []
    k = 0
    while (limit is None or k < limit) and (mb := src.next_minibatch(sizes[k % len(sizes)])) is not None:
        y = mb["y"]
        out.append((mb.keys.tolist(), mb.lengths.tolist(), None if mb.sweeps is None else mb.sweeps.tolist(),
                    mb["x"].data.tolist(), y.values.tolist(), y.indices.tolist(), y.indptr.tolist()))
        k += 1
    return src, out


def assert_same_columns(got, want):
    """Every array of streams x and y equal in dtype, shape and values."""
    for name in ("x", "y"):
        a, b = got.columns[name], want.columns[name]
        for field in ("values", "seq_offsets", "indices", "indptr"):
            x, y = getattr(a, field, None), getattr(b, field, None)
            assert (x is None) == (y is None)
            if x is not None:
                assert x.dtype == y.dtype and x.shape == y.shape and (x == y).all()


@pytest.mark.parametrize("kw", [dict(randomize=False), dict(randomize=True, seed=3),
                                dict(randomize=True, window=5, seed=4, prefetch_chunks=0),
                                dict(randomize=True, window=9, seed=5, num_data_partitions=2, partition_index=1),
                                dict(randomize=True, seed=6, num_data_partitions=3, partition_index=2,
                                     partition_by="chunks")],
                         ids=["file-order", "randomized", "window-no-prefetch", "sample-partition", "chunk-partition"])
def test_minibatches_from_runs_of_chunks_are_those_of_chunk_by_chunk_loads(tiny, kw):
    one, want = minibatches(OneAtATime(tiny), **kw)
    one.close()
    src, got = minibatches(CBFReader(tiny), **kw)
    src.close()
    assert len(CBFReader(tiny).chunks) > 40
    assert got == want and len(got) > 5


def test_a_restored_checkpoint_continues_with_the_minibatches_of_chunk_by_chunk_loads(tiny):
    kw = dict(randomize=True, window=7, seed=11)
    _, want = minibatches(OneAtATime(tiny), **kw)
    first, head = minibatches(CBFReader(tiny), limit=9, **kw)
    state = first.get_checkpoint_state()
    first.close()
    src = MinibatchSource(CBFReader(tiny), max_sweeps=2, max_memory=None, **kw)
    src.restore_from_checkpoint(state)
    tail = []
    k = 9
    while (mb := src.next_minibatch((37, 5, 120)[k % 3])) is not None:
        y = mb["y"]
        tail.append((mb.keys.tolist(), mb.lengths.tolist(), None if mb.sweeps is None else mb.sweeps.tolist(),
                     mb["x"].data.tolist(), y.values.tolist(), y.indices.tolist(), y.indptr.tolist()))
        k += 1
    src.close()
    assert head + tail == want


@pytest.mark.parametrize("randomize", [False, True])
def test_a_sweep_of_small_chunks_reads_and_decodes_runs_not_a_chunk_at_a_time(tiny, randomize):
    reader = CountingReads(tiny)
    n = len(reader.chunks)
    src = MinibatchSource(reader, randomize=randomize, max_sweeps=1, seed=2)
    reads_at_open = reader.reads  # the per-chunk length tables
    while src.next_minibatch(200) is not None:
        pass
    src.close()
    loads = reader.reads - reads_at_open
    assert loads * 3 <= n and reader.decodes * 3 <= n, (loads, reader.decodes, n)


def test_load_chunks_gives_load_chunks_results_in_the_order_asked(tiny):
    ids = [7, 3, 4, 5, 30, 6, 0]
    batch = CBFReader(tiny).load_chunks(ids)
    single = OneAtATime(tiny)
    for cid, got in zip(ids, batch):
        want = single.load_chunk(cid)
        assert got.chunk_id == cid and got.keys.tolist() == want.keys.tolist()
        assert got.lengths.dtype == want.lengths.dtype and got.lengths.tolist() == want.lengths.tolist()
        assert_same_columns(got, want)


def _corrupt(path, chunk_id: int) -> int:
    """Make the first sequence of chunk ``chunk_id`` claim more samples than its bytes hold; its offset."""
    offset = CBFReader(path).chunks[chunk_id].offset
    nseq = CBFReader(path).chunks[chunk_id].num_sequences
    with open(path, "r+b") as f:
        f.seek(offset + 4 * nseq)  # stream x's sample count of sequence 0
        f.write(struct.pack("<I", 1 << 20))
    return offset


def test_a_wrong_chunk_in_a_run_is_named_and_the_others_still_load(tiny, tmp_path):
    path = tmp_path / "bad.cbf"
    path.write_bytes(open(tiny, "rb").read())
    offset = _corrupt(path, 12)
    reader = CBFReader(path)
    with pytest.raises(FormatError) as err:
        reader.load_chunks(range(8, 16))
    assert "chunk 12" in str(err.value) and err.value.offset == offset + 4 * reader.chunks[12].num_sequences
    # a minibatch source's pool task over the same run keeps the error for chunk 12 only
    src = MinibatchSource(CBFReader(path), randomize=False, max_sweeps=1)
    keys = []
    with pytest.raises(FormatError, match="chunk 12"):
        while (mb := src.next_minibatch(20)) is not None:
            keys += mb.keys.tolist()
    src.close()
    first_bad = sum(c.num_sequences for c in reader.chunks[:12])
    assert keys == list(range(len(keys))) and len(keys) <= first_bad


def test_the_kernel_checks_every_chunk_of_a_run_before_allocating_any():
    meta = struct.pack("<I", 1)
    good = meta + struct.pack("<I", 1) + struct.pack("<f", 1.0)
    bad = meta + struct.pack("<I", 5) + struct.pack("<f", 1.0)
    buf = np.frombuffer(good + bad, dtype=np.uint8)
    args = ([False], [1], [4], [np.dtype(np.float32)])
    chunks, _, problem = _kernel.decode_chunks(buf, np.array([0, len(good)]), np.array([len(good), len(bad)]),
                                            np.array([1, 1]), np.array([1, 5]), *args)
    assert chunks is None and problem[:2] == (1, 2)  # chunk 1: its sequence runs past the chunk
    chunks, _, problem = _kernel.decode_chunks(buf, np.array([0]), np.array([len(good)]), np.array([1]),
                                            np.array([2]), *args)
    assert chunks is None and problem[:2] == (0, 9) and problem[-2:] == (1, 2)  # the table says 2 samples
    with pytest.raises(ValueError):
        _kernel.decode_chunks(buf, np.array([4]), np.array([len(buf)]), np.array([1]), np.array([1]), *args)


def test_the_memory_plan_counts_a_runs_read_buffer_for_each_small_chunk_loading(tiny):
    reader = CBFReader(tiny)
    decoded = plan.chunk_bytes(reader)
    loading = plan.load_bytes(reader, decoded)
    assert (loading >= reader.run_bytes + decoded).all()
    part = ChunkPartition(reader, 2, 0)  # a partition of it loads runs too, and is counted so
    assert (plan.load_bytes(part, plan.chunk_bytes(part)) >= reader.run_bytes).all()
    assert (plan.load_bytes(OneAtATime(tiny), decoded) < reader.run_bytes).all()


def test_opening_reads_the_sample_count_tables_of_many_chunks_with_one_file_check(tiny, monkeypatch):
    from recordkit.storage import source as storage_source
    checks = []
    check = storage_source.check_local
    monkeypatch.setattr(storage_source, "check_local", lambda *a: checks.append(a) or check(*a))
    reader = CBFReader(tiny)
    checks.clear()
    src = MinibatchSource(reader, randomize=True, max_sweeps=1)
    assert len(checks) <= 2 < len(reader.chunks)
    reference = OneAtATime(tiny)
    assert all(reader.sequence_lengths(c.id).tolist() == reference.sequence_lengths(c.id).tolist()
               for c in reader.chunks)
    src.close()


def test_load_joined_gives_each_run_as_the_concatenation_of_its_chunks(tiny):
    """Runs (with a chunk not asked for between: read through, not joined), a chunk alone, keys,
    lengths, dense rows, sparse values, indices and row pointers running across the run."""
    from recordkit.engine.chunk import concat_chunks
    ids = [7, 3, 4, 5, 30, 6, 0, 9, 10]
    units = CBFReader(tiny).load_joined(ids)
    assert sorted(c for unit, _ in units for c in unit) == sorted(ids) and len(units) < len(ids)
    single = OneAtATime(tiny)
    for unit, got in units:
        assert unit == sorted(unit)
        want = concat_chunks([single.load_chunk(c) for c in unit])
        assert got.keys.tolist() == want.keys.tolist() and got.lengths.tolist() == want.lengths.tolist()
        assert_same_columns(got, want)


def _count_prepared(monkeypatch) -> list:
    """The chunks (units) whose gather columns a source made from here on."""
    from recordkit.engine import source as engine_source
    made = []
    columns = engine_source.chunk_columns
    monkeypatch.setattr(engine_source, "chunk_columns", lambda data, specs: made.append(len(data)) or
                        columns(data, specs))
    return made


@pytest.mark.parametrize("randomize", [False, True])
def test_a_run_of_small_chunks_is_held_as_one_unit_with_one_set_of_gather_columns(tiny, randomize, monkeypatch):
    made = _count_prepared(monkeypatch)
    src = MinibatchSource(CBFReader(tiny), randomize=randomize, max_sweeps=1, seed=2, max_memory=None)
    n = len(src.chunks)
    seen = 0
    while (mb := src.next_minibatch(200)) is not None:
        seen += mb.num_sequences
    src.close()
    assert seen == sum(made) == 300
    assert len(made) * 3 <= n, (len(made), n)


def test_under_a_memory_bound_smaller_than_every_chunk_at_once_chunks_are_held_one_by_one(tiny, monkeypatch):
    whole = MinibatchSource(CBFReader(tiny), randomize=True, max_sweeps=1).memory.whole_bytes
    made = _count_prepared(monkeypatch)
    kw = dict(randomize=True, window=5, seed=4, max_memory=whole // 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src, got = minibatches(CBFReader(tiny), **kw)
        src.close()
        _, want = minibatches(NotJoined(tiny), **kw)
    assert got == want
    assert len(made) >= 2 * len(src.chunks)  # each chunk its own unit, in both sweeps and both sources


def test_opening_takes_every_chunks_sample_counts_at_once_not_a_call_per_chunk(tiny, monkeypatch):
    asked = []
    one = CBFReader.sequence_lengths
    monkeypatch.setattr(CBFReader, "sequence_lengths", lambda self, cid: asked.append(cid) or one(self, cid))
    src = MinibatchSource(CBFReader(tiny), randomize=True, max_sweeps=1)
    assert asked == []
    reference = MinibatchSource(OneAtATime(tiny), randomize=True, max_sweeps=1)
    assert len(asked) == len(reference.chunks) > 40
    got, want = src.length_table, reference.length_table
    assert got.flat.tolist() == want.flat.tolist() and got.base.tolist() == want.base.tolist()
    src.close()
    reference.close()


@pytest.mark.parametrize("randomize", [False, True])
def test_a_stream_empty_in_the_whole_file_is_still_an_error_when_chunks_load_in_runs(tmp_path, randomize):
    from recordkit.engine.presence import EmptyStreamError
    path = tmp_path / "empty_y.cbf"
    with CBFWriter(path, STREAMS, chunk_size=300) as w:
        for k in range(200):
            w.write({"x": np.full((2, 3), k, dtype=np.float32), "y": sp.csr_matrix((0, 40), dtype=np.float32)})
    reader = CBFReader(path)
    assert len(reader.chunks) > 20
    src = MinibatchSource(reader, randomize=randomize, max_sweeps=1, seed=1)
    with pytest.raises(EmptyStreamError, match="'y'"):
        while src.next_minibatch(64) is not None:
            pass
    src.close()
