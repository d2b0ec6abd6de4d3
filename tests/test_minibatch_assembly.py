"""Minibatch assembly: the compiled gathers and the source's per-minibatch shortcuts give what a
plain per-sequence packing gives.

The gathers prefetch rows, pad only the short sequences (the output is no longer zeroed first),
compute the sparse sequence offsets themselves, and map chunk ids to slots without sorting;
the source skips its eviction and prefetch passes while nothing they look at has changed.
Each shortcut is checked against the slow way on data of many small chunks, variable-length
sequences, dense and sparse streams, in file order and randomized.
"""
import itertools
import warnings

import numpy as np
import pytest

from helpers import dense, sparse, write
from recordkit.engine import _gather
from recordkit.engine.source import MinibatchSource
from recordkit.formats.ctf import CTFReader

STREAMS = [dense("x", 3), sparse("y", 40)]


@pytest.fixture(scope="module", params=["sequences", "frames"])
def corpus(request, tmp_path_factory):
    """600 sequences of 1-9 samples, or ("frames") of one sample but for the last 100 (chunks of
    frames, where the dense gather looks up no offsets, beside chunks of sequences); some samples
    lack the sparse stream (empty rows)."""
    rng = np.random.default_rng(7)
    lines = []
    for sid in range(600):
        longest = 9 if request.param == "sequences" or sid >= 500 else 1
        for t in range(int(rng.integers(1, longest + 1))):
            x = " ".join(f"{v:.3f}" for v in rng.normal(size=3))
            nz = sorted(rng.choice(40, size=int(rng.integers(0, 4)), replace=False).tolist())
            y = " ".join(f"{i}:{rng.integers(1, 9)}" for i in nz)
            lines.append(f"{sid} |x {x}" + (f" |y {y}" if nz else ""))
    path = write(tmp_path_factory.mktemp("assembly"), "\n".join(lines) + "\n")
    whole = {}
    for seq in CTFReader(path, STREAMS):
        whole[int(seq.key)] = seq
    return path, whole


def open_source(path, **kw):
    # chunks of ~2 KB: a few dozen sequences each, so a randomized minibatch draws from many
    return MinibatchSource(CTFReader(path, STREAMS, chunk_size=2048), **kw)


def check_against_plain_packing(mb, whole):
    keys = mb.keys.tolist()
    x, y = mb["x"], mb["y"]
    T = x.data.shape[1]
    assert x.lengths.tolist() == [len(whole[k]["x"]) for k in keys]
    for i, k in enumerate(keys):
        ref = whole[k]["x"]
        n = len(ref)
        np.testing.assert_array_equal(x.data[i, :n], ref)
        assert not x.data[i, n:].any(), "padding must be zeros"
        assert x.mask[i].tolist() == [t < n for t in range(T)]
        rows = y.csr[y.seq_offsets[i]:y.seq_offsets[i + 1]].toarray()
        np.testing.assert_array_equal(rows, whole[k]["y"].toarray())
    assert y.seq_offsets[0] == 0 and y.seq_offsets[-1] == y.csr.shape[0]
    np.testing.assert_array_equal(np.diff(y.seq_offsets), y.lengths)
    assert mb.lengths.tolist() == [max(len(whole[k]["x"]), whole[k]["y"].shape[0]) for k in keys]


@pytest.mark.parametrize("randomize,window", [(False, 1), (True, 3), (True, 40)])
def test_minibatches_equal_a_plain_per_sequence_packing(corpus, randomize, window):
    path, whole = corpus
    src = open_source(path, randomize=randomize, window=window, max_sweeps=2)
    assert len(src.chunks) > 15
    seen = []
    for size in itertools.cycle([1, 7, 64, 300]):
        mb = src.next_minibatch(size)
        if mb is None:
            break
        check_against_plain_packing(mb, whole)
        seen += mb.keys.tolist()
    assert sorted(seen) == sorted(list(whole) * 2)


def test_a_minibatch_from_every_chunk_is_packed_from_the_held_table_without_a_call_per_chunk(corpus, monkeypatch):
    """A randomized minibatch drawing from every chunk: the source maps its picks to the cache's
    slots and packs from the table of held chunks in one call (no chunk-by-chunk look-up)."""
    path, whole = corpus
    answers, gets = [], []
    scan = _gather.chunk_slots
    monkeypatch.setattr(_gather, "chunk_slots", lambda cids: answers.append(scan(cids)) or answers[-1])
    src = open_source(path, randomize=True, window=1000, max_sweeps=1)
    get = src._cache.get
    monkeypatch.setattr(src._cache, "get", lambda cid: gets.append(cid) or get(cid))
    mb = src.next_minibatch(3000)  # hundreds of sequences from every chunk of the data
    assert len(set(src.randomizer.sweep(0).chunk.tolist())) > 16
    assert answers == []  # neither the slot scan nor np.unique: the cache's slot table
    assert len(gets) <= len(src.chunks) + 1  # chunks awaited as they load, none looked up again to pack
    check_against_plain_packing(mb, whole)


