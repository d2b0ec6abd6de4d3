"""The memory bound: MinibatchSource(max_memory=...) reduces the randomization
window (then the prefetch) so the chunks held at once fit, reports the choice, never changes a
window that fits; the compat layers keep CNTK's defaults and warn when they exceed memory; the
engine drops chunks it does not need soon, so what it holds follows the plan."""
import warnings

import numpy as np
import pytest

from helpers import dense, sparse, write
from recordkit.engine import memory
from recordkit.compose.plan import minibatch_ends
from recordkit.sizes import parse_size
from recordkit.engine.deserializer import ChunkInfo
from recordkit.engine.source import MinibatchSource
from recordkit.errors import RecordkitWarning
from recordkit.formats.ctf import CTFReader


def corpus(tmp_path, sequences=600, seed=3, name="data.ctf"):
    """Variable-length sequences (1..6 lines) with a dense and a sparse stream, in id mode."""
    rng = np.random.default_rng(seed)
    lines = []
    for s in range(sequences):
        for t in range(int(rng.integers(1, 7))):
            vals = " ".join(f"{v:.3f}" for v in rng.normal(size=8))
            idx = sorted(rng.choice(1000, size=3, replace=False))
            lines.append(f"{s} |x {vals} |y " + " ".join(f"{i}:{rng.random():.2f}" for i in idx))
    return write(tmp_path, "\n".join(lines) + "\n", name)


STREAMS = [dense("x", 8), sparse("y", 1000)]


def reader(path, chunk_size=4096):
    return CTFReader(path, STREAMS, chunk_size=chunk_size)


def read_all(source, size=64):
    keys, sweeps = [], []
    for mb in source.minibatches(size):
        keys.extend(mb.keys.tolist())
        sweeps.extend(mb.sweeps.tolist())
    return keys, sweeps


# -- sizes ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,value", [("512MB", 512 * 10 ** 6), ("2GiB", 2 << 30), ("1.5k", 1500),
                                        ("4096", 4096), (" 3 mib ", 3 << 20), (1000, 1000)])
