"""CBF: writer/reader round trips, chunking, validation errors located by byte offset."""
import struct

import numpy as np
import pytest
import scipy.sparse as sp

from helpers import dense, read_all, sparse, write
from recordkit import FormatError
from recordkit.formats.cbf import CBFReader, CBFWriter
from recordkit.formats.cbf import layout
from recordkit.formats.ctf import CTFReader, write_ctf

STREAMS = [dense("x", 3), sparse("y", 40), dense("z", 1)]


def sequences(n, dtype, seed=5):
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        nx, ny, nz = (int(v) for v in rng.integers(0, 6, size=3))
        if nx == ny == nz == 0:
            nz = 1
        out.append((k, {
            "x": rng.normal(size=(nx, 3)).astype(dtype),
            "y": sp.random(ny, 40, density=0.2, random_state=k, dtype=dtype, format="csr"),
            "z": rng.normal(size=(nz, 1)).astype(dtype),
        }))
    return out


def assert_same(a, b):
    assert len(a) == len(b)
    for (_, x), (_, y) in zip(a, b):
        for name in x:
            if sp.issparse(x[name]):
                assert (x[name] != y[name]).nnz == 0 and x[name].shape == y[name].shape
            else:
                np.testing.assert_array_equal(x[name], y[name])


@pytest.mark.parametrize("precision,dtype", [("float", np.float32), ("double", np.float64)])
@pytest.mark.parametrize("chunk_size", [1, 300, 1 << 20])
def test_write_then_read_gives_the_same_sequences(tmp_path, precision, dtype, chunk_size):
    seqs = sequences(120, dtype)
    p = tmp_path / "o.cbf"
    with CBFWriter(p, STREAMS, precision=precision, chunk_size=chunk_size) as w:
        for key, data in seqs:
            w.write(data)
    r = CBFReader(p)
    assert [s.dtype for s in r.streams] == [np.dtype(dtype)] * 3
    back = [(s.key, s.data) for s in r]
    assert_same(seqs, back)
    assert [s.key for s in CBFReader(p)] == list(range(120))  # CBF keys are ordinals
    if chunk_size == 1:
        assert len(r.chunks) == 120
    if chunk_size == 1 << 20:
        assert len(r.chunks) == 1


def test_chunks_decoded_through_the_reused_read_buffer_keep_their_own_data(tmp_path):
    """A loader thread reads every chunk into one reused buffer: a decoded chunk must own its arrays,
    so loading the next chunks (into the same buffer, of other sizes) leaves the earlier ones intact."""
    p = tmp_path / "o.cbf"
    seqs = sequences(200, np.float32, seed=9)
    with CBFWriter(p, STREAMS, chunk_size=700) as w:
        for _, data in seqs:
            w.write(data)
    r = CBFReader(p)
    assert len(r.chunks) > 5 and len({c.size for c in r.chunks}) > 1
    first = r.load_chunk(0)
    kept = [(s.key, {k: (v.copy() if hasattr(v, "copy") else v) for k, v in s.data.items()}) for s in first]
    loaded = [first] + [r.load_chunk(c.id) for c in r.chunks[1:]] + [r.load_chunk(0)]
    assert_same(kept, [(s.key, s.data) for s in first])
    assert_same(seqs, [(s.key, s.data) for c in loaded[:-1] for s in c])
    assert_same(kept, [(s.key, s.data) for s in loaded[-1]])
    spare = r._buffers._spare  # the buffers went back to the reader's pool, the largest chunk's kept
    assert 1 <= len(spare) <= r._buffers.keep and max(len(b) for b in spare) >= max(c.size for c in r.chunks)
    r.close()


def test_chunks_close_at_chunk_size_and_meta_is_the_longest_stream(tmp_path):
    p = tmp_path / "o.cbf"
    with CBFWriter(p, [dense("a", 2), dense("b", 1)], chunk_size=100) as w:
        for n in range(1, 11):
            w.write({"a": np.ones((n, 2)), "b": np.ones((1, 1))})
    r = CBFReader(p)
    for c in r.chunks:
        lengths = r.sequence_lengths(c.id)
        assert c.num_samples == lengths.sum()
    assert np.concatenate([r.sequence_lengths(c.id) for c in r.chunks]).tolist() == list(range(1, 11))
    # sequence n takes 4 + (4 + 8n) + (4 + 4) bytes: a chunk closes once it reaches 100
    # (24+32+40+48 = 144; 56+64; 72+80; 88+96)
    assert [c.num_sequences for c in r.chunks] == [4, 2, 2, 2]


