"""recordkit's CBF reader and writer against golden output of CNTK 2.7's C++ binary reader.

The cases are listed in tests/data/cbf_oracle/cases.json (tools/oracle/make_cbf_files.py):

* kind "recordkit": a CTF source (tests/data/cbf_oracle/inputs/ or the float cases of
  tests/data/ctf_oracle/inputs/) converted by recordkit (CTFReader -> CBFWriter, some with a tiny
  chunk_size so the file has many chunks) into tests/data/cbf_oracle/files/<case>.cbf;
* kind "cntk_ctf2bin": files written by CNTK's own Scripts/ctf2bin.py (conformance corpus), copied
  into tests/data/cbf_oracle/cntk_files/ (MNIST_dense.bin, 6 MB, is read from the shared corpus
  and skipped when that is absent).

The goldens (tests/data/cbf_oracle/expected/<case>.json) were written by tools/oracle/cbf_golden.py
running the real CNTK 2.7 (MinibatchSource(CBFDeserializer(...)), randomize=False, one sequence per
minibatch). They also record whether CNTK read exactly the same values from the CTF source with its
CTFDeserializer ("equals_cntk_ctf_reading"). These tests only read committed files: no CNTK, no network.

How values are compared (bitwise float32, NaN == NaN):
* dense streams: the (samples, dim) arrays;
* sparse streams: CNTK's values were taken by an exact sparse->dense copy (NDArrayView::CopyFrom),
  in which a duplicate index keeps the LAST value written for it (it does not sum; as_sequences(),
  which multiplies by an identity matrix, would sum). recordkit delivers the entries in file order,
  so they are densified by assignment in that order, then both sides are reduced to the cells whose
  bit pattern is not +0.0 (an explicit +0.0 entry cannot be told from an absent one on CNTK's side).
Large cases store per-stream sha256 digests of that canonical form plus a readable preview.

Double-precision CBF files: CNTK's Python API only delivers float32 and its binary reader refuses
a file whose element type differs from the configured precision ("Unsupported combination of the
input data type 1 and precision 1"), so those goldens hold the error and what CNTK read from the
CTF source; recordkit must read the file (float64) and its values cast to float32 must equal that.

Known CBF-vs-CTF differences (KNOWN_CTF_DIFFERENCES): CNTK's CTF reader has its own decimal
arithmetic (see tests/test_ctf_oracle_golden.py); recordkit and ctf2bin.py round correctly, so the
CBF holds the correctly rounded value where CNTK's CTF reader does not.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "cbf_oracle"
SHARED = Path(os.environ.get("RECORDKIT_SHARED") or REPO.parent / "shared")
CASES = json.loads((DATA / "cases.json").read_text())["cases"]
BY_NAME = {c["case"]: c for c in CASES}

# case -> positions (sequence, stream, sample, column) where CNTK's CTF reading differs from its
# reading of the CBF file, and why. Checked exactly, so the list cannot go stale silently.
KNOWN_CTF_DIFFERENCES = {
    # CNTK's CTF arithmetic vs correct rounding (CORRECTLY_ROUNDED_FLOAT32 in test_ctf_oracle_golden.py)
    "ctf_float32_rounding": {(0, "f", 0, 5), (0, "f", 0, 6)},
    # CNTK's CTF reader: 0 * pow(10, 400) = NaN; correct (and in the CBF): +-0.0
    "ctf_large_exponents": {(3, "e", 0, 0), (3, "e", 0, 1), (3, "e", 0, 2), (3, "e", 0, 4)},
    # ctf2bin.py (Python float() then pack 'f') vs CNTK's CTF arithmetic: "-4.22632e+009"
    "cntk_50x20_jagged_sequences_sparse": {(29, "features", 11, 83)},
}


def _path(p: str) -> Path:
    return SHARED / p[len("shared:"):] if p.startswith("shared:") else REPO / p


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _golden(case: str) -> dict:
    return json.loads((DATA / "expected" / (case + ".json")).read_text())


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is not available (shared conformance corpus)")
    return path


# -- canonical form (mirrors tools/oracle/cbf_golden.py) ----------------------------------------

def _canonical_sparse(value, dim, cast=False):
    """recordkit's CSR (entries in file order) -> (samples, indptr, indices, float32 values):
    per sample the last value of each index, sorted by index, +0.0 cells dropped (CNTK's view)."""
    m = value.tocsr()
    indptr, indices, values = [0], [], []
    for r in range(m.shape[0]):
        a, b = m.indptr[r], m.indptr[r + 1]
        idx = np.asarray(m.indices[a:b])[::-1]
        val = np.asarray(m.data[a:b])[::-1]
        if cast:
            with np.errstate(over="ignore"):  # beyond FLT_MAX -> inf, as CNTK's float reading
                val = val.astype(np.float32)
        uniq, first = np.unique(idx, return_index=True)  # first in reversed order = last in file order
        v = np.ascontiguousarray(val[first], dtype=np.float32)
        keep = v.view(np.uint32) != 0
        indices.append(uniq[keep].astype(np.int64))
        values.append(v[keep])
        indptr.append(indptr[-1] + int(keep.sum()))
    cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt))
    return m.shape[0], np.array(indptr, dtype=np.int64), cat(indices, np.int64), cat(values, np.float32)


