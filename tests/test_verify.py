"""`recordkit verify SRC DST` and `convert --manifest`: a conversion is proved
lossless sequence by sequence (keys, sample counts, exact values; float32 rounding where the
target narrows), differences are located on both sides, and a manifest checks a copy later
without the source."""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from recordkit.cli.main import main
from recordkit.compose import verify as v
from recordkit.engine.streams import StreamSpec
from recordkit.errors import FormatError
from recordkit.formats.cbf import CBFReader, CBFWriter
from recordkit.formats.ctf import CTFReader

S = ["--stream", "x=dense:3:F", "--stream", "y=sparse:10:L"]
STREAMS = [StreamSpec("x", "dense", 3, "F"), StreamSpec("y", "sparse", 10, "L")]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def ctf(tmp_path):
    """Sequences with ids (1-3 lines each), values of every magnitude, written with 17 digits."""
    rng = np.random.default_rng(0)
    lines = []
    for i in range(300):
        for _ in range(int(rng.integers(1, 4))):
            x = rng.normal(size=3) * 10.0 ** rng.integers(-30, 30, size=3)
            lines.append(f"{i * 3} |F {' '.join(repr(float(a)) for a in x)} |L {rng.integers(0, 10)}:{rng.normal()!r}")
    path = tmp_path / "a.ctf"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_ctf_to_cbf_verifies_and_a_changed_value_is_located_on_both_sides(ctf, tmp_path, capsys):
    cbf = tmp_path / "a.cbf"
    assert run(capsys, "convert", ctf, cbf, *S, "--output-chunk-size", "2000")[0] == 0
    code, _, err = run(capsys, "verify", ctf, cbf, *S)
    assert code == 0 and "300 sequences compared" in err and "identical" in err
    # change one float of sequence 101's second stream-x value in the CBF file
    r = CBFReader(cbf)
    info = next(c for c in r.chunks if r.sequence_keys(c.id)[0] <= 101 < r.sequence_keys(c.id)[0] + c.num_sequences)
    chunk = r.load_chunk(info.id)
    i = 101 - int(chunk.keys[0])
    data = bytearray(cbf.read_bytes())
    before = chunk.columns["x"].values[chunk.columns["x"].seq_offsets[i], 1]
    needle = struct.pack("<f", before)
    at = data.index(needle, info.offset)
    data[at:at + 4] = struct.pack("<f", np.nextafter(before, np.float32(np.inf)))
    cbf.write_bytes(bytes(data))
    code, out, err = run(capsys, "verify", ctf, cbf, *S)
    assert code == 1 and "DIFFERENT (1 difference(s))" in err
    first_line = CTFReader(ctf, STREAMS).index.first_lines[101] + 1
    assert out.startswith(f"sequence 101: stream 'x', sample 0, column 1: SRC {float(before)!r}")
    assert f"SRC {ctf}:{first_line} (sequence 303" in out
    assert f"DST {cbf}: chunk {info.id} at byte offset {info.offset}, sequence {i} of the chunk, sample 0" in out


def test_float32_rounding_rule_where_the_target_narrows(ctf, tmp_path, capsys):
    d64, d32 = tmp_path / "d64.cbf", tmp_path / "d32.cbf"
    assert run(capsys, "convert", ctf, d64, *S, "--precision", "double")[0] == 0
    assert run(capsys, "convert", d64, d32, "--precision", "float")[0] == 0
    code, _, err = run(capsys, "verify", ctf, d64, *S)   # CTF read at double, the precision of d64
    assert code == 0
    code, _, err = run(capsys, "verify", d64, d32)
    assert code == 0 and "SRC was rounded to float32" in err
    code, out, err = run(capsys, "verify", d32, d64)      # widening must be exact: it is not
    assert code == 1 and "(SRC as float64:" in out


def test_rounding_toward_zero_instead_of_to_nearest_is_caught(tmp_path):
    x = np.array([[0.1, 1 / 3, 2.0 ** -140]], dtype=np.float64)  # the last one is a float32 subnormal
    streams = [StreamSpec("x", "dense", 3)]
    with CBFWriter(tmp_path / "src.cbf", streams, precision="double") as w:
        w.write({"x": x})
    good = x.astype(np.float32)
    bad = good.copy()
    bad[0, 1] = np.nextafter(good[0, 1], np.float32(0))  # truncated, as a careless converter would
    for name, values in (("good", good), ("bad", bad)):
        with CBFWriter(tmp_path / f"{name}.cbf", streams, precision="float") as w:
            w.write({"x": values})
    src = CBFReader(tmp_path / "src.cbf")
    assert v.verify(src, CBFReader(tmp_path / "good.cbf")).equal
    result = v.verify(src, CBFReader(tmp_path / "bad.cbf"))
    assert not result.equal and result.differences[0].message.startswith("stream 'x', sample 0, column 1")


