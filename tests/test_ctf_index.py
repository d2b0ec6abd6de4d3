"""The sequence index: chunking by bytes, the index cache, parallel chunk loading."""
import os
import time

import numpy as np
import pytest

from helpers import PEAK_RSS_CODE, dense, read_all, sparse, write
from recordkit.formats.ctf import CTFReader
from recordkit.formats.ctf import index as ctf_index


def corpus(tmp_path, n=200):
    lines = []
    for i in range(n):
        for t in range(1 + i % 3):
            lines.append(f"{i} |a {i}.{t} {t} |s {i % 7}:{t + 1}")
    return write(tmp_path, "\n".join(lines) + "\n")


STREAMS = [dense("a", 2), sparse("s", 7)]


def test_chunks_respect_chunk_size_and_never_split_a_sequence(tmp_path):
    p = corpus(tmp_path)
    r = CTFReader(p, STREAMS, chunk_size=500)
    assert len(r.chunks) > 5
    size = os.path.getsize(p)
    assert r.chunks[0].offset == 0 and r.chunks[-1].offset + r.chunks[-1].size == size
    for a, b in zip(r.chunks, r.chunks[1:]):
        assert a.offset + a.size == b.offset
        assert a.size <= 500 or a.num_sequences == 1
    assert sum(c.num_sequences for c in r.chunks) == 200
    assert sum(c.num_samples for c in r.chunks) == sum(1 + i % 3 for i in range(200))
    keys = np.concatenate([r.load_chunk(c.id).keys for c in r.chunks])
    assert keys.tolist() == list(range(200))


def test_sequence_larger_than_chunk_size_gets_its_own_chunk(tmp_path):
    p = write(tmp_path, "1 |a 1 1\n2 |a 2 2\n2 |a 2 2\n2 |a 2 2\n3 |a 3 3\n")
    r = CTFReader(p, [dense("a", 2)], chunk_size=10)
    assert [c.num_sequences for c in r.chunks] == [1, 1, 1]
    assert r.chunks[1].num_samples == 3


def test_parallel_and_serial_chunk_loading_agree(tmp_path):
    p = corpus(tmp_path)
    r = CTFReader(p, STREAMS, chunk_size=300)
    serial = list(r.iter_chunks(threads=1))
    parallel = list(CTFReader(p, STREAMS, chunk_size=300).iter_chunks(threads=2))
    assert len(serial) == len(parallel) == len(r.chunks)
    for a, b in zip(serial, parallel):
        assert a.keys.tolist() == b.keys.tolist()
        np.testing.assert_array_equal(a.columns["a"].values, b.columns["a"].values)
        np.testing.assert_array_equal(a.columns["s"].indptr, b.columns["s"].indptr)


def test_chunk_boundaries_do_not_change_the_data(tmp_path):
    p = corpus(tmp_path)
    ref = [(k, d["a"].tolist(), d["s"].toarray().tolist()) for k, d in read_all(p, STREAMS)[0]]
    for cs in (1, 64, 1000, 1 << 30):
        got = [(k, d["a"].tolist(), d["s"].toarray().tolist()) for k, d in read_all(p, STREAMS, chunk_size=cs)[0]]
        assert got == ref


def test_blocks_smaller_than_a_line_are_handled(tmp_path, monkeypatch):
    monkeypatch.setattr(ctf_index, "BLOCK_SIZE", 7)
    p = corpus(tmp_path, 30)
    small = [(k, d["a"].tolist()) for k, d in read_all(p, STREAMS)[0]]
    monkeypatch.setattr(ctf_index, "BLOCK_SIZE", 4 << 20)
    assert small == [(k, d["a"].tolist()) for k, d in read_all(p, STREAMS)[0]]


def test_index_cache_is_written_and_reused(tmp_path):
    p = corpus(tmp_path)
    r1 = CTFReader(p, STREAMS, cache_index=True)
    cache = ctf_index.cache_path(str(p), False)
    assert os.path.exists(cache) and not r1.index_from_cache
    r2 = CTFReader(p, STREAMS, cache_index=True)
    assert r2.index_from_cache
    np.testing.assert_array_equal(r1.index.offsets, r2.index.offsets)
    np.testing.assert_array_equal(r1.index.keys, r2.index.keys)
    assert [c for c in r1.chunks] == [c for c in r2.chunks]
    assert not any(n.endswith((".tmp", ".part")) for n in os.listdir(tmp_path))


