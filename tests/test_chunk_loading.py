"""How a MinibatchSource loads chunks: each once per sweep, and chunks awaited together either one
after another with every thread (readers that split a chunk over threads) or a chunk per
background thread (readers that do not)."""
import threading

import numpy as np
import pytest

from helpers import dense, sparse, write, write_valued_cbf
from recordkit.engine import chunk_cache
from recordkit.engine.chunk_partition import ChunkPartition
from recordkit.engine.deserializer import splits_chunks
from recordkit.engine.mixture import Mixture
from recordkit.engine.source import MinibatchSource
from recordkit.formats.cbf import CBFReader
from recordkit.formats.ctf import CTFReader


class RecordingCTF(CTFReader):
    """A CTFReader that notes each load: (chunk id, threads offered, thread it ran on)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.loads = []

    def load_chunk(self, chunk_id, *, threads=1):
        self.loads.append((chunk_id, threads, threading.current_thread().name))
        return super().load_chunk(chunk_id, threads=threads)


class RecordingCBF(CBFReader):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.loads = []

    def load_chunk(self, chunk_id, *, threads=1):
        self.loads.append((chunk_id, threads, threading.current_thread().name))
        return super().load_chunk(chunk_id, threads=threads)

    def load_chunks(self, chunk_ids):  # several small chunks at once: each noted as a load on one thread
        ids = list(chunk_ids)
        self.loads.extend((c, 1, threading.current_thread().name) for c in ids)
        return super().load_chunks(ids)

    def load_joined(self, chunk_ids):  # runs of small chunks as one unit each: each chunk noted as a load
        ids = list(chunk_ids)
        self.loads.extend((c, 1, threading.current_thread().name) for c in ids)
        return super().load_joined(ids)


def _ctf(tmp_path, n=400, chunk_size=2000):
    text = "".join(f"{i} |x {i} {i + 0.5} |y {i % 7}:1\n" for i in range(n))
    p = write(tmp_path, text)
    return lambda cls=RecordingCTF: cls(p, [dense("x", 2), sparse("y", 7)], chunk_size=chunk_size)


@pytest.mark.parametrize("randomize", [False, True])
@pytest.mark.parametrize("fmt", ["ctf", "cbf"])
def test_each_chunk_is_loaded_once_in_a_one_sweep_run(tmp_path, randomize, fmt):
    """At the end of the sweep (and of each chunk in file order) the chunk just used up is not
    loaded again by the prefetch (it was: the last chunk's reload then held up ``close``)."""
    if fmt == "ctf":
        reader = _ctf(tmp_path)()
    else:
        reader = RecordingCBF(write_valued_cbf(tmp_path / "v.cbf", 300, longest=3, chunk_size=512))
    n_chunks = len(reader.chunks)
    assert n_chunks >= 4
    src = MinibatchSource(reader, randomize=randomize, window=2 if randomize else 128, max_sweeps=1, seed=1)
    seen = 0
    while (m := src.next_minibatch(40)) is not None:
        seen += m.num_sequences
    src.close()
    assert seen == reader.num_sequences
    assert sorted(c for c, _, _ in reader.loads) == list(range(n_chunks))


def test_chunks_awaited_together_load_one_after_another_with_every_thread_when_the_reader_splits_them(tmp_path):
    reader = _ctf(tmp_path)()
    assert splits_chunks(reader)
    src = MinibatchSource(reader, randomize=True, window=128, max_sweeps=1, threads=2, seed=3)
    src.next_minibatch(10)  # the whole-data window: every chunk is needed for the first minibatch
    caller = threading.current_thread().name
    assert sorted(c for c, _, _ in reader.loads) == list(range(len(reader.chunks)))
    assert all(threads == 2 and name == caller for _, threads, name in reader.loads)
    src.close()


@pytest.mark.parametrize("n,n_chunks", [(40, 3), (60, 4), (80, 5)])
def test_readers_that_do_not_split_chunks_load_awaited_chunks_a_chunk_per_background_thread(tmp_path, n, n_chunks,
                                                                                            monkeypatch):
    """CBF takes threads= but checks a chunk on one thread: awaited chunks go to the pool a chunk per
    thread, and those left over when they do not divide among the threads load after them in the
    caller with every thread (chunks of at least ``GROUP_BYTES``: these tiny ones stand for them)."""
    monkeypatch.setattr(chunk_cache, "GROUP_BYTES", 0)
    reader = RecordingCBF(write_valued_cbf(tmp_path / "v.cbf", n, longest=3, chunk_size=512))
    assert not splits_chunks(reader) and len(reader.chunks) == n_chunks
    src = MinibatchSource(reader, randomize=True, window=128, max_sweeps=1, threads=2, seed=3)
    src.next_minibatch(1000)  # every sequence: every chunk is awaited
    caller = threading.current_thread().name
    on_pool = [c for c, t, name in reader.loads if name.startswith("recordkit-prefetch") and t == 1]
    in_caller = [c for c, t, name in reader.loads if name == caller and t == 2]
    assert len(on_pool) == n_chunks - n_chunks % 2 and len(in_caller) == n_chunks % 2
    assert sorted(on_pool + in_caller) == list(range(n_chunks))
    src.close()


def test_a_lone_awaited_cbf_chunk_loads_in_the_caller_with_every_thread_and_the_next_starts_beside_it(tmp_path):
    """File order, CBF: the first minibatch waits for chunk 0 (split over the threads in the
    caller) while chunk 1, wanted next, already loads on the pool: two loads at once, the
    threads the memory plan counts; chunk 2 waits for the prefetch after the minibatch."""
    started = threading.Event()

    class Slow(RecordingCBF):
        def load_chunk(self, chunk_id, *, threads=1):
            if chunk_id == 0:
                assert started.wait(5), "chunk 1 did not start while chunk 0 loaded"
            else:
                started.set()
            return super().load_chunk(chunk_id, threads=threads)

    reader = Slow(write_valued_cbf(tmp_path / "v.cbf", 300, longest=3, chunk_size=512))
    assert len(reader.chunks) >= 4
    src = MinibatchSource(reader, randomize=False, max_sweeps=1, threads=2, prefetch_chunks=2)
    src.next_minibatch(1)
    caller = threading.current_thread().name
    assert (0, 2, caller) in reader.loads
    assert any(c == 1 and name.startswith("recordkit-prefetch") for c, _, name in reader.loads)
    src.close()


def test_a_splitting_reader_starts_no_prefetch_beside_the_chunk_a_minibatch_waits_for(tmp_path):
    """CTF parses the awaited chunk on every thread: the next chunks start after the minibatch."""
    reader = _ctf(tmp_path)()
    seen = []
    src = MinibatchSource(reader, randomize=False, max_sweeps=1, threads=2, prefetch_chunks=2)
    orig = src._cache.start

    def start(cids, **kw):
        seen.append((list(cids), [c for c, _, _ in reader.loads]))
        return orig(cids, **kw)
    src._cache.start = start
    src.next_minibatch(1)
    assert seen and all(0 in loads for _, loads in seen)  # every start came after chunk 0's load
    src.close()


@pytest.mark.parametrize("randomize", [False, True])
def test_minibatches_do_not_depend_on_how_the_chunks_were_loaded(tmp_path, randomize):
    """Split loads (threads=2, one chunk after another) give the minibatches that loads on one
    thread without prefetch give."""
    make = _ctf(tmp_path, n=500)

    def run(**kw):
        src = MinibatchSource(make(), randomize=randomize, window=3, max_sweeps=2, seed=5, **kw)
        got = []
        while (m := src.next_minibatch(33)) is not None:
            got.append((m.keys.copy(), m["x"].data.copy(), m["y"].csr.toarray()))
        src.close()
        return got

    a, b = run(threads=2), run(threads=1, prefetch_chunks=0)
    assert len(a) == len(b)
    for (ka, xa, ya), (kb, xb, yb) in zip(a, b):
        np.testing.assert_array_equal(ka, kb)
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)


def test_wrappers_say_whether_what_they_wrap_splits_chunks(tmp_path):
    ctf = _ctf(tmp_path)(CTFReader)
    cbf = CBFReader(write_valued_cbf(tmp_path / "v.cbf", 50, longest=2, chunk_size=256))
    assert splits_chunks(ChunkPartition(ctf, 2, 0))
    assert not splits_chunks(ChunkPartition(cbf, 2, 0))
    assert splits_chunks(Mixture([ctf, _ctf(tmp_path)(CTFReader)], repeats=[1, 1]))
    x_only = CTFReader(write(tmp_path, "|x 1 2 3\n|x 4 5 6\n", "x.ctf"), [dense("x", 3)])
    assert not splits_chunks(Mixture([x_only, cbf], repeats=[1, 1]))