def test_nan_equals_nan_and_sparse_indices_are_compared(tmp_path):
    import scipy.sparse as sp
    streams = [StreamSpec("x", "dense", 2), StreamSpec("y", "sparse", 5)]
    y = sp.csr_matrix(np.array([[0, 1.5, 0, 0, 2.0]], dtype=np.float32))
    y2 = sp.csr_matrix(np.array([[0, 1.5, 0, 2.0, 0]], dtype=np.float32))
    for name, ys in (("a", y), ("b", y), ("c", y2)):
        with CBFWriter(tmp_path / f"{name}.cbf", streams) as w:
            w.write({"x": np.array([[np.nan, 1]], np.float32), "y": ys})
    a = CBFReader(tmp_path / "a.cbf")
    assert v.verify(a, CBFReader(tmp_path / "b.cbf")).equal
    diff = v.verify(a, CBFReader(tmp_path / "c.cbf")).differences
    assert [d.kind for d in diff] == ["value"] and "has index 4 in SRC, 3 in DST" in diff[0].message


def test_missing_sequences_and_changed_lengths_are_differences(ctf, tmp_path, capsys):
    lines = ctf.read_text().splitlines()
    short = tmp_path / "short.ctf"
    k = next(k for k in range(1, len(lines)) if lines[k].split()[0] == lines[k - 1].split()[0])
    short.write_text("\n".join(lines[:k] + lines[k + 1:]) + "\n")  # a sequence loses one of its lines
    fewer = tmp_path / "fewer.ctf"
    last_id = lines[-1].split()[0]
    fewer.write_text("\n".join(x for x in lines if x.split()[0] != last_id) + "\n")  # and here the whole sequence
    for path, expect in ((short, "stream 'x': SRC has"), (fewer, "key 897 of SRC is not in DST")):
        code, out, _ = run(capsys, "verify", ctf, path, *S)
        assert code == 1 and expect in out
    cbf = tmp_path / "fewer.cbf"
    run(capsys, "convert", fewer, cbf, *S)
    code, _, err = run(capsys, "verify", ctf, cbf, *S, "--json")
    doc = json.loads(_)
    assert code == 1 and doc["differences"][-1]["kind"] == "count" and doc["src_sequences"] == 300


def test_reordered_ofrecord_parts_are_matched_by_key(ctf, tmp_path, capsys):
    d = tmp_path / "of"
    assert run(capsys, "convert", ctf, d, "--to", "ofrecord", "--parts", "3", "--part-order", "round-robin", *S)[0] == 0
    code, _, err = run(capsys, "verify", ctf, d, *S)
    assert code == 0 and "keys compared" in err and "at another position in DST" in err
    (d / "part-00002").unlink()
    code, out, err = run(capsys, "verify", ctf, d, *S, "--max-differences", "2")
    assert code == 1 and "DIFFERENT (100 difference(s))" in err
    assert out.startswith("sequence 2: key 6 of SRC is not in DST") and "... and 98 more" in out


def test_cbf_to_ctf_and_singa_round_trips_verify(tmp_path, capsys):
    streams = [StreamSpec("features", "dense", 4), StreamSpec("label", "dense", 1)]
    rng = np.random.default_rng(1)
    with CBFWriter(tmp_path / "s.cbf", streams) as w:
        for i in range(50):
            w.write({"features": rng.normal(size=(1, 4)).astype(np.float32), "label": np.array([[i % 10]], np.float32)})
    assert run(capsys, "convert", tmp_path / "s.cbf", tmp_path / "s.ctf")[0] == 0
    assert run(capsys, "verify", tmp_path / "s.cbf", tmp_path / "s.ctf")[0] == 0  # CTF streams from the CBF side
    assert run(capsys, "convert", tmp_path / "s.cbf", tmp_path / "s.bin", "--to", "kvfile")[0] == 0
    assert run(capsys, "verify", tmp_path / "s.cbf", tmp_path / "s.bin")[0] == 0