def test_ctf_to_cbf_to_ctf_round_trip_via_chunks(tmp_path):
    seqs = sequences(200, np.float32)
    src = tmp_path / "in.ctf"
    write_ctf(src, STREAMS, [(k * 7, d) for k, d in seqs])
    cbf = tmp_path / "mid.cbf"
    reader = CTFReader(src, STREAMS, chunk_size=500)
    with CBFWriter(cbf, STREAMS, chunk_size=700) as w:
        for chunk in reader.iter_chunks(threads=2):
            w.write_chunk(chunk)
    from recordkit.formats.ctf import CTFWriter
    back = tmp_path / "back.ctf"
    with CTFWriter(back, STREAMS) as w:
        for chunk in CBFReader(cbf).iter_chunks():
            w.write_chunk(chunk)
    assert_same(seqs, read_all(back, STREAMS)[0])


def test_precision_conversion_and_stream_selection(tmp_path):
    p = tmp_path / "o.cbf"
    with CBFWriter(p, STREAMS, precision="float") as w:
        w.write({"x": np.ones((2, 3)), "y": sp.csr_matrix((1, 40)), "z": np.zeros((1, 1))})
    r = CBFReader(p, {"renamed": "x"}, precision="double")
    assert [s.name for s in r.streams] == ["renamed"] and r.streams[0].dtype == np.float64
    assert r.load_chunk(0).columns["renamed"].values.dtype == np.float64
    with pytest.raises(ValueError, match="no stream 'nope'"):
        CBFReader(p, {"a": "nope"})
    with pytest.raises(ValueError, match="declared dense dim 4"):
        CBFReader(p, [dense("x", 4)])


def test_writer_is_atomic_and_rejects_bad_data(tmp_path):
    p = tmp_path / "o.cbf"
    with pytest.raises(RuntimeError):
        with CBFWriter(p, STREAMS) as w:
            w.write({"x": np.ones((1, 3))})
            raise RuntimeError("killed")
    assert not p.exists() and list(tmp_path.iterdir()) == []
    with CBFWriter(p, STREAMS) as w:
        with pytest.raises(ValueError, match="expected shape"):
            w.write({"x": np.ones((1, 4))})
        with pytest.raises(ValueError, match="not declared"):
            w.write({"q": np.ones((1, 4))})


# ---------------------------------------------------------------------------------------------
# validation: every problem names the file, the byte offset and the chunk or stream

def good_file(tmp_path):
    p = tmp_path / "g.cbf"
    with CBFWriter(p, [dense("d", 2), sparse("s", 10)], chunk_size=40) as w:
        for k in range(4):
            w.write({"d": np.full((2, 2), k), "s": sp.csr_matrix(([1.0, 2.0], ([0, 1], [3, 7])), shape=(2, 10))})
    return p


def damaged(tmp_path, mutate):
    data = bytearray(good_file(tmp_path).read_bytes())
    mutate(data)
    p = tmp_path / "bad.cbf"
    p.write_bytes(bytes(data))
    return p


def load_everything(p):
    r = CBFReader(p)
    for c in r.chunks:
        r.load_chunk(c.id)


def header_offset(data):
    return struct.unpack_from("<q", data, len(data) - 8)[0]


def table_offset(data):
    # one dense stream "d" and one sparse stream "s": 16 + 2 * (1 + 4 + 1 + 1 + 4)
    return header_offset(data) + 16 + 2 * 11


