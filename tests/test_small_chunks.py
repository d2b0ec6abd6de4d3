"""Many small chunks: what a minibatch does with its chunks is batched, and the minibatches do
not change.

A randomized minibatch of small chunks draws from hundreds of them; their look-up, preparation
and eviction are array operations over all of them, and small chunks load several to a pool
task. Whatever the chunking, the minibatches are the randomizer's order cut by CNTK's rule.
"""
import itertools
import threading
import warnings

import numpy as np
import pytest

from helpers import write_valued_cbf
from recordkit.engine import chunk_cache
from recordkit.engine.source import MinibatchSource
from recordkit.formats.cbf import CBFReader


@pytest.fixture(scope="module")
def small_chunks(tmp_path_factory):
    # 900 sequences of 1-4 samples in chunks of ~256 bytes: about a hundred chunks
    return write_valued_cbf(tmp_path_factory.mktemp("small") / "v.cbf", 900, longest=4, chunk_size=256)


def expected_order(src, sweeps):
    """The keys of ``sweeps`` sweeps in the randomizer's order (CBF keys: chunk's first key + index)."""
    first = np.concatenate([[0], np.cumsum([c.num_sequences for c in src.chunks])])
    out = []
    for k in range(sweeps):
        order = src.randomizer.sweep(k)
        out += (first[order.chunk] + order.index).tolist()
    return out


@pytest.mark.parametrize("randomize,window,prefetch", [(False, None, 2), (True, None, 2), (True, 7, 0),
                                                       (True, 3, 3)])
def test_minibatches_of_many_small_chunks_are_the_randomizers_order_cut_by_the_fits_rule(small_chunks, randomize,
                                                                                          window, prefetch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src = MinibatchSource(CBFReader(small_chunks), randomize=randomize, window=window, seed=3, max_sweeps=2,
                              prefetch_chunks=prefetch, max_memory=None)
    assert len(src.chunks) > 50
    want = expected_order(src, 2)
    got = []
    sizes = itertools.cycle([1, 13, 500, 64, 2000])
    size = next(sizes)
    while (mb := src.next_minibatch(size)) is not None:
        keys = mb.keys.tolist()
        lengths = [k % 4 + 1 for k in keys]
        assert mb.lengths.tolist() == lengths and mb.num_samples == sum(lengths)
        # the first sequence always; after it, one only if it still fits
        assert len(keys) >= 1 and (len(keys) == 1 or sum(lengths) <= size)
        at = len(got) + len(keys)
        if at < len(want):
            assert sum(lengths) + want[at] % 4 + 1 > size, "the next sequence would have fitted"
        x = mb["x"]
        for i, k in enumerate(keys):
            assert (x.data[i, :lengths[i]] == k).all() and not x.data[i, lengths[i]:].any()
        got += keys
        size = next(sizes)
    src.close()
    assert got == want


class RecordingCBF(CBFReader):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.loads = []
        self.calls = []  # the chunk ids of each load_chunks call

    def load_chunk(self, chunk_id, *, threads=1):
        self.loads.append((chunk_id, threading.current_thread().name))
        return super().load_chunk(chunk_id, threads=threads)

    def load_chunks(self, chunk_ids):
        ids = list(chunk_ids)
        self.calls.append(ids)
        self.loads.extend((c, threading.current_thread().name) for c in ids)
        return super().load_chunks(ids)

    def load_joined(self, chunk_ids):
        ids = list(chunk_ids)
        self.calls.append(ids)
        self.loads.extend((c, threading.current_thread().name) for c in ids)
        return super().load_joined(ids)


@pytest.mark.parametrize("randomize", [False, True])
def test_small_chunks_load_several_to_a_pool_task(small_chunks, randomize, monkeypatch):
    """The chunks a minibatch waits for go to the pool as a run per thread, not a task per chunk
    (this data is tiny: the least bytes worth a hand-off is lowered to match)."""
    monkeypatch.setattr(chunk_cache, "MIN_TASK_BYTES", 1024, raising=False)
    reader = RecordingCBF(small_chunks)
    src = MinibatchSource(reader, randomize=randomize, max_sweeps=1, threads=2, prefetch_chunks=2)
    tasks = []
    submit = src._cache.pool.submit
    src._cache.pool.submit = lambda *a: tasks.append(a) or submit(*a)
    while src.next_minibatch(700) is not None:
        pass
    src.close()
    on_pool = [c for c, name in reader.loads if name.startswith("recordkit-prefetch")]
    assert len(on_pool) > 20
    assert len(tasks) * 3 <= len(on_pool)


def test_a_minibatch_over_every_held_chunk_drops_them_all_in_one_eviction_pass(small_chunks, monkeypatch):
    """Eviction looks at every held chunk as arrays: the chunks a sweep no longer needs go in one
    ``drop_many`` call, not a call per chunk."""
    src = MinibatchSource(CBFReader(small_chunks), randomize=True, max_sweeps=1, max_memory=None)
    calls = []
    drop_many = src._cache.drop_many
    monkeypatch.setattr(src._cache, "drop_many", lambda cids: calls.append(list(cids)) or drop_many(cids))
    mb = src.next_minibatch(10 ** 6)  # the whole sweep: every chunk held, then none needed
    assert mb.num_sequences == 900
    assert len(calls) == 1 and len(calls[0]) == len(src.chunks)
    assert src.held_chunks() == []
    src.close()


def test_dropping_used_up_chunks_leaves_their_positions_behind_the_cursor_alone(small_chunks, monkeypatch):
    """Positions are read from the cursor on: a file-order sweep looks up each chunk's positions
    once, when it loads (to record where its sequences are), not again when it drops it."""
    from recordkit.engine.sweep import Sweep
    looked_up = []
    positions_of = Sweep.positions_of
    monkeypatch.setattr(Sweep, "positions_of", lambda sw, cids: looked_up.extend(np.asarray(cids).tolist()) or
                        positions_of(sw, cids))
    src = MinibatchSource(CBFReader(small_chunks), randomize=False, max_sweeps=1, max_memory=None)
    keys = []
    while (mb := src.next_minibatch(64)) is not None:
        keys += mb.keys.tolist()
    src.close()
    assert keys == list(range(900))
    assert sorted(looked_up) == list(range(len(src.chunks)))


def test_the_prefetch_of_a_few_tiny_chunks_ahead_waits_for_the_next_burst_instead_of_a_load_of_its_own(small_chunks):
    """File order, chunks held in runs: the 2 chunks the prefetch wants ahead are a few hundred
    bytes here, far under a hand-off's worth; they load with the next awaited burst, in its run."""
    reader = RecordingCBF(small_chunks)
    src = MinibatchSource(reader, randomize=False, max_sweeps=1, threads=2, prefetch_chunks=2, max_memory=None)
    keys = []
    while (mb := src.next_minibatch(64)) is not None:
        keys += mb.keys.tolist()
    src.close()
    assert keys == list(range(900))
    assert sorted(c for c, _ in reader.loads) == list(range(len(reader.chunks)))
    assert not [c for c, name in reader.loads if name.startswith("recordkit-prefetch")]
    assert len(reader.calls) * 3 <= len(reader.chunks)