def test_manifest_checks_a_copy_without_the_source(ctf, tmp_path, capsys):
    cbf, man = tmp_path / "a.cbf", tmp_path / "a.manifest"
    code, _, err = run(capsys, "convert", ctf, cbf, *S, "--manifest", man)
    assert code == 0 and "manifest of 300 sequences (float values)" in err
    ctf.unlink()                                                   # the source is gone
    code, _, err = run(capsys, "verify", "--manifest", man, cbf)
    assert code == 0 and "300 sequences compared" in err
    m = v.load_manifest(man)
    assert m.meta["keyed"] is True and m.keys[:3].tolist() == [0, 3, 6] and m.digests.shape == (300, 2, 16)
    x = CBFReader(cbf).load_chunk(0).columns["x"]
    data = bytearray(cbf.read_bytes())
    at = data.index(struct.pack("<f", x.values[x.seq_offsets[5], 2]))
    data[at] ^= 0x01                                              # the lowest bit of sequence 5's third value
    cbf.write_bytes(bytes(data))
    code, out, _ = run(capsys, "verify", "--manifest", man, cbf, "--json")
    doc = json.loads(out)
    assert code == 1 and doc["differing"] == 1
    d = doc["differences"][0]
    assert d["position"] == 5
    assert d["kind"] == "digest" and d["src"].startswith(f"{man}: entry {d['position']} (key {3 * d['position']})")
    assert d["dst"].startswith(f"{cbf}: chunk 0 at byte offset 12, sequence {d['position']} of the chunk")


def test_manifest_of_a_double_conversion_and_of_reordered_parts(ctf, tmp_path, capsys):
    man = tmp_path / "m"
    assert run(capsys, "convert", ctf, tmp_path / "d.cbf", *S, "--precision", "double", "--manifest", man)[0] == 0
    assert v.load_manifest(man).precision == "double"
    assert run(capsys, "verify", "--manifest", man, tmp_path / "d.cbf")[0] == 0
    assert run(capsys, "convert", ctf, tmp_path / "f.cbf", *S)[0] == 0
    code, out, _ = run(capsys, "verify", "--manifest", man, tmp_path / "f.cbf")  # float32 copy != double manifest
    assert code == 1 and "digest" in out
    assert run(capsys, "convert", ctf, tmp_path / "of", "--to", "ofrecord", "--parts", "4", "--part-order", "round-robin", *S,
               "--manifest", tmp_path / "om")[0] == 0
    code, _, err = run(capsys, "verify", "--manifest", tmp_path / "om", tmp_path / "of", *S)
    assert code == 0 and "matched by key" in err


def test_a_damaged_manifest_is_a_located_error(tmp_path):
    (tmp_path / "m").write_bytes(b"not a manifest")
    with pytest.raises(FormatError, match="not a recordkit manifest"):
        v.load_manifest(tmp_path / "m")


def test_bridge_data_sets_verify_by_their_recorded_streams_and_a_changed_value_is_found(ctf, tmp_path, capsys):
    pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "a.parquet"
    assert run(capsys, "convert", ctf, out, *S)[0] == 0
    code, _, err = run(capsys, "verify", ctf, out, *S)  # the Parquet side was parsed as CTF text
    assert code == 0 and "300 sequences compared" in err and "identical" in err
    code, _, err = run(capsys, "verify", out, ctf)  # the streams of the CTF side from the Parquet side
    assert code == 0 and "identical" in err
    table = pq.read_table(out)
    x = table.column("x").to_pylist()
    x[101][0][1] = float(np.nextafter(np.float32(x[101][0][1]), np.float32(np.inf)))
    changed = tmp_path / "b.parquet"
    pq.write_table(table.set_column(table.schema.get_field_index("x"), "x", pa_array(x, table.schema.field("x").type)),
                   changed)
    code, out_text, err = run(capsys, "verify", ctf, changed, *S)
    assert code == 1 and "DIFFERENT (1 difference(s))" in err
    assert out_text.startswith("sequence 101: stream 'x', sample 0, column 1")
    assert f"DST {changed}: row group 0, row 101 of the group (sequence 101 of the data set, sample 0)" in out_text


