"""A CBF chunk read and gathered in parts on several threads (``load_chunk(cid, threads=N)``,
``decode_chunk(parts=N)``) gives exactly the arrays one thread gives, and the same errors."""
import struct
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import scipy.sparse as sp

from helpers import dense, sparse
from recordkit import FormatError
from recordkit.formats.cbf import CBFReader, CBFWriter, _kernel
from recordkit.formats.cbf import reader as cbf_reader

STREAMS = [dense("x", 3), sparse("y", 40), dense("z", 1), sparse("w", 5)]


def _write(path, n, seed=0, chunk_size=1 << 20):
    """Sequences of 0-5 samples per stream (all-empty samples and sequences included)."""
    rng = np.random.default_rng(seed)
    with CBFWriter(path, STREAMS, chunk_size=chunk_size) as w:
        for k in range(n):
            nx, ny, nz, nw = (int(v) for v in rng.integers(0, 6, size=4))
            if nx == ny == nz == nw == 0:
                nz = 1
            w.write({"x": rng.normal(size=(nx, 3)).astype(np.float32),
                     "y": sp.random(ny, 40, density=0.1, random_state=k, dtype=np.float32, format="csr"),
                     "z": rng.normal(size=(nz, 1)).astype(np.float32),
                     "w": sp.csr_matrix((nw, 5), dtype=np.float32)})  # sparse samples without entries
    return CBFReader(path)


def _decode(reader, cid, parts, run_parts=None):
    info, hs = reader.chunks[cid], reader.header.streams
    buf = np.frombuffer(reader._pread(info.offset, info.size), np.uint8)
    return _kernel.decode_chunk(buf, info.num_sequences, [s.format == "sparse" for s in hs],
                                [s.dim for s in hs], [s.dtype.itemsize for s in hs], parts=parts, run_parts=run_parts)


def _assert_same_columns(a, b):
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            assert (u is None) == (v is None)
            if u is not None:
                assert u.dtype == v.dtype
                np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("parts", [2, 3, 5, 64, 5000])
def test_gathering_in_parts_gives_the_arrays_one_pass_gives(tmp_path, parts):
    r = _write(tmp_path / "a.cbf", 700, seed=parts, chunk_size=6000)
    assert len(r.chunks) >= 3
    with ThreadPoolExecutor(3) as pool:
        def on_pool(gather, n):
            list(pool.map(gather, range(n)))
        for cid in range(len(r.chunks)):
            meta1, cols1, prob1 = _decode(r, cid, 1)
            assert prob1 is None
            for run_parts in (None, on_pool):  # one after another, and on threads
                meta, cols, prob = _decode(r, cid, parts, run_parts)
                assert prob is None
                np.testing.assert_array_equal(meta, meta1)
                _assert_same_columns(cols, cols1)


def test_a_chunk_without_sequences_gathers_to_empty_columns_in_any_number_of_parts():
    for parts in (1, 4):
        meta, cols, prob = _kernel.decode_chunk(np.zeros(0, np.uint8), 0, [False, True], [3, 7], [4, 4], parts=parts)
        assert prob is None and len(meta) == 0
        assert len(cols[0][0]) == 0 and cols[1][2].tolist() == [0]


def test_a_part_the_caller_did_not_run_is_an_error_not_uninitialised_data(tmp_path):
    r = _write(tmp_path / "a.cbf", 50)
    with pytest.raises(RuntimeError, match="did not gather part 1 of 3"):
        _decode(r, 0, 3, run_parts=lambda gather, n: [gather(k) for k in range(n) if k != 1])
    with pytest.raises(ValueError, match="parts 0"):
        _decode(r, 0, 0)


@pytest.mark.parametrize("threads", [2, 3])
def test_load_chunk_with_threads_reads_and_gathers_in_parts_to_the_same_chunk(tmp_path, monkeypatch, threads):
    monkeypatch.setattr(cbf_reader, "_SPLIT_BYTES", 0)  # split even these small chunks
    r = _write(tmp_path / "a.cbf", 900, seed=threads, chunk_size=9000)
    for cid in range(len(r.chunks)):
        one, many = r.load_chunk(cid), r.load_chunk(cid, threads=threads)
        assert one.keys.tolist() == many.keys.tolist() and one.lengths.tolist() == many.lengths.tolist()
        for name, col in one.columns.items():
            other = many.columns[name]
            for field in ("values", "indices", "indptr", "seq_offsets"):
                if hasattr(col, field):
                    np.testing.assert_array_equal(getattr(col, field), getattr(other, field))
    r.close()


def test_a_damaged_chunk_gives_the_same_error_with_threads(tmp_path, monkeypatch):
    monkeypatch.setattr(cbf_reader, "_SPLIT_BYTES", 0)
    r = _write(tmp_path / "a.cbf", 300)
    info = r.chunks[0]
    r.close()
    data = bytearray((tmp_path / "a.cbf").read_bytes())
    # the first sequence's sample count of stream x, 4 bytes after the chunk's per-sequence table
    at = info.offset + 4 * info.num_sequences
    data[at:at + 4] = struct.pack("<I", 0x7FFFFFFF)
    (tmp_path / "b.cbf").write_bytes(bytes(data))
    errors = []
    for threads in (1, 2):
        with pytest.raises(FormatError) as e:
            CBFReader(tmp_path / "b.cbf").load_chunk(0, threads=threads)
        errors.append((str(e.value), e.value.offset))
    assert errors[0] == errors[1] and "runs past the end of the chunk" in errors[0][0]
    assert errors[0][1] == at


def test_a_file_shrunk_under_a_split_read_names_the_piece_that_came_short(tmp_path, monkeypatch):
    monkeypatch.setattr(cbf_reader, "_SPLIT_BYTES", 0)
    r = _write(tmp_path / "a.cbf", 400, chunk_size=20000)
    info = r.chunks[0]
    real = r._source.pread_into

    def pread_into(offset, view):  # the file ends 100 bytes short of the chunk's end (a truncated
        # file itself is caught by the source first: tests/test_storage_versions.py)
        return min(real(offset, view), max(0, info.offset + info.size - 100 - offset))
    monkeypatch.setattr(r._source, "pread_into", pread_into)
    with pytest.raises(FormatError, match="file shrank while being read: chunk 0") as e:
        r.load_chunk(0, threads=2)
    assert e.value.offset > info.offset  # the second piece's offset: the first read in full
    r.close()


def test_a_failed_piece_read_gives_the_buffer_back_only_after_every_piece_has_ended(tmp_path, monkeypatch):
    """One piece's read fails while another is still reading: the shared buffer must not go back
    to the pool (where the next load would take it) before the slow piece is done with it."""
    import threading
    import time

    monkeypatch.setattr(cbf_reader, "_SPLIT_BYTES", 0)
    r = _write(tmp_path / "a.cbf", 400, chunk_size=20000)
    real = r._source.pread_into
    slow_done = threading.Event()

    def pread_into(offset, view):
        if offset == r.chunks[0].offset:  # the first piece: the file "shrank"
            return 0
        time.sleep(0.2)  # the second piece: slow, then fine
        got = real(offset, view)
        slow_done.set()
        return got
    monkeypatch.setattr(r._source, "pread_into", pread_into)
    gave = []
    monkeypatch.setattr(r._buffers, "give", lambda buf: gave.append(slow_done.is_set()))
    with pytest.raises(FormatError, match="file shrank"):
        r.load_chunk(0, threads=2)
    assert gave == [True]