def test_chunk_slots_maps_every_pick_to_its_chunk():
    rng = np.random.default_rng(3)
    for k in (1, 2, 5, 16):
        ids = rng.choice(10**6, size=k, replace=False)
        cids = ids[rng.integers(0, k, size=500)].astype(np.int64)
        uniq, slot = _gather.chunk_slots(cids)
        np.testing.assert_array_equal(uniq[slot], cids)
        assert len(set(uniq.tolist())) == len(uniq) == len(set(cids.tolist()))
    assert _gather.chunk_slots(np.arange(17, dtype=np.int64)) is None
    uniq, slot = _gather.chunk_slots(np.zeros(0, dtype=np.int64))
    assert len(uniq) == len(slot) == 0


class _NoShortcuts(MinibatchSource):
    """The source with its per-minibatch memos forgotten at once: every eviction and prefetch pass runs."""

    def __setattr__(self, name, value):
        if name in ("_evict_memo", "_prefetch_memo"):
            value = None
        object.__setattr__(self, name, value)


@pytest.mark.parametrize("randomize", [False, True])
@pytest.mark.parametrize("window", [1, 2, 5, 40])
@pytest.mark.parametrize("prefetch", [0, 1, 3])
def test_skipped_eviction_passes_hold_the_same_chunks_as_the_full_pass(corpus, randomize, window, prefetch):
    path, _ = corpus

    def trace(cls):
        src = open_source(path, randomize=randomize, window=window, max_sweeps=3, prefetch_chunks=prefetch)
        src.__class__ = cls
        out = []
        for size in itertools.cycle([64, 300, 1, 1000, 17]):
            mb = src.next_minibatch(size)
            if mb is None:
                break
            out.append((sorted(src.held_chunks()), mb.keys.tolist()))
        src.close()
        return out

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast, full = trace(MinibatchSource), trace(_NoShortcuts)
    assert len(fast) > 10
    assert [k for _, k in fast] == [k for _, k in full]
    assert [h for h, _ in fast] == [h for h, _ in full]


def test_the_shortcut_check_really_runs_every_pass(corpus):
    path, _ = corpus
    src = open_source(path, randomize=True, window=5)
    src.next_minibatch(100)
    assert src._evict_memo is not None and src._prefetch_memo is not None
    src.__class__ = _NoShortcuts
    src.next_minibatch(100)
    assert src._evict_memo is None and src._prefetch_memo is None


def test_num_samples_is_the_sum_of_lengths_counted_once_and_again_when_lengths_is_replaced(corpus):
    """``Minibatch.num_samples`` is counted once (the source and the loop both ask every minibatch),
    equals the lengths' sum on every minibatch, and follows a replaced ``lengths``."""
    path, _ = corpus
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src = MinibatchSource(CTFReader(path, STREAMS, chunk_size=300), randomize=True, window=3, max_sweeps=1)
        total = 0
        while (got := src.next_minibatch(20)) is not None:
            assert got.num_samples == int(got.lengths.sum()) == got.num_samples
            for name in ("x", "y"):
                assert got[name].num_samples == int(got[name].lengths.sum()) == got[name].num_samples
            total += got.num_samples
            mb = got
        assert total == src.samples_delivered > 0
        src.close()
    mb.lengths = np.array([4, 5], dtype=np.int64)
    assert mb.num_samples == 9
    mb.lengths = np.zeros(0, dtype=np.int64)
    assert mb.num_samples == 0
    mb["x"].lengths = np.array([2, 1], dtype=np.int64)
    assert mb["x"].num_samples == 3


def _two_chunks(path):
    reader = CTFReader(path, STREAMS, chunk_size=2048)
    return [reader.load_chunk(c.id) for c in reader.chunks[:2]]