def test_a_difference_in_an_hf_set_or_a_directory_of_cbf_parts_is_located(ctf, tmp_path, capsys):
    pytest.importorskip("pyarrow")
    hf, parts = tmp_path / "a_hf", tmp_path / "parts.cbf"
    assert run(capsys, "convert", ctf, hf, "--to", "hf", *S)[0] == 0
    parts.mkdir()
    with CBFWriter(parts / "part-0.cbf", STREAMS, chunk_size=2000) as w:
        for chunk in CTFReader(ctf, STREAMS).iter_chunks():
            w.write_chunk(chunk)
    lines = ctf.read_text().splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("303 "))
    fields = lines[i].split()
    fields[3] = repr(float(fields[3]) * 2 + 1)
    lines[i] = " ".join(fields)
    changed = tmp_path / "b.ctf"
    changed.write_text("\n".join(lines) + "\n")
    code, out, err = run(capsys, "verify", changed, hf, *S)  # the HF chunk table was unpacked as OFRecord's
    assert code == 1 and "DIFFERENT (1 difference(s))" in err
    assert f"DST {hf}/data-00000-of-00001.arrow: record batches 0.." in out
    assert "row 101 of them (sequence 101 of the data set, sample 0)" in out
    code, out, err = run(capsys, "verify", changed, parts, *S)
    assert code == 1 and "DIFFERENT (1 difference(s))" in err
    assert f"DST {parts}/part-0.cbf: chunk " in out and "at byte offset" in out


def pa_array(values, type_):
    import pyarrow as pa
    return pa.array(values, type=type_)


def test_streams_must_come_from_somewhere(ctf, tmp_path, capsys):
    code, _, err = run(capsys, "verify", ctf, ctf)
    assert code == 2 and "--stream" in err


@pytest.mark.parametrize("seed", range(6))
def test_any_chunking_of_either_side_lines_up_and_a_change_is_found_at_its_position(tmp_path, seed):
    """Sides chunked differently are walked in step; one changed value (dense or sparse) is
    reported at exactly its sequence, sample and stream, whatever the chunk boundaries."""
    import scipy.sparse as sp
    rng = np.random.default_rng(seed)
    streams = [StreamSpec("x", "dense", 2), StreamSpec("y", "sparse", 7)]
    n = int(rng.integers(20, 80))
    seqs = []
    for i in range(n):
        L = int(rng.integers(1, 5))
        y = sp.random(L, 7, density=0.3, format="csr", dtype=np.float32, random_state=int(rng.integers(1 << 30)))
        seqs.append({"x": rng.normal(size=(L, 2)).astype(np.float32), "y": y})
    victim, stream = int(rng.integers(n)), ("x", "y")[seed % 2]
    if stream == "y" and seqs[victim]["y"].nnz == 0:
        seqs[victim]["y"] = sp.csr_matrix(np.eye(7, dtype=np.float32)[:len(seqs[victim]["x"])])
    changed = [dict(s) for s in seqs]
    if stream == "x":
        x = seqs[victim]["x"].copy()
        x[-1, 1] += 1
        changed[victim] = {"x": x, "y": seqs[victim]["y"]}
    else:
        y = seqs[victim]["y"].copy()
        y.data[-1] *= 2
        changed[victim] = {"x": seqs[victim]["x"], "y": y}
    for name, data, size in (("a", seqs, int(rng.integers(60, 400))), ("b", seqs, int(rng.integers(60, 400))),
                             ("c", changed, int(rng.integers(60, 400)))):
        with CBFWriter(tmp_path / f"{name}.cbf", streams, chunk_size=size) as w:
            for s in data:
                w.write(s)
    a, b, c = (CBFReader(tmp_path / f"{k}.cbf") for k in "abc")
    assert len(a.chunks) > 1 or len(b.chunks) > 1
    same = v.verify(a, b)
    assert same.equal and same.sequences == n
    diff = v.verify(a, c)
    assert [(d.position, d.kind) for d in diff.differences] == [(victim, "value")]
    assert diff.differences[0].message.startswith(f"stream '{stream}'")


def test_a_changed_record_in_reordered_parts_is_located_by_key(ctf, tmp_path, capsys):
    from recordkit.formats.ofrecord import codec
    from recordkit.formats.ofrecord.dataset import OFRecordDataset
    from recordkit.formats.ofrecord.writer import frame
    d = tmp_path / "of"
    assert run(capsys, "convert", ctf, d, "--to", "ofrecord", "--parts", "3", "--part-order", "round-robin", *S)[0] == 0
    part = d / "part-00001"
    ds = OFRecordDataset(part, index_sidecar=False)
    recs = [{k: f.value for k, f in ds[i].items()} for i in range(len(ds))]
    recs[7]["F"] = recs[7]["F"].copy()
    recs[7]["F"][-1] = np.float32(-1.5)
    key = int(recs[7]["key"][0])
    part.write_bytes(b"".join(frame(codec.encode(r)) for r in recs))
    code, out, err = run(capsys, "verify", ctf, d, *S)
    assert code == 1 and "DIFFERENT (1 difference(s))" in err
    assert out.startswith(f"sequence {key // 3}: stream 'x', sample ")
    assert f"DST {part}: byte offset " in out and f", record 7 (key {key}, sample " in out