@pytest.mark.parametrize("mutate,match,offset", [
    (lambda d: d.__setitem__(slice(0, 1), b"X"), "not a CNTK binary format file", 0),
    (lambda d: d.__setitem__(slice(8, 12), struct.pack("<I", 2)), "unsupported CBF version 2", 8),
    (lambda d: d.__setitem__(slice(len(d) - 8, len(d)), struct.pack("<q", 10 ** 9)), "outside the file", None),
    (lambda d: d.__setitem__(slice(header_offset(d), header_offset(d) + 1), b"\0"), "no CBF header", None),
    (lambda d: d.__setitem__(slice(table_offset(d) + 16, table_offset(d) + 24), struct.pack("<q", 10 ** 6)),
     "chunk 1 offset 1000000 is outside the data section", None),
    (lambda d: d.__setitem__(slice(table_offset(d) + 16, table_offset(d) + 24), struct.pack("<q", 12)),
     "chunk offsets must increase", None),
    (lambda d: d.__setitem__(slice(table_offset(d) + 8, table_offset(d) + 12), struct.pack("<I", 10 ** 6)),
     "claims 1000000 sequences", None),
])
def test_damaged_headers_are_reported_with_their_offset(tmp_path, mutate, match, offset):
    p = damaged(tmp_path, mutate)
    with pytest.raises(FormatError, match=match) as e:
        load_everything(p)
    assert str(p) in str(e.value) and "byte offset" in str(e.value)
    if offset is not None:
        assert e.value.offset == offset


def test_truncated_file_is_reported(tmp_path):
    data = good_file(tmp_path).read_bytes()
    for cut in (5, 20, len(data) // 2, len(data) - 3):
        p = tmp_path / f"cut{cut}.cbf"
        p.write_bytes(data[:cut])
        with pytest.raises(FormatError):
            load_everything(p)


# good_file: every sequence is 56 bytes >= chunk_size 40, so each chunk holds one sequence:
# 12 prefix | 4 meta | dense: 4 count + 16 values | sparse: 4 count, 4 nnz, 8 values, 8 indices, 8 nnz counts
SPARSE_INDICES, SPARSE_COUNTS, DENSE_COUNT = 12 + 4 + 20 + 8 + 8, 12 + 4 + 20 + 8 + 8 + 8, 12 + 4


def test_sparse_index_out_of_range_is_reported_with_chunk_and_offset(tmp_path):
    def mutate(d):
        d[SPARSE_INDICES:SPARSE_INDICES + 4] = struct.pack("<i", 10)
    p = damaged(tmp_path, mutate)
    with pytest.raises(FormatError, match="sparse index out of range: index 10, expected 0 <= index < dim 10") as e:
        load_everything(p)
    assert "chunk 0, stream 's', sequence 0" in str(e.value) and e.value.offset == SPARSE_INDICES


def test_nnz_counts_that_do_not_add_up_are_reported(tmp_path):
    def mutate(d):
        d[SPARSE_COUNTS:SPARSE_COUNTS + 4] = struct.pack("<i", 5)
    with pytest.raises(FormatError, match="do not add up.*add up to 6, NNZ is 2"):
        load_everything(damaged(tmp_path, mutate))


def test_sample_count_past_the_chunk_is_reported(tmp_path):
    def mutate(d):
        d[DENSE_COUNT:DENSE_COUNT + 4] = struct.pack("<I", 0xFFFFFFFF)
    with pytest.raises(FormatError, match="runs past the end of the chunk"):
        load_everything(damaged(tmp_path, mutate))


def test_chunk_table_sample_count_must_match_the_sequences(tmp_path):
    def mutate(d):
        t = table_offset(d)
        d[t + 12:t + 16] = struct.pack("<I", 99)
    with pytest.raises(FormatError, match="says chunk 0 has 99 samples"):
        load_everything(damaged(tmp_path, mutate))


def test_empty_and_tiny_files(tmp_path):
    for content in (b"", b"cntk"):
        p = tmp_path / "t.cbf"
        p.write_bytes(content)
        with pytest.raises(FormatError):
            CBFReader(p)


def test_file_with_no_chunks_reads_as_empty(tmp_path):
    p = tmp_path / "e.cbf"
    with CBFWriter(p, STREAMS):
        pass
    r = CBFReader(p)
    assert r.chunks == [] and list(r) == [] and layout.read_header(str(p), p.read_bytes()).table.size == 0