def test_one_compiled_pack_gives_what_each_streams_own_gather_gives(corpus):
    """``_gather.pack`` (keys, lengths, every stream in one call over the chunks' ``ChunkColumns``)
    against the per-stream gathers it replaced, on random picks from two chunks."""
    from recordkit.engine.minibatch import chunk_columns, prepared_views
    path, _ = corpus
    chunks = _two_chunks(path)
    rng = np.random.default_rng(11)
    for n in (0, 1, 5, 200):
        slot = rng.integers(0, 2, size=n).astype(np.int64)
        seq = np.array([rng.integers(0, len(chunks[k])) for k in slot], dtype=np.int64)
        keys, lengths, total, outs = _gather.pack([chunk_columns(c, STREAMS)[0] for c in chunks], slot, seq)
        preps = [prepared_views(c, STREAMS) for c in chunks]
        np.testing.assert_array_equal(keys, _gather.gather_items([p["__keys__"] for p in preps], slot, seq))
        np.testing.assert_array_equal(lengths, _gather.gather_items([p["__lengths__"] for p in preps], slot, seq))
        assert total == int(lengths.sum())
        x = [p["x"] for p in preps]
        want = _gather.gather_padded([q[0] for q in x], [q[2] for q in x], slot, seq, 3 * 4)
        assert all(np.array_equal(a, b) for a, b in zip(outs[0], want)) and outs[0][2] == want[2]
        y = [p["y"] for p in preps]
        want = _gather.gather_sparse(*[[q[i] for q in y] for i in range(4)], slot, seq, 4)
        assert all(np.array_equal(a, b) for a, b in zip(outs[1], want))


def test_chunks_whose_stream_differs_in_dtype_are_packed_in_the_common_dtype_not_misread(corpus):
    """A hand-built deserializer may give one chunk float64 values and another float32: the
    minibatch holds every value right, in float64 (one dtype's bytes were once read as the other's)."""
    import dataclasses

    from recordkit.engine.minibatch import pack_from_chunks
    path, whole = corpus
    a, b = _two_chunks(path)
    b = dataclasses.replace(b, columns={
        "x": dataclasses.replace(b.columns["x"], values=b.columns["x"].values.astype(np.float64)),
        "y": dataclasses.replace(b.columns["y"], values=b.columns["y"].values.astype(np.float64))})
    slot = np.array([0, 1, 1, 0], dtype=np.int64)
    seq = np.array([0, 1, 0, 2], dtype=np.int64)
    streams, keys, lengths, total = pack_from_chunks([a, b], slot, seq, STREAMS)
    assert streams["x"].data.dtype == np.float64 and streams["y"].values.dtype == np.float64
    assert total == int(lengths.sum())
    for i, k in enumerate(keys.tolist()):
        n = len(whole[k]["x"])
        np.testing.assert_allclose(streams["x"].data[i, :n], whole[k]["x"], rtol=1e-6)
        got = streams["y"].csr[streams["y"].seq_offsets[i]:streams["y"].seq_offsets[i + 1]].toarray()
        np.testing.assert_allclose(got, whole[k]["y"].toarray(), rtol=1e-6)


@pytest.mark.parametrize("elastic", [False, True])
def test_take_picks_keeps_what_the_numpy_expressions_kept(elastic):
    """The picker's one call per run (chunk id, index in the chunk, length, sweep, position) against
    the NumPy indexing it replaced, for an ordinary share and an elastic run's positions."""
    rng = np.random.default_rng(5)
    chunk = rng.integers(0, 50, size=1000).astype(np.int64)
    lo, hi = 300, 700
    pos_j = rng.integers(-2, 90, size=hi - lo).astype(np.int64)
    pos_len = rng.integers(0, 9, size=hi - lo).astype(np.int64)
    orig = np.sort(rng.choice(10**5, size=hi - lo, replace=False)).astype(np.int64) if elastic else None
    sel = np.sort(rng.choice(hi - lo, size=120, replace=False)).astype(np.int64)
    c, j, n, w, p = _gather.take_picks(sel, lo, chunk, pos_j, pos_len, orig, 4)
    np.testing.assert_array_equal(c, chunk[lo + sel])
    np.testing.assert_array_equal(j, pos_j[sel])
    np.testing.assert_array_equal(n, pos_len[sel])
    assert w.tolist() == [4] * len(sel)
    np.testing.assert_array_equal(p, orig[sel] if elastic else lo + sel)


def test_packing_from_no_chunks_is_refused_rather_than_giving_a_minibatch_without_streams():
    from recordkit.engine.minibatch import pack_from_chunks
    none = np.zeros(0, dtype=np.int64)
    with pytest.raises(ValueError, match="no chunks"):
        pack_from_chunks([], none, none, STREAMS)
