"""MinibatchSource: CNTK's randomization, minibatch cutting, sweeps, partitions, checkpoints."""
import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

from helpers import dense, sparse, write
from recordkit.engine.deserializer import ChunkInfo
from recordkit.engine.randomizer import BlockRandomizer
from recordkit.engine.source import MinibatchSource
from recordkit.formats.ctf import CTFReader


def values(order):
    return [int(c * 2 + i) for c, i in zip(order.chunk, order.index)]


# ------------------------------------------------------------------------------------------------
# the randomizer reproduces CNTK 2.7 draw for draw (ReaderLibTests.cpp expectations, spec 5.3)

def test_whole_data_window_gives_cntks_orders_for_two_sweeps():
    r = BlockRandomizer([ChunkInfo(i, 2, 2) for i in range(5)], window=10**9, sample_based=True, seed=0)
    assert values(r.sweep(0)) == [6, 3, 1, 5, 9, 0, 4, 2, 7, 8]
    assert values(r.sweep(1)) == [3, 0, 8, 4, 7, 5, 2, 9, 1, 6]


def test_sample_window_of_four_gives_cntks_order():
    r = BlockRandomizer([ChunkInfo(i, 2, 2) for i in range(5)], window=4, sample_based=True, seed=0)
    assert values(r.sweep(0)) == [8, 9, 1, 0, 6, 7, 2, 3, 4, 5]


def test_ten_chunks_window_eighteen_gives_cntks_order():
    r = BlockRandomizer([ChunkInfo(i, 2, 2) for i in range(10)], window=18, sample_based=True, seed=0)
    assert values(r.sweep(0)) == [18, 19, 7, 14, 6, 9, 8, 15, 5, 2, 10, 13, 16, 17, 1, 4, 3, 12, 11, 0]


def test_mt19937_64_is_the_standard_generator():
    from recordkit.engine import _randomize
    draws = _randomize.mt19937_64_draws(5489, 10000)
    assert int(draws[0]) == 14514284786278117030 and int(draws[-1]) == 9981545732273789042


def test_every_sweep_is_a_permutation_and_windows_keep_sequences_near_their_chunk():
    chunks = [ChunkInfo(i, 7, 7) for i in range(40)]
    for window in (1, 3, 8):
        r = BlockRandomizer(chunks, window=window, seed=11)
        for sweep in range(3):
            order = r.sweep(sweep)
            seen = sorted(zip(order.chunk.tolist(), order.index.tolist()))
            assert seen == [(c, i) for c in range(40) for i in range(7)]
            perm = r.chunk_permutation(sweep)
            rank = np.argsort(perm)  # randomized position of each original chunk
            pos_chunk = np.repeat(np.arange(40), 7)  # randomized chunk owning each position
            distance = np.abs(rank[order.chunk] - pos_chunk)
            assert distance.max() <= window  # a sequence never travels beyond the window


def test_chunk_based_window_edges():
    r = BlockRandomizer([ChunkInfo(i, 1, 1) for i in range(10)], window=4)
    b, e = r.windows(np.arange(10))
    assert list(zip(b, e))[:3] == [(0, 4), (0, 4), (0, 4)] and list(zip(b, e))[-1] == (6, 10)
    assert all(e - b == 4 for b, e in zip(b, e))


# ------------------------------------------------------------------------------------------------
# minibatches over real files

def lines_file(tmp_path, n, name="d.ctf", lengths=None):
    out = []
    for k in range(n):
        for t in range(lengths[k] if lengths else 1):
            out.append(f"{k} |x {k}.{t} 1 |y {k % 5}:1")
    return write(tmp_path, "\n".join(out) + "\n", name)


STREAMS = [dense("x", 2), sparse("y", 5)]


def keys_of(mb):
    return mb.keys.tolist()


def test_cntk_io_test_four_samples_three_sweeps(tmp_path):
    src = MinibatchSource(CTFReader(lines_file(tmp_path, 4), STREAMS), randomize=False, max_sweeps=3)
    sizes = [mb.num_samples for mb in src.minibatches(5)]
    assert sizes == [5, 5, 2] and src.next_minibatch(5) is None