def _golden_sparse(value):
    return (value["samples"], np.array(value["indptr"], dtype=np.int64), np.array(value["indices"], dtype=np.int64),
            np.array(value["values"], dtype=np.float64).astype(np.float32))


def _canonical_bytes(value, fmt: str) -> bytes:
    if fmt == "sparse":
        n, indptr, indices, data = value
        return (struct.pack("<q", n) + indptr.astype("<i8").tobytes() + indices.astype("<i4").tobytes()
                + data.astype("<f4").tobytes())
    a = np.ascontiguousarray(value, dtype="<f4")
    return struct.pack("<q", a.shape[0]) + a.tobytes()


def _golden_dense(value, dim) -> np.ndarray:
    return np.array(value, dtype=np.float64).astype(np.float32).reshape(-1, dim)


def _assert_bitwise(got: np.ndarray, want: np.ndarray, what: str):
    assert got.dtype == np.float32 and want.dtype == np.float32, what
    assert got.shape == want.shape, f"{what}: shape {got.shape}, CNTK {want.shape}"
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    if not same.all():
        bad = [(int(r), int(c), got[r, c].item(), want[r, c].item()) for r, c in zip(*np.nonzero(~same))]
        raise AssertionError(f"{what}: {len(bad)} value(s) differ (sample, column, recordkit, CNTK): {bad[:10]}")


def _assert_same(got, want, fmt, dim, what):
    if fmt == "dense":
        _assert_bitwise(got, want, what)
        return
    (n, ip, ix, v), (wn, wip, wix, wv) = got, want
    assert n == wn, f"{what}: {n} samples, CNTK {wn}"
    if np.array_equal(ip, wip) and np.array_equal(ix, wix) and np.array_equal(v.view(np.uint32), wv.view(np.uint32)):
        return
    dense = []
    for n_, ip_, ix_, v_ in (got, want):  # densify only to report the difference
        d = np.zeros((n_, dim), dtype=np.float32)
        for r in range(n_):
            d[r, ix_[ip_[r]:ip_[r + 1]]] = v_[ip_[r]:ip_[r + 1]]
        dense.append(d)
    _assert_bitwise(dense[0], dense[1], what)
    raise AssertionError(f"{what}: sparse structure differs (explicit entries)")


def _read_recordkit(path: Path):
    from recordkit.formats.cbf import CBFReader

    r = CBFReader(path)
    try:
        streams = list(r.streams)
        seqs = [(seq.key, {s.name: seq.data[s.name] for s in streams}) for seq in r]
        table = [(c.num_sequences, c.num_samples) for c in r.chunks]
    finally:
        r.close()
    return streams, seqs, table


def _compare_to(golden, key, streams, seqs, cast=False):
    """Compare recordkit's sequences with golden[key] (inline values) or golden[key + '_sha256']."""
    dims = {s["name"]: s["dim"] for s in golden["layout"]["streams"]}
    fmts = {s["name"]: s["format"] for s in golden["layout"]["streams"]}
    assert len(seqs) == golden[key + "_num_sequences"], f"{len(seqs)} sequences, CNTK read {golden[key + '_num_sequences']}"
    got = []
    for _, data in seqs:
        row = {}
        for name in dims:
            if fmts[name] == "sparse":
                row[name] = _canonical_sparse(data[name], dims[name], cast)
            else:
                a = np.ascontiguousarray(data[name])
                if cast:
                    with np.errstate(over="ignore"):  # beyond FLT_MAX -> inf, as CNTK's float reading
                        a = a.astype(np.float32)
                row[name] = a
        got.append(row)
    for name in dims:
        counts = [g[name][0] if fmts[name] == "sparse" else g[name].shape[0] for g in got]
        assert counts == golden[key + "_sample_counts"][name], f"stream {name!r}: sample counts"

    def want_of(value, name):
        return _golden_sparse(value) if fmts[name] == "sparse" else _golden_dense(value, dims[name])

    inline = golden.get(key, golden.get(key + "_preview"))  # full values, or a readable preview first
    for i, (g, want) in enumerate(zip(got, inline)):
        for name in dims:
            _assert_same(g[name], want_of(want[name], name), fmts[name], dims[name], f"sequence {i} stream {name!r}")
    if key in golden:
        return
    for name in dims:
        h = hashlib.sha256()
        for g in got:
            h.update(_canonical_bytes(g[name], fmts[name]))
        assert h.hexdigest() == golden[key + "_sha256"][name], f"stream {name!r}: digest differs from CNTK's reading"


