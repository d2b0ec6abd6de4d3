"""CTFWriter: round trips, atomic output, what CTF cannot represent."""
import os

import numpy as np
import pytest
import scipy.sparse as sp

from helpers import dense, read_all, sparse, write
from recordkit.formats.ctf import CTFReader, CTFWriter, write_ctf

STREAMS = [dense("x", 3, "X"), sparse("y", 50, "Y")]


def random_sequences(rng, n, dtype):
    seqs = []
    for k in range(n):
        nx, ny = int(rng.integers(0, 5)), int(rng.integers(0, 5))
        if nx == ny == 0:
            nx = 1
        x = (rng.normal(size=(nx, 3)) * 10.0 ** rng.integers(-30, 30)).astype(dtype)
        y = sp.random(ny, 50, density=0.1, random_state=int(rng.integers(1 << 30)), dtype=dtype, format="csr")
        seqs.append((int(rng.integers(0, 2**64 - 1, dtype=np.uint64)) if k else 2**64 - 1, {"x": x, "y": y}))
    # keys must be unique: make them so
    return [(i * 1000 + 17 if i else s[0], s[1]) for i, s in enumerate(seqs)]


@pytest.mark.parametrize("precision,dtype", [("float", np.float32), ("double", np.float64)])
def test_round_trip_is_exact(tmp_path, precision, dtype):
    rng = np.random.default_rng(3)
    seqs = random_sequences(rng, 300, dtype)
    p = tmp_path / "out.ctf"
    assert write_ctf(p, STREAMS, seqs, precision=precision) == 300
    back, reader, warns = read_all(p, STREAMS, precision=precision)
    assert warns == [] and reader.errors_counted == 0
    assert [k for k, _ in back] == [k for k, _ in seqs]
    for (_, a), (_, b) in zip(seqs, back):
        np.testing.assert_array_equal(a["x"], b["x"])
        assert b["x"].dtype == dtype
        assert (a["y"] != b["y"]).nnz == 0 and a["y"].shape == b["y"].shape


def test_round_trip_of_every_conformance_input(tmp_path):
    from pathlib import Path
    shared = Path(os.environ.get("RECORDKIT_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    data = shared / "conformance/cntk/Data/CNTKTextFormatReader/50x20_jagged_sequences_sparse.txt"
    if not data.exists():
        pytest.skip("conformance corpus not present")
    streams = [sparse("features", 100, "F0")]
    first, _, _ = read_all(data, streams)
    p = tmp_path / "copy.ctf"
    write_ctf(p, streams, first)
    again, _, _ = read_all(p, streams)
    assert [k for k, _ in again] == [k for k, _ in first]
    assert all((a["features"] != b["features"]).nnz == 0 for (_, a), (_, b) in zip(first, again))


def test_empty_sparse_samples_and_uneven_streams_round_trip(tmp_path):
    y = sp.csr_matrix((3, 50), dtype=np.float32)
    seqs = [(5, {"x": np.zeros((1, 3), np.float32), "y": y}), (6, {"x": np.ones((2, 3), np.float32)})]
    p = tmp_path / "o.ctf"
    write_ctf(p, STREAMS, seqs)
    back, _, _ = read_all(p, STREAMS)
    assert back[0][1]["y"].shape == (3, 50) and back[0][1]["y"].nnz == 0
    assert back[1][1]["y"].shape == (0, 50) and back[1][1]["x"].shape == (2, 3)


def test_writer_output_appears_only_when_complete(tmp_path):
    p = tmp_path / "o.ctf"
    p.write_text("old content\n")
    with pytest.raises(RuntimeError):
        with CTFWriter(p, STREAMS) as w:
            w.write({"x": np.ones((1, 3))}, key=1)
            assert p.read_text() == "old content\n"
            raise RuntimeError("interrupted")
    assert p.read_text() == "old content\n"
    assert os.listdir(tmp_path) == ["o.ctf"]


@pytest.mark.parametrize("data,match", [
    ({"x": np.array([[np.inf, 0, 0]])}, "inf or nan"),
    ({"x": np.ones((1, 4))}, r"expected shape \(samples, 3\)"),
    ({"x": np.zeros((0, 3))}, "no samples"),
    ({"z": np.ones((1, 3))}, "not declared"),
])
def test_writer_rejects_what_ctf_cannot_hold(tmp_path, data, match):
    with CTFWriter(tmp_path / "o.ctf", STREAMS) as w:
        with pytest.raises(ValueError, match=match):
            w.write(data, key=1)


def test_writer_keys_default_to_consecutive_numbers(tmp_path):
    p = tmp_path / "o.ctf"
    with CTFWriter(p, [dense("x", 1)]) as w:
        for v in range(3):
            w.write({"x": np.array([[v]])})
    assert [s.key for s in CTFReader(p, [dense("x", 1)])] == [0, 1, 2]
    assert p.read_text().splitlines()[0] == "0\t|x 0"