def test_stale_index_cache_is_rebuilt(tmp_path):
    p = corpus(tmp_path)
    CTFReader(p, STREAMS, cache_index=True)
    time.sleep(0.01)
    p.write_text("5 |a 1 2 |s 1:1\n6 |a 3 4 |s 2:1\n")
    r = CTFReader(p, STREAMS, cache_index=True)
    assert not r.index_from_cache
    assert [s.key for s in r] == [5, 6]
    assert CTFReader(p, STREAMS, cache_index=True).index_from_cache


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "wrong-offsets"])
def test_damaged_index_cache_is_ignored_and_rebuilt(tmp_path, damage):
    p = corpus(tmp_path)
    CTFReader(p, STREAMS, cache_index=True)
    cache = ctf_index.cache_path(str(p), False)
    data = open(cache, "rb").read()
    if damage == "truncate":
        open(cache, "wb").write(data[: len(data) // 2])
    elif damage == "garbage":
        open(cache, "wb").write(os.urandom(len(data)))
    elif damage == "empty":
        open(cache, "wb").write(b"")
    else:
        idx = ctf_index.load_cached(str(p), False)
        idx.offsets = idx.offsets + 1000000
        ctf_index.write_cache(str(p), False, idx)
    os.utime(cache, None)
    r = CTFReader(p, STREAMS, cache_index=True)
    assert not r.index_from_cache
    assert [s.key for s in r] == list(range(200))


def test_cache_depends_on_skip_sequence_ids(tmp_path):
    p = corpus(tmp_path, 5)
    CTFReader(p, STREAMS, cache_index=True)
    r = CTFReader(p, STREAMS, cache_index=True, skip_sequence_ids=True)
    assert not r.index_from_cache and len(r.index) == sum(1 + i % 3 for i in range(5))


def test_reader_does_not_modify_its_input(tmp_path):
    p = corpus(tmp_path)
    before = (p.read_bytes(), os.stat(p).st_mtime_ns)
    list(CTFReader(p, STREAMS, cache_index=True))
    assert (p.read_bytes(), os.stat(p).st_mtime_ns) == before


def test_keep_data_in_memory_parses_each_chunk_once(tmp_path):
    p = corpus(tmp_path)
    r = CTFReader(p, STREAMS, keep_data_in_memory=True, chunk_size=400)
    a = r.load_chunk(2)
    assert r.load_chunk(2) is a


def test_peak_memory_follows_chunk_size_not_file_size(tmp_path):
    # a 40 MB file read in 1 MiB chunks must not need memory proportional to the file
    import resource
    import subprocess
    import sys
    line = "|a " + " ".join(["1.5"] * 50) + "\n"
    p = tmp_path / "big.ctf"
    with open(p, "w") as f:
        block = line * 10000
        for _ in range(int(40e6 // len(block)) + 1):
            f.write(block)
    code = (
        PEAK_RSS_CODE + "import sys\n"
        "from recordkit import StreamSpec\nfrom recordkit.formats.ctf import CTFReader\n"
        "r = CTFReader(sys.argv[1], [StreamSpec('a','dense',50)], chunk_size=1<<20)\n"
        "n = sum(c.num_samples for c in r.iter_chunks(threads=2))\n"
        "print(n, peak_rss_kb())\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, check=True).stdout
    n, rss_kb = map(int, out.split())
    assert n == os.path.getsize(p) // len(line)
    base = subprocess.run([sys.executable, "-c", PEAK_RSS_CODE + "import numpy, scipy.sparse, recordkit.formats.ctf\n"
                           "print(peak_rss_kb())"],
                          capture_output=True, text=True, check=True).stdout
    assert rss_kb - int(base) < 25 * 1024, (rss_kb, base)  # well under the 40 MB file


def test_parallel_pieces_report_the_same_errors_as_a_serial_read(tmp_path):
    import warnings
    lines = [f"{i} |a {'x' if i % 37 == 5 else i} 0 |s {i % 7}:1" for i in range(400)]
    p = write(tmp_path, "\n".join(lines) + "\n")

    def run(threads):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            r = CTFReader(p, STREAMS, max_errors=50, chunk_size=2000)
            keys = np.concatenate([c.keys for c in r.iter_chunks(threads=threads)])
        return keys.tolist(), r.errors_counted, [str(w.message) for w in caught]

    serial, parallel = run(1), run(2)
    assert serial == parallel
    assert serial[1] == 11 and 5 not in serial[0] and 42 not in serial[0] and len(serial[0]) == 389


def test_unjoined_pieces_hold_the_same_sequences_in_order(tmp_path):
    p = corpus(tmp_path)
    whole = list(CTFReader(p, STREAMS, chunk_size=700).iter_chunks(threads=2))
    pieces = list(CTFReader(p, STREAMS, chunk_size=700).iter_chunks(threads=2, whole=False))
    assert len(pieces) > len(whole)
    assert np.concatenate([c.keys for c in pieces]).tolist() == np.concatenate([c.keys for c in whole]).tolist()
    np.testing.assert_array_equal(np.concatenate([c.columns["a"].values for c in pieces]),
                                  np.concatenate([c.columns["a"].values for c in whole]))


@pytest.mark.parametrize("block", [7, 64, 4 << 20])
def test_the_scan_reads_straight_into_its_block_where_the_source_can_and_indexes_the_same(tmp_path, monkeypatch, block):
    """A local source is read into the scan's block (pread_into); a source without it (a remote
    one) is read block by block and copied: both give the same index, a line longer than the block
    included (the block grows)."""
    from recordkit.storage import open_source
    monkeypatch.setattr(ctf_index, "BLOCK_SIZE", block)
    p = corpus(tmp_path, 40)

    class PreadOnly:
        def __init__(self, src):
            self._src, self.name, self.size = src, src.name, src.size

        def pread(self, offset, n, cache=True):
            return self._src.pread(offset, n)

    src = open_source(str(p))
    assert hasattr(src, "pread_into")
    a = ctf_index.scan(src, skip_sequence_ids=False)
    b = ctf_index.scan(PreadOnly(src), skip_sequence_ids=False)
    src.close()
    for field in ("offsets", "sizes", "keys", "first_lines", "rows"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert len(a) > 10


def _columns_of(chunk):
    return [chunk.keys.copy(), chunk.columns["a"].values.copy(), chunk.columns["s"].values.copy(),
            chunk.columns["s"].indices.copy(), chunk.columns["s"].indptr.copy()]


@pytest.mark.parametrize("threads", [1, 2])
def test_chunk_loads_in_a_burst_reuse_their_text_buffers_and_loaded_chunks_never_point_into_them(tmp_path, threads):
    """Inside ``retaining_buffers`` the text of each load goes into a buffer the last load gave
    back: the next chunk's text overwrites it, so a chunk already loaded must hold copies. When the
    burst ends the reader holds no text (a memory bound counts only chunks and loads in flight)."""
    p = corpus(tmp_path)
    fresh = [_columns_of(c) for c in CTFReader(p, STREAMS, chunk_size=400).iter_chunks(threads=1)]
    r = CTFReader(p, STREAMS, chunk_size=400)
    with r.retaining_buffers():
        loaded = [r.load_chunk(c.id, threads=threads) for c in r.chunks]  # each overwrites the last text
        assert 0 < r._buffers.held_bytes() <= 2 * (max(c.size for c in r.chunks) + 4096)  # kept, at most 2
    assert r._buffers.held_bytes() == 0
    for chunk, want in zip(loaded, fresh):
        for got, expected in zip(_columns_of(chunk), want):
            np.testing.assert_array_equal(got, expected)
    r.load_chunk(0, threads=threads)
    assert r._buffers.held_bytes() == 0  # a load outside a burst keeps nothing
    r.close()


def test_a_randomized_first_minibatch_loads_its_chunks_as_one_burst(tmp_path):
    from recordkit.engine.source import MinibatchSource
    p = corpus(tmp_path)
    r = CTFReader(p, STREAMS, chunk_size=400)
    held = []
    real = r._load_chunk

    def noting(cid, threads=1):
        held.append(r._buffers.held_bytes())
        return real(cid, threads)
    r._load_chunk = noting
    src = MinibatchSource(r, randomize=True, window=128, max_sweeps=1, seed=1)
    src.next_minibatch(100_000)  # every chunk awaited at once
    assert len(held) == len(r.chunks) and held[0] == 0 and all(h > 0 for h in held[1:])
    assert r._buffers.held_bytes() == 0
    src.close()


@pytest.mark.parametrize("wrapper", ["chunk partition", "mixture"])
def test_a_wrapped_ctf_reader_loads_a_randomized_first_minibatch_as_one_burst_too(tmp_path, wrapper):
    """ChunkPartition and Mixture forward ``retaining_buffers`` to the readers they wrap: inside
    the chunk cache's burst each reader's loads after its first find a text buffer held, and
    after it none is held (they let every buffer go before they forwarded it)."""
    from recordkit.engine.chunk_partition import ChunkPartition
    from recordkit.engine.mixture import Mixture
    from recordkit.engine.source import MinibatchSource
    (tmp_path / "b").mkdir()
    readers = [CTFReader(corpus(tmp_path), STREAMS, chunk_size=400)]
    if wrapper == "mixture":
        readers.append(CTFReader(corpus(tmp_path / "b", 150), STREAMS, chunk_size=400))
    held = {id(r): [] for r in readers}
    for r in readers:
        def noting(cid, threads=1, r=r, real=r._load_chunk):
            held[id(r)].append(r._buffers.held_bytes())
            return real(cid, threads)
        r._load_chunk = noting
    d = ChunkPartition(readers[0], 2, 1) if wrapper == "chunk partition" else Mixture(readers, repeats=[1, 1])
    src = MinibatchSource(d, randomize=True, window=None, max_sweeps=1, seed=1)
    src.next_minibatch(100_000)  # every chunk of the sweep awaited at once
    for r in readers:
        got = held[id(r)]
        assert len(got) >= 3 and got[0] == 0 and all(h > 0 for h in got[1:]), got
        assert r._buffers.held_bytes() == 0
    src.close()


def test_a_chunk_load_that_fails_gives_its_text_buffers_back(tmp_path):
    lines = [f"{i} |a {'x' if i > 150 else i} 0 |s {i % 7}:1" for i in range(200)]
    p = write(tmp_path, "\n".join(lines) + "\n")
    r = CTFReader(p, STREAMS, chunk_size=1 << 20)
    with r.retaining_buffers():
        with pytest.raises(Exception, match="expected a number|malformed|number"):
            r.load_chunk(0, threads=2)
        assert len(r._buffers._spare) == 2  # both pieces' buffers back in the pool, none lost


@pytest.mark.parametrize("hint", [0, 1, 10, 10**9])
def test_the_sparse_entries_hint_reserves_output_but_never_changes_it(tmp_path, hint):
    """ChunkParser.parse reserves each sparse stream's output for ``entries_hint`` entries (the
    reader's sampled estimate); too small, too large (capped by the text) or none, the columns are
    the same."""
    p = corpus(tmp_path)
    r = CTFReader(p, STREAMS)
    idx, text = r.index, p.read_bytes()
    args = (text, 0, idx.offsets, idx.sizes, idx.first_lines, 0, int(idx.rows.sum()))
    base = r._parser.parse(*args)
    got = r._parser.parse(*args, hint)
    assert got[0].tolist() == base[0].tolist()
    for (v, i, pt, c), (v0, i0, pt0, c0) in zip(got[1], base[1]):
        np.testing.assert_array_equal(v, v0)
        np.testing.assert_array_equal(c, c0)
        if i0 is not None:
            np.testing.assert_array_equal(i, i0)
            np.testing.assert_array_equal(pt, pt0)