# -- tests --------------------------------------------------------------------------------------

def test_every_case_has_a_golden():
    assert len(CASES) >= 30
    missing = [c["case"] for c in CASES if not (DATA / "expected" / (c["case"] + ".json")).exists()]
    assert not missing, f"run tools/oracle/cbf_golden.py under the oracle for {missing}"


@pytest.mark.parametrize("case", [c["case"] for c in CASES])
def test_inputs_unchanged(case):
    c, golden = BY_NAME[case], _golden(case)
    assert golden["cbf_sha256"] == c["cbf_sha256"]
    assert _sha(_need(_path(c["cbf"]))) == c["cbf_sha256"], "CBF file changed: rerun make_cbf_files.py and cbf_golden.py"
    if c.get("source"):
        src = _path(c["source"]["ctf"])
        if src.exists():
            assert _sha(src) == c["source"]["ctf_sha256"], "CTF source changed since the golden was made"


@pytest.mark.parametrize("case", [c["case"] for c in CASES if c["kind"] == "recordkit"])
def test_writer_reproduces_committed_file(case, tmp_path):
    """The current CTF -> CBF conversion gives the committed bytes (catches writer regressions)."""
    from recordkit import StreamSpec
    from recordkit.formats.cbf import CBFWriter
    from recordkit.formats.ctf import CTFReader

    src = BY_NAME[case]["source"]
    specs = [StreamSpec(name=s["name"], format=s["format"], dim=s["dim"], alias=s["alias"]) for s in src["streams"]]
    out = tmp_path / "out.cbf"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reader = CTFReader(REPO / src["ctf"], specs, precision=src["precision"],
                           skip_sequence_ids=src["skip_sequence_ids"], max_errors=src["max_errors"])
        try:
            with CBFWriter(out, specs, precision=src["precision"], chunk_size=src["chunk_size"]) as w:
                if src["method"] == "write":
                    for seq in reader:
                        w.write(dict(seq.data))
                else:
                    for chunk in reader.iter_chunks(threads=2):
                        w.write_chunk(chunk)
        finally:
            reader.close()
    want = _path(BY_NAME[case]["cbf"]).read_bytes()
    got = out.read_bytes()
    assert got == want, (f"{case}: writer output differs from the committed file ({len(got)} vs {len(want)} bytes, "
                         f"first difference at byte {next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))})")


@pytest.mark.parametrize("case", [c["case"] for c in CASES])
def test_layout_matches(case):
    """Header streams and chunk table as recordkit sees them = the independent parse in the golden."""
    golden = _golden(case)
    streams, seqs, table = _read_recordkit(_need(_path(BY_NAME[case]["cbf"])))
    want_streams = [(s["name"], s["format"], s["dim"], s["element_type"]) for s in golden["layout"]["streams"]]
    assert [(s.name, s.format, s.dim, str(np.dtype(s.dtype))) for s in streams] == want_streams
    assert table == [(n, m) for _, n, m in golden["layout"]["chunks"]]
    assert [k for k, _ in seqs] == list(range(len(seqs))), "CBF keys are global ordinals"


@pytest.mark.parametrize("case", [c["case"] for c in CASES if "error" not in _golden(c["case"])])
def test_values_match_cntk(case):
    golden = _golden(case)
    streams, seqs, _ = _read_recordkit(_need(_path(BY_NAME[case]["cbf"])))
    assert all(np.dtype(s.dtype) == np.float32 for s in streams)
    _compare_to(golden, "sequences", streams, seqs)


@pytest.mark.parametrize("case", [c["case"] for c in CASES if "error" in _golden(c["case"])])
def test_double_files_cntk_cannot_read(case):
    """CNTK (float-only Python API) rejects double CBF; recordkit reads it, and float32(value) is
    what CNTK read from the CTF source."""
    golden = _golden(case)
    assert "Unsupported combination of the input data type 1 and precision 1" in golden["error"]
    streams, seqs, _ = _read_recordkit(_need(_path(BY_NAME[case]["cbf"])))
    assert all(np.dtype(s.dtype) == np.float64 for s in streams)
    _compare_to(golden, "ctf_sequences", streams, seqs, cast=True)


def test_cbf_equals_cntk_ctf_reading_except_known():
    found = {}
    for c in CASES:
        g = _golden(c["case"])
        if "equals_cntk_ctf_reading" not in g:
            continue
        assert g["equals_cntk_ctf_reading"] == (not g["cbf_vs_ctf_differences"])
        if g["cbf_vs_ctf_differences"]:
            found[c["case"]] = {(d["sequence"], d["stream"], d["sample"], d["column"]) for d in g["cbf_vs_ctf_differences"]}
    assert found == KNOWN_CTF_DIFFERENCES