def test_memory_sizes_are_read_with_decimal_and_binary_units(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "12 apples", "-5MB", "0", "MB"])
def test_a_malformed_or_empty_memory_size_is_refused(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_ctf_decoded_size_estimates_are_close_to_the_loaded_chunks(tmp_path):
    r = reader(corpus(tmp_path))
    est = memory.chunk_bytes(r)
    for cid in range(len(r.chunks)):
        c = r.load_chunk(cid)
        real = sum(getattr(col, a).nbytes for col in c.columns.values()
                   for a in ("values", "indices", "indptr", "seq_offsets") if getattr(col, a, None) is not None)
        assert 0.8 * real <= est[cid] <= 1.5 * real + 4096, (cid, est[cid], real)


def test_cbf_decoded_size_estimates_are_close_to_the_loaded_chunks(tmp_path):
    from recordkit.cli.main import main
    from recordkit.formats.cbf import CBFReader
    out = tmp_path / "data.cbf"
    assert main(["convert", str(corpus(tmp_path)), str(out), "--stream", "x=dense:8", "--stream", "y=sparse:1000",
                 "--output-chunk-size", "4096"]) == 0
    r = CBFReader(out)
    est = memory.chunk_bytes(r)
    assert len(est) >= 5
    for cid in range(len(r.chunks)):
        c = r.load_chunk(cid)
        real = sum(getattr(col, a).nbytes for col in c.columns.values()
                   for a in ("values", "indices", "indptr", "seq_offsets") if getattr(col, a, None) is not None)
        assert 0.8 * real <= est[cid] <= 1.3 * real + 4096, (cid, est[cid], real)


# -- held chunks ---------------------------------------------------------------------------------
def test_file_order_without_prefetch_holds_one_chunk_at_a_time():
    order = np.repeat(np.arange(4), 10)
    sizes = np.array([10, 20, 30, 40])
    assert memory.held_peak(order, sizes, prefetch=0) == (40, 1)
    # minibatches of 15 positions straddle chunk ends: two chunks at once
    assert memory.held_peak(order, sizes, prefetch=0, steps=np.arange(15, 41, 15)) == (20 + 30, 2)


def _held_step_by_step(order, sizes, steps=None, prefetch=2):
    """The held bytes and chunks at their peak, walked minibatch by minibatch (the engine's policy
    spelled out, without ``held_peak``'s shortcuts): a chunk is held from the step its load starts
    (its first use, or the prefetch's reach) to the step of its last use."""
    order = np.asarray(order)
    ends = list(range(1, len(order) + 1)) if steps is None else [int(e) for e in steps] + [len(order)]
    step = np.searchsorted(np.asarray(ends), np.arange(len(order)), side="right")
    uniq = list(dict.fromkeys(order.tolist()))  # in order of first use
    first = {c: int(step[order.tolist().index(c)]) for c in uniq}
    last = {c: int(step[len(order) - 1 - order.tolist()[::-1].index(c)]) for c in uniq}
    p = prefetch + 1 if prefetch else 0
    load = {c: (0 if r < p else min(first[c], first[uniq[r - p]])) if p else first[c] for r, c in enumerate(uniq)}
    best = (0, 0)
    for t in range(int(step.max()) + 2):
        held = [c for c in uniq if load[c] <= t <= last[c]]
        if sum(int(sizes[c]) for c in held) > best[0]:
            best = (sum(int(sizes[c]) for c in held), len(held))
    return best


def test_the_peak_is_that_of_the_step_by_step_walk():
    rng = np.random.default_rng(5)
    for _ in range(150):
        k, n = int(rng.integers(1, 7)), int(rng.integers(1, 40))
        order = np.sort(rng.integers(0, k, n)) if rng.random() < 0.5 else rng.integers(0, k, n)
        sizes = rng.integers(1, 100, k)
        steps = np.unique(rng.integers(1, n + 1, int(rng.integers(1, n + 1)))) if rng.random() < 0.5 else None
        steps = None if steps is None else steps[steps < n]
        prefetch = int(rng.integers(0, 4))
        assert memory.held_peak(order, sizes, prefetch=prefetch, steps=steps) == \
            _held_step_by_step(order, sizes, steps, prefetch), (order, sizes, steps, prefetch)


def test_prefetch_adds_the_next_chunks_in_order_of_first_use():
    order = np.repeat(np.arange(6), 10)
    sizes = np.full(6, 100)
    # prefetch 2: the chunk in use and the next three
    assert memory.held_peak(order, sizes, prefetch=2) == (400, 4)


def test_loads_in_flight_count_threads_at_a_time():
    order = np.repeat(np.arange(4), 10)
    sizes = np.full(4, 100)
    loading = np.full(4, 50)
    held, _ = memory.held_peak(order, sizes, prefetch=0, loading=loading)
    assert held == 150  # one chunk held while it loads
    held, _ = memory.held_peak(order, sizes, prefetch=2, loading=loading, threads=2)
    assert held == 400 + 100  # all four start at once; the last pair loads while the first pair is held


def test_chunks_a_minibatch_waits_for_load_one_at_a_time_when_the_reader_splits_them():
    # a randomized whole-window sweep: the first minibatch needs all four chunks
    order = np.tile(np.arange(4), 10)
    sizes = np.full(4, 100)
    loading = np.full(4, 50)
    held, _ = memory.held_peak(order, sizes, prefetch=2, loading=loading, threads=2)
    assert held == 200 + 200 + 100  # a chunk per thread: the second pair loads beside the first pair
    held, _ = memory.held_peak(order, sizes, prefetch=2, loading=loading, threads=2, splits=True)
    assert held == 300 + 100 + 50  # one after another: the last loads beside the other three
    # in file order only the first chunk is waited for; the prefetched ones still load two at a time
    order = np.repeat(np.arange(4), 10)
    held, _ = memory.held_peak(order, sizes, prefetch=2, loading=loading, threads=2, splits=True)
    assert held == 300 + 100 + 50  # the first alone, the next pair beside it, then the fourth beside those


# -- the bound in MinibatchSource ----------------------------------------------------------------
def test_a_window_that_fits_is_not_changed_and_gives_the_same_order(tmp_path):
    path = corpus(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bounded = MinibatchSource(reader(path), randomize=True, window=3, seed=5, max_sweeps=2, max_memory="1GB")
    unbounded = MinibatchSource(reader(path), randomize=True, window=3, seed=5, max_sweeps=2, max_memory=None)
    assert bounded.memory.window == 3 and not bounded.memory.capped and bounded.memory.fits
    assert read_all(bounded) == read_all(unbounded)


def test_a_small_bound_reduces_the_window_reports_it_and_still_delivers_every_sequence(tmp_path):
    path = corpus(tmp_path)
    r = reader(path)
    C = len(r.chunks)
    assert C >= 8
    nbytes = memory.chunk_bytes(r)
    bound = int(nbytes.sum() * 0.6)
    with pytest.warns(RecordkitWarning, match="window reduced from the whole data set"):
        source = MinibatchSource(r, randomize=True, seed=1, max_sweeps=2, max_memory=bound)
    m = source.memory
    assert m.capped and m.fits and m.window is not None and 1 <= m.window < C
    assert m.estimated_bytes <= bound < m.whole_bytes
    assert source.randomizer.window == m.window
    keys, sweeps = read_all(source)
    everything = sorted(int(k) for c in r.chunks for k in r.sequence_keys(c.id))
    for s in (0, 1):
        assert sorted(k for k, w in zip(keys, sweeps) if w == s) == everything


def test_when_even_one_chunk_does_not_fit_the_prefetch_goes_and_a_warning_says_use_smaller_chunks(tmp_path):
    r = reader(corpus(tmp_path))
    with pytest.warns(RecordkitWarning, match="smaller chunks"):
        source = MinibatchSource(r, randomize=True, max_sweeps=1, max_memory=100)
    assert source.memory.window == 1 and source.memory.prefetch == 0 and not source.memory.fits
    assert len(read_all(source)[0]) == sum(c.num_sequences for c in r.chunks)


def test_the_default_bound_is_a_quarter_of_the_available_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: 4 << 30)
    source = MinibatchSource(reader(corpus(tmp_path)), randomize=True, max_sweeps=1)
    assert source.memory.max_memory == 1 << 30 and source.memory.bound_from == "machine"
    assert source.memory.window is None and not source.memory.capped


def test_the_compat_layers_keep_cntks_window_and_warn_when_it_exceeds_the_memory(tmp_path, monkeypatch):
    from recordkit.compat import cntk
    path = corpus(tmp_path)
    deser = cntk.CTFDeserializer(str(path), cntk.StreamDefs(x=cntk.StreamDef(field="x", shape=8),
                                                             y=cntk.StreamDef(field="y", shape=1000, is_sparse=True)))
    monkeypatch.setattr(memory, "available_memory", lambda: 1000)
    with pytest.warns(RecordkitWarning, match="more than the .* of memory available"):
        src = cntk.MinibatchSource(deser, max_sweeps=1)
    assert src.engine.memory.max_memory is None and src.engine.memory.window == 128
    assert src.engine.randomizer.window == 128


def test_from_config_keeps_cntks_default_window_unbounded(tmp_path):
    import recordkit
    path = corpus(tmp_path)
    cfg = f"""reader = [ readerType = "CNTKTextFormatReader"
                 file = "{path}"
                 input = [ x = [ dim = 8 ; format = "dense" ] ; y = [ dim = 1000 ; format = "sparse" ] ] ]"""
    source = recordkit.from_config(cfg, max_sweeps=1)
    assert source.memory.max_memory is None and not source.memory.capped


# -- what the engine holds follows the plan --------------------------------------------------------
@pytest.mark.parametrize("window,prefetch", [(2, 2), (4, 0), (None, 1)])
def test_chunks_held_never_exceed_the_planned_most_over_two_sweeps(tmp_path, window, prefetch):
    r = reader(corpus(tmp_path, sequences=900))
    source = MinibatchSource(r, randomize=True, window=window, seed=2, max_sweeps=2, prefetch_chunks=prefetch,
                             max_memory=None)
    order = source.randomizer.sweep(0).chunk
    nbytes = np.ones(len(r.chunks), dtype=np.int64)
    est = np.concatenate([r.sequence_lengths(c.id) for c in r.chunks])
    base = np.concatenate([[0], np.cumsum([c.num_sequences for c in r.chunks])])
    lens = est[base[order] + source.randomizer.sweep(0).index]
    ends = minibatch_ends(lens, 64)
    _, most = memory.held_peak(order, nbytes, prefetch=prefetch, steps=ends)
    seen = 0
    while source.next_minibatch(64) is not None:
        seen = max(seen, len(source.held_chunks()) + source.loads_under_way())
    # sweep 1 has its own order; chunks carried over from sweep 0 are dropped unless needed soon
    assert seen <= most + 1


def test_chunks_left_from_the_previous_sweep_are_not_kept_until_their_late_use(tmp_path):
    r = reader(corpus(tmp_path, sequences=900))
    source = MinibatchSource(r, randomize=True, window=2, seed=4, max_sweeps=3, prefetch_chunks=0, max_memory=None)
    most = 0
    while source.next_minibatch(32) is not None:
        most = max(most, len(source.held_chunks()))
    assert most <= 4  # a 2-chunk window, one more across a minibatch, one more across a sweep end


def test_dataloader_workers_share_the_default_bound(tmp_path, monkeypatch):
    torch_data = pytest.importorskip("torch.utils.data")
    monkeypatch.setattr(memory, "available_memory", lambda: 8 << 30)
    monkeypatch.setattr(torch_data, "get_worker_info", lambda: type("Info", (), {"num_workers": 4})())
    source = MinibatchSource(reader(corpus(tmp_path)), randomize=True, max_sweeps=1)
    assert source.memory.max_memory == (2 << 30) // 4


def test_a_checkpoint_resumes_with_its_window_where_another_bound_chose_another(tmp_path):
    path = corpus(tmp_path, sequences=900)
    roomy = MinibatchSource(reader(path), randomize=True, seed=6, max_sweeps=2, max_memory="1GB")
    for _ in range(5):
        roomy.next_minibatch(48)
    state = roomy.get_checkpoint_state()
    rest = read_all(roomy, 48)
    small = int(memory.chunk_bytes(reader(path)).sum() * 0.5)
    with pytest.warns(RecordkitWarning, match="window reduced"):
        tight = MinibatchSource(reader(path), randomize=True, seed=6, max_sweeps=2, max_memory=small)
    assert tight.memory.window is not None
    with pytest.warns(RecordkitWarning, match="checkpoint's randomization window .* is kept"):
        tight.restore_from_checkpoint(state)
    assert tight.memory.window is None and not tight.memory.fits
    assert read_all(tight, 48) == rest


def test_a_checkpoint_of_an_explicitly_other_window_is_still_refused(tmp_path):
    path = corpus(tmp_path)
    a = MinibatchSource(reader(path), randomize=True, window=5, seed=6, max_sweeps=1, max_memory=None)
    a.next_minibatch(32)
    b = MinibatchSource(reader(path), randomize=True, window=3, seed=6, max_sweeps=1, max_memory=None)
    with pytest.raises(ValueError, match="another randomization setting"):
        b.restore_from_checkpoint(a.get_checkpoint_state())
    assert b.randomizer.window == 3