def test_cntk_io_test_max_samples(tmp_path):
    src = MinibatchSource(CTFReader(lines_file(tmp_path, 4), STREAMS), randomize=False, max_samples=11)
    assert [mb.num_samples for mb in src.minibatches(5)] == [5, 5, 1]
    src = MinibatchSource(CTFReader(lines_file(tmp_path, 4), STREAMS), randomize=False, max_samples=1)
    mb = src.next_minibatch(5)
    assert mb.num_samples == 1 and not mb.end_of_sweep and src.next_minibatch(5) is None


def test_seed_increments_every_sweep(tmp_path):
    reader = CTFReader(lines_file(tmp_path, 30), STREAMS, chunk_size=60)
    a = MinibatchSource(reader, seed=0, max_sweeps=2)
    both = [k for mb in a.minibatches(7) for k in keys_of(mb)]
    b = MinibatchSource(reader, seed=1, max_sweeps=1)
    assert both[30:] == [k for mb in b.minibatches(7) for k in keys_of(mb)]
    assert both[:30] != both[30:] and sorted(both[:30]) == list(range(30))


def test_same_seed_same_order_every_run(tmp_path):
    reader = CTFReader(lines_file(tmp_path, 50), STREAMS, chunk_size=80)
    runs = [[k for mb in MinibatchSource(reader, seed=5, window=3, max_sweeps=2).minibatches(9) for k in keys_of(mb)]
            for _ in range(2)]
    assert runs[0] == runs[1]


def test_minibatches_hold_whole_sequences_and_at_least_one(tmp_path):
    lengths = [3, 1, 4, 1, 5, 9, 2, 6]
    src = MinibatchSource(CTFReader(lines_file(tmp_path, 8, lengths=lengths), STREAMS), randomize=False, max_sweeps=1)
    got = [(keys_of(mb), mb.num_samples) for mb in src.minibatches(5)]
    assert got == [([0, 1], 4), ([2, 3], 5), ([4], 5), ([5], 9), ([6], 2), ([7], 6)]


def test_defines_mb_size_stream_counts_the_samples(tmp_path):
    text = "".join(f"{k} |f 1 |f2 1{' |l 1' if t == 0 else ''}\n" for k in range(6) for t in range(3))
    p = write(tmp_path, text)
    streams = [dense("f", 1), dense("f2", 1), dense("l", 1, defines_mb_size=True)]
    mb = MinibatchSource(CTFReader(p, streams), randomize=False).next_minibatch(2)
    assert mb.num_sequences == 2 and mb["f"].num_samples == 6 and mb["l"].num_samples == 2


def test_dense_and_sparse_packing(tmp_path):
    lengths = [2, 3, 1]
    src = MinibatchSource(CTFReader(lines_file(tmp_path, 3, lengths=lengths), STREAMS, precision="double"),
                          randomize=False, max_sweeps=1)
    mb = src.next_minibatch(100)
    x = mb["x"]
    assert x.data.shape == (3, 3, 2) and x.data.dtype == np.float64
    assert x.mask.tolist() == [[True, True, False], [True, True, True], [True, False, False]]
    assert x.data[1, 2].tolist() == [1.2, 1] and x.data[0, 2].tolist() == [0, 0]
    y = mb["y"]
    assert y.csr.shape == (6, 5) and y.seq_offsets.tolist() == [0, 2, 5, 6]
    assert y.csr[2].toarray().tolist() == [[0, 1, 0, 0, 0]]
    assert [s.shape for s in y.as_sequences()] == [(2, 5), (3, 5), (1, 5)]
    assert y.asarray().shape == (3, 3, 5) and y.asarray()[1, 2, 1] == 1


def test_end_of_sweep_is_reported_and_minibatches_cross_into_the_next_sweep(tmp_path):
    src = MinibatchSource(CTFReader(lines_file(tmp_path, 5), STREAMS), randomize=False)
    a, b = src.next_minibatch(3), src.next_minibatch(3)
    assert (keys_of(a), a.end_of_sweep) == ([0, 1, 2], False)
    assert (keys_of(b), b.end_of_sweep) == ([3, 4, 0], True)


def test_frame_mode_requires_single_sample_sequences(tmp_path):
    src = MinibatchSource(CTFReader(lines_file(tmp_path, 4, lengths=[1, 1, 2, 1]), STREAMS), randomize=False,
                          frame_mode=True)
    assert src.next_minibatch(2).num_samples == 2
    with pytest.raises(ValueError, match="frame mode"):
        src.next_minibatch(2)


def test_sequences_dropped_for_errors_are_skipped(tmp_path):
    p = write(tmp_path, "".join(f"|x {'bad' if k in (2, 3) else k} 0 |y 1:1\n" for k in range(8)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src = MinibatchSource(CTFReader(p, STREAMS, max_errors=5), randomize=False, max_sweeps=1)
        keys = [k for mb in src.minibatches(3) for k in keys_of(mb)]
    assert keys == [0, 1, 4, 5, 6, 7]


def test_max_samples_and_max_sweeps_are_exclusive(tmp_path):
    with pytest.raises(ValueError, match="mutually exclusive"):
        MinibatchSource(CTFReader(lines_file(tmp_path, 3), STREAMS), max_samples=1, max_sweeps=1)


# ------------------------------------------------------------------------------------------------
# partitions

@pytest.mark.parametrize("workers", [2, 3, 7])
@pytest.mark.parametrize("randomize", [False, True])
def test_workers_get_disjoint_balanced_shares_covering_each_sweep(tmp_path, workers, randomize):
    lengths = [1 + (k * 7) % 5 for k in range(60)]
    reader = CTFReader(lines_file(tmp_path, 60, lengths=lengths), STREAMS, chunk_size=300)
    per_worker = []
    for w in range(workers):
        src = MinibatchSource(reader, randomize=randomize, window=2, seed=3, max_sweeps=2)
        per_worker.append([(s, k) for mb in src.minibatches(8, num_data_partitions=workers, partition_index=w)
                           for s, k in zip(mb.sweeps.tolist(), keys_of(mb))])
    for sweep in (0, 1):
        shares = [[k for s, k in pairs if s == sweep] for pairs in per_worker]
        flat = [k for share in shares for k in share]
        assert sorted(flat) == list(range(60))  # every sequence exactly once per sweep
        samples = [sum(lengths[k] for k in share) for share in shares]
        assert max(samples) - min(samples) <= 2 * max(lengths)  # near-equal sample counts


def test_more_workers_than_chunks_leaves_nobody_empty(tmp_path):
    reader = CTFReader(lines_file(tmp_path, 8), STREAMS)  # a single chunk
    assert len(reader.chunks) == 1
    for w in range(4):
        src = MinibatchSource(reader, randomize=True, max_sweeps=1)
        got = [k for mb in src.minibatches(10, num_data_partitions=4, partition_index=w) for k in keys_of(mb)]
        assert len(got) == 2


def test_bad_partition_arguments(tmp_path):
    src = MinibatchSource(CTFReader(lines_file(tmp_path, 3), STREAMS))
    with pytest.raises(ValueError, match="partition_index"):
        src.next_minibatch(2, num_data_partitions=2, partition_index=2)


# ------------------------------------------------------------------------------------------------
# checkpoints

def make_source(path, **kw):
    return MinibatchSource(CTFReader(path, STREAMS, chunk_size=200), seed=7, window=3, **kw)


@pytest.mark.parametrize("stop_after", [0, 1, 5, 13, 29])
def test_restore_continues_with_exactly_the_next_minibatches(tmp_path, stop_after):
    lengths = [1 + (k * 3) % 4 for k in range(40)]
    p = lines_file(tmp_path, 40, lengths=lengths)
    reference = [(keys_of(mb), mb["x"].data.tolist()) for mb in make_source(p, max_sweeps=3).minibatches(6)]
    src = make_source(p, max_sweeps=3)
    for _ in range(stop_after):
        src.next_minibatch(6)
    state = json.loads(json.dumps(src.get_checkpoint_state()))  # JSON-able
    fresh = make_source(p, max_sweeps=3)
    fresh.restore_from_checkpoint(state)
    rest = [(keys_of(mb), mb["x"].data.tolist()) for mb in fresh.minibatches(6)]
    assert rest == reference[stop_after:]


def test_restore_in_a_fresh_process(tmp_path):
    lengths = [1 + (k * 5) % 3 for k in range(50)]
    p = lines_file(tmp_path, 50, lengths=lengths)
    code = (
        "import json,sys\n"
        "from recordkit import StreamSpec\nfrom recordkit.formats.ctf import CTFReader\n"
        "from recordkit.engine.source import MinibatchSource\n"
        "streams=[StreamSpec('x','dense',2),StreamSpec('y','sparse',5)]\n"
        "src=MinibatchSource(CTFReader(sys.argv[1],streams,chunk_size=200),seed=7,window=3,max_sweeps=4)\n"
        "state=json.loads(sys.argv[2])\n"
        "if state: src.restore_from_checkpoint(state)\n"
        "out=[]\n"
        "for i in range(int(sys.argv[3])):\n"
        "    mb=src.next_minibatch(7)\n"
        "    if mb is None: break\n"
        "    out.append(mb.keys.tolist())\n"
        "print(json.dumps({'mbs':out,'state':src.get_checkpoint_state()}))\n"
    )

    def run(state, n):
        out = subprocess.run([sys.executable, "-c", code, str(p), json.dumps(state), str(n)],
                             capture_output=True, text=True, check=True).stdout
        return json.loads(out)

    full = run(None, 1000)["mbs"]
    rng = np.random.default_rng(1)
    got, state = [], None
    while True:
        step = run(state, int(rng.integers(1, 9)))
        got += step["mbs"]
        state = step["state"]
        if state["exhausted"] or not step["mbs"]:
            break
    assert got == full and len(full) > 20


def test_checkpoint_from_other_data_is_refused(tmp_path):
    a = make_source(lines_file(tmp_path, 40, "a.ctf"))
    b = make_source(lines_file(tmp_path, 41, "b.ctf"))
    a.next_minibatch(3)
    with pytest.raises(ValueError, match="other data"):
        b.restore_from_checkpoint(a.get_checkpoint_state())


# ------------------------------------------------------------------------------------------------
# truncated BPTT

def test_truncated_bptt_cuts_sequences_across_minibatches(tmp_path):
    lengths = [5, 2, 7]
    p = lines_file(tmp_path, 3, lengths=lengths)
    src = MinibatchSource(CTFReader(p, STREAMS), randomize=False, max_sweeps=1, truncation_length=3)
    mbs = list(src.minibatches(6))  # 2 slots x 3 steps
    x = [mb["x"].data[:, :, 0] for mb in mbs]
    # slot 0 takes sequence 0 (5) then 2's...; slot 1 takes sequence 1 (2) then 2 (7)
    first = mbs[0]
    assert first["x"].data.shape == (2, 3, 2)
    assert first.extra["sequence_start"].tolist() == [[True, False, False], [True, False, True]]
    assert first.extra["continues"].tolist() == [False, False]
    assert mbs[1].extra["continues"].tolist() == [True, True]
    # every sample is delivered exactly once, in order within its sequence
    seen = {}
    for mb in mbs:
        keys, mask = mb.extra["keys"], mb["x"].mask
        for s in range(2):
            for t in range(3):
                if mask[s, t]:
                    seen.setdefault(int(keys[s, t]), []).append(round(float(mb["x"].data[s, t, 0]), 3))
    assert {k: len(v) for k, v in seen.items()} == {0: 5, 1: 2, 2: 7}
    assert seen[2] == [round(2 + t / 10, 3) for t in range(7)]
    assert sum(int(mb["x"].mask.sum()) for mb in mbs) == 14 and len(x) >= 3


def test_bptt_checkpoint_resumes_mid_sequence(tmp_path):
    p = lines_file(tmp_path, 6, lengths=[5, 2, 7, 3, 4, 6])
    make = lambda: MinibatchSource(CTFReader(p, STREAMS), seed=2, max_sweeps=2, truncation_length=3)
    ref = [mb["x"].data.tolist() for mb in make().minibatches(6)]
    src = make()
    for _ in range(3):
        src.next_minibatch(6)
    state = json.loads(json.dumps(src.get_checkpoint_state()))
    fresh = make()
    fresh.restore_from_checkpoint(state)
    assert [mb["x"].data.tolist() for mb in fresh.minibatches(6)] == ref[3:]


def test_bptt_needs_equal_stream_lengths(tmp_path):
    p = write(tmp_path, "0 |a 1 |b 1\n0 |a 2\n")
    src = MinibatchSource(CTFReader(p, [dense("a", 1), dense("b", 1)]), randomize=False, truncation_length=2)
    with pytest.raises(ValueError, match="same length"):
        src.next_minibatch(4)


# ------------------------------------------------------------------------------------------------
# epochs and separate worker processes

def test_epoch_size_cuts_the_timeline_like_cntk(tmp_path):
    # 10 one-sample sequences; epochs of 4 samples: minibatches never cross an epoch end
    src = MinibatchSource(CTFReader(lines_file(tmp_path, 10), STREAMS), randomize=False, epoch_size=4,
                          max_sweeps=2)
    got = [(mb.epoch, keys_of(mb), mb.end_of_epoch) for mb in src.minibatches(3)]
    assert got[:4] == [(0, [0, 1, 2], False), (0, [3], True), (1, [4, 5, 6], False), (1, [7], True)]
    assert [k for _, ks, _ in got for k in ks] == list(range(10)) * 2


def test_epoch_starts_at_the_first_sequence_boundary_after_it(tmp_path):
    # sequence lengths 3: epochs of 4 samples start at sequences starting at or after 4, 8, ...
    src = MinibatchSource(CTFReader(lines_file(tmp_path, 6, lengths=[3] * 6), STREAMS), randomize=False,
                          epoch_size=4, max_sweeps=1)
    # starts 0 3 | 6 | 9 | 12 15: epoch e holds the sequences starting in [4e, 4e + 4)
    assert [(mb.epoch, keys_of(mb)) for mb in src.minibatches(100)] == [(0, [0, 1]), (1, [2]), (2, [3]), (3, [4, 5])]


WORKER_SCRIPT = (
    "import json,sys\n"
    "from recordkit import StreamSpec\nfrom recordkit.formats.ctf import CTFReader\n"
    "from recordkit.engine.source import MinibatchSource\n"
    "path, n, i = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])\n"
    "src=MinibatchSource(CTFReader(path,[StreamSpec('x','dense',2),StreamSpec('y','sparse',5)],chunk_size=150),\n"
    "                    seed=4, window=2, max_sweeps=2, num_data_partitions=n, partition_index=i)\n"
    "out=[]\n"
    "while (mb:=src.next_minibatch(5)) is not None:\n"
    "    out += [[int(s), int(k), int(l)] for s, k, l in zip(mb.sweeps, mb.keys, mb.lengths)]\n"
    "print(json.dumps(out))\n"
)


def test_worker_processes_read_disjoint_complete_shares(tmp_path):
    lengths = [1 + (k * 11) % 4 for k in range(45)]
    p = lines_file(tmp_path, 45, lengths=lengths)
    n = 3
    procs = [subprocess.Popen([sys.executable, "-c", WORKER_SCRIPT, str(p), str(n), str(i)], stdout=subprocess.PIPE,
                              text=True) for i in range(n)]
    results = [json.loads(proc.communicate(timeout=60)[0]) for proc in procs]
    for sweep in (0, 1):
        shares = [[k for s, k, _ in r if s == sweep] for r in results]
        assert sorted(k for share in shares for k in share) == list(range(45))
        samples = [sum(lengths[k] for k in share) for share in shares]
        assert max(samples) - min(samples) <= 2 * max(lengths)  # each cut is off by less than a sequence


def test_a_source_dropped_without_close_frees_its_deserializer_without_the_garbage_collector(tmp_path):
    """The chunk cache calls the source back on each load; holding that callback strongly made
    source and cache a reference cycle, so a dropped source kept its reader (open file, read
    buffers) and its chunks alive until a collection ran."""
    import gc
    import weakref

    from helpers import write_valued_cbf
    from recordkit.formats.cbf import CBFReader
    reader = CBFReader(write_valued_cbf(tmp_path / "v.cbf", 60, longest=3, chunk_size=512))
    # no prefetch: a background load still under way would hold the reader until it ends
    src = MinibatchSource(reader, randomize=True, window=2, max_sweeps=1, seed=1, prefetch_chunks=0)
    src.next_minibatch(7)
    gone = weakref.ref(reader)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        del src, reader
        assert gone() is None
    finally:
        if was_enabled:
            gc.enable()
