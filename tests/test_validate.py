"""`recordkit validate` for every format: everything is read, every problem is
reported with its location (file:line:column for text, byte offset + record/chunk/tuple for
binary), a summary by kind, exit 1 on any error, --max-errors stops early, --json."""
from __future__ import annotations

import json
import struct
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp

from recordkit.cli.main import main
from recordkit.engine.streams import StreamSpec
from recordkit.formats import validate as v
from recordkit.formats.cbf import CBFWriter
from recordkit.formats.ofrecord import codec
from recordkit.formats.ofrecord.writer import frame
from recordkit.formats.singa import open as open_store
from recordkit.formats.singa import records

STREAMS = ["--stream", "x=dense:3", "--stream", "y=sparse:5"]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def problems(path, **kw):
    checked = Counter()
    return list(v.validate(path, checked=checked, **kw)), checked


# -- CTF ---------------------------------------------------------------------------------------------

def test_ctf_every_problem_with_line_and_column_and_a_summary_by_kind(tmp_path, capsys):
    f = tmp_path / "a.ctf"
    f.write_text("0 |x 1 2 3 |y 0:1\n"
                 "0 |x 4 5 |y 3:1\n"          # short dense sample: a warning
                 "1 |x 1 a 3 |y 2:1\n"        # malformed number at column 8
                 "2 |x 1 2 3 |y 9:1\n"        # sparse index out of range
                 "3 |x 1 2 3 4\n"             # too many values
                 "4 |x 1 2 3 |q 5\n")         # undeclared input: a warning
    code, out, err = run(capsys, "validate", f, *STREAMS)
    assert code == 1
    lines = out.splitlines()
    assert f"{f}:3:8: malformed value in input 'x': expected a number, found 'a' (sequence 1)" in lines
    assert any(line.startswith(f"{f}:4:") and "sparse index 9" in line for line in lines)
    assert any(line.startswith(f"{f}:5:") and "too many values" in line for line in lines)
    assert any(line.startswith(f"{f}:2:") and "warning: dense input 'x' has 2 of 3 values" in line for line in lines)
    assert any(line.startswith(f"{f}:6:") and "warning: input 'q' is not declared" in line for line in lines)
    assert "1 chunks, 5 sequences checked, 5 problem(s): 3 error(s), 2 warning(s)" in err
    for kind in ("malformed-number", "sparse-index-range", "too-many-values", "padded-sample", "undeclared-input"):
        assert f"  {kind}" in err


def test_ctf_problems_behind_the_first_error_of_a_sequence_are_found_too(tmp_path):
    f = tmp_path / "m.ctf"
    f.write_text("0 |x 1 a 3 |y 9:1 |x 1 2\n"   # three problems on one line
                 "0 |x 1 2 3 |y 1:1\n"
                 "0 |x 1 2 3 4 |q 1\n"          # and two on a later line of the same sequence
                 "1 |x 1 2 3\n")
    found, _ = problems(f, streams=[StreamSpec("x", "dense", 3), StreamSpec("y", "sparse", 5)])
    assert [(p.line, p.column, p.kind, p.record) for p in found] == [
        (1, 8, "malformed-number", "sequence 0"), (1, 15, "sparse-index-range", "sequence 0"),
        (1, 19, "padded-sample", "sequence 0"), (3, 12, "too-many-values", "sequence 0"),
        (3, 14, "undeclared-input", "sequence 0")]


def test_ctf_clean_file_passes_and_warnings_fail_only_with_strict(tmp_path, capsys):
    f = tmp_path / "a.ctf"
    f.write_text("0 |x 1 2 3 |y 0:1\n1 |x 1 2 3\n")
    assert run(capsys, "validate", f, *STREAMS)[0] == 0
    f.write_text("0 |x 1 2 |y 0:1\n")
    assert run(capsys, "validate", f, *STREAMS)[0] == 0
    assert run(capsys, "validate", f, *STREAMS, "--strict")[0] == 1


def test_ctf_more_errors_than_the_kernel_records_are_all_located(tmp_path):
    f = tmp_path / "many.ctf"
    bad = set(range(3, 3000, 3))
    f.write_text("".join(f"|x 1 {'z' if i in bad else 2} 3\n" for i in range(3000)))
    found, checked = problems(f, streams=[StreamSpec("x", "dense", 3)])
    assert checked["sequences"] == 3000
    assert sorted(p.line for p in found) == sorted(i + 1 for i in bad)   # 999 errors, each at its own line
    assert {(p.kind, p.column, p.count) for p in found} == {("malformed-number", 6, 1)}


def test_ctf_duplicate_ids_from_the_index_are_located(tmp_path):
    f = tmp_path / "ids.ctf"
    f.write_text("1 |x 1 2 3\n2 |x 1 2 3\n1 |x 1 2 3\n")
    found, _ = problems(f, streams=[StreamSpec("x", "dense", 3)])
    assert [(p.kind, p.line) for p in found] == [("duplicate-id", 3)]


def test_ctf_needs_its_streams(tmp_path, capsys):
    f = tmp_path / "a.ctf"
    f.write_text("|x 1\n")
    code, _, err = run(capsys, "validate", f)
    assert code == 2 and "--stream" in err


def test_max_errors_stops_early_and_says_so(tmp_path, capsys):
    f = tmp_path / "many.ctf"
    f.write_text("".join(f"|x 1 z 3\n" for i in range(50)))
    code, out, err = run(capsys, "validate", f, "--stream", "x=dense:3", "--max-errors", "3")
    assert code == 1 and len(out.splitlines()) == 3 and "stopped after 3 error(s)" in err


def test_json_output_has_problems_kinds_and_counts(tmp_path, capsys):
    f = tmp_path / "a.ctf"
    f.write_text("|x 1 z 3\n|x 1 2 3\n")
    code, out, _ = run(capsys, "validate", f, "--stream", "x=dense:3", "--json")
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False and doc["errors"] == 1 and doc["by_kind"] == {"malformed-number": 1}
    assert doc["checked"]["sequences"] == 2 and doc["problems"][0]["line"] == 1 and doc["problems"][0]["column"] == 6


# -- CBF ---------------------------------------------------------------------------------------------

def write_cbf(path):
    streams = [StreamSpec("x", "dense", 3), StreamSpec("y", "sparse", 5)]
    with CBFWriter(path, streams, chunk_size=200) as w:
        for i in range(40):
            w.write({"x": np.full((2, 3), i, np.float32), "y": sp.csr_matrix(np.eye(5, dtype=np.float32)[:2])})
    return path  # 10 chunks of 4 sequences, 256 bytes each, from byte 12


def test_cbf_every_damaged_chunk_is_reported_with_offset_and_chunk(tmp_path, capsys):
    f = write_cbf(tmp_path / "d.cbf")
    assert run(capsys, "validate", f)[0] == 0
    data = bytearray(f.read_bytes())
    for chunk in (2, 7):  # the first sparse index of the chunk's first sequence -> 9 (dim 5)
        struct.pack_into("<i", data, 12 + 256 * chunk + 144, 9)
    f.write_bytes(bytes(data))
    code, out, err = run(capsys, "validate", f)
    assert code == 1
    lines = out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{f}: byte offset ") and "chunk 2, stream 'y'" in lines[0]
    assert "sparse index out of range: index 9" in lines[0] and "chunk 7" in lines[1]
    assert "10 chunks, 32 sequences checked, 2 problem(s)" in err and "sparse-index-range  2" in err


def test_cbf_damaged_header_is_one_located_problem(tmp_path):
    f = write_cbf(tmp_path / "d.cbf")
    f.write_bytes(f.read_bytes()[:-3])
    found, _ = problems(f)
    assert len(found) == 1 and found[0].kind == "header" and found[0].offset is not None


def test_checksum_mismatches_are_reported_and_the_format_still_checked(tmp_path):
    from recordkit.storage import sidecars
    f = write_cbf(tmp_path / "d.cbf")
    sidecars.create(str(f), block_size=512)
    data = bytearray(f.read_bytes())
    struct.pack_into("<i", data, 12 + 256 * 5 + 144, 9)      # block 2: a structural error
    struct.pack_into("<f", data, 12 + 256 * 8 + 16 + 4, 7.0)  # block 4: a value changed, structure intact
    f.write_bytes(bytes(data))
    found, _ = problems(f)
    assert sorted((p.kind, p.record) for p in found) == [("checksum-mismatch", "block 2"),
                                                         ("checksum-mismatch", "block 4"),
                                                         ("sparse-index-range", found[-1].record)]
    assert "chunk 5" in found[-1].record


# -- OFRecord ------------------------------------------------------------------------------------------

def test_ofrecord_problems_in_every_part_with_byte_offset_and_record(tmp_path, capsys):
    d = tmp_path / "d"
    d.mkdir()
    good = frame(codec.encode({"a": 1}))
    (d / "part-0").write_bytes(good + frame(b"\xff") + good + struct.pack("<q", 0) + good)
    (d / "part-1").write_bytes(good + good + struct.pack("<q", 99) + b"cut")
    code, out, err = run(capsys, "validate", d, "--json")
    doc = json.loads(out)
    assert code == 1 and doc["checked"]["records"] == 5 and doc["checked"]["files"] == 2
    got = [(p["kind"], p["path"].rsplit("/", 1)[1], p["offset"], p["record"]) for p in doc["problems"]]
    assert got == [("record-does-not-parse", "part-0", len(good), "record 1"),
                   ("frame-length-not-positive", "part-0", 2 * len(good) + 9, "record 3"),
                   ("frame-truncated", "part-1", 2 * len(good), "record 2")]


def test_ofrecord_index_sidecar_that_disagrees_is_a_warning(tmp_path, capsys):
    from recordkit.formats.ofrecord.dataset import load_index, sidecar_path
    d = tmp_path / "d"
    d.mkdir()
    good = frame(codec.encode({"a": 1}))
    part = d / "part-0"
    part.write_bytes(good * 3)
    load_index(str(part), write=True)
    assert run(capsys, "validate", d)[0] == 0
    st = part.stat()
    one = next(f for f in (frame(codec.encode({"b": b"x" * k})) for k in range(60)) if len(f) == 3 * len(good))
    part.write_bytes(one)                                         # same size, one frame instead of three
    import os
    os.utime(part, ns=(st.st_atime_ns, st.st_mtime_ns))        # and the same mtime: the sidecar looks current
    assert part.stat().st_size == st.st_size
    code, out, err = run(capsys, "validate", d)
    assert code == 0 and f"{sidecar_path(str(part))} does not describe this part's frames" in out
    assert run(capsys, "validate", d, "--strict")[0] == 1


# -- SINGA ---------------------------------------------------------------------------------------------

def test_singa_kvfile_records_and_a_broken_tail(tmp_path, capsys):
    f = tmp_path / "s.bin"
    with open_store(str(f), "create", "kvfile") as s:
        for i in range(5):
            s.write(b"%05d" % i, records.encode_record(shape=(4,), label=i, data=np.arange(4, dtype=np.float32)))
        s.write(b"00005", records.encode_record(shape=(3,), label=5, data=np.arange(3, dtype=np.float32)))
        s.write(b"00002", records.encode_record(shape=(4,), label=2, data=np.arange(4, dtype=np.float32)))
    with open(f, "ab") as out:
        out.write(struct.pack("<Q", 5) + b"00007" + struct.pack("<Q", 1000) + b"short")
    code, out, err = run(capsys, "validate", f)
    lines = out.splitlines()
    assert code == 1 and len(lines) == 3
    assert lines[0].startswith(f"{f}: byte offset ") and "tuple 5: record has 3 features, the first had 4" in lines[0]
    assert "tuple 6: warning: key '00002' is used again" in lines[1]
    assert "tuple 7: value length 1000" in lines[2]
    assert "7 tuples checked" in err


def test_singa_shard_folder_is_its_shard_dat(tmp_path, capsys):
    d = tmp_path / "shard"
    d.mkdir()
    with open_store(str(d / "shard.dat"), "create", "kvfile") as s:
        s.write(b"00000", records.encode_record(shape=(2,), label=1, data=np.ones(2, np.float32)))
    code, out, err = run(capsys, "validate", d)
    assert code == 0 and "1 tuples checked, 0 problem(s)" in err


def test_singa_csv_lines_are_located(tmp_path, capsys):
    f = tmp_path / "d.csv"
    f.write_text("1,0.5,0.25\n2,x,1\n3,1\n")
    code, out, _ = run(capsys, "validate", f, "--store", "csv", "--csv-dim", "2")
    lines = out.splitlines()
    assert code == 1 and lines[0].startswith(f"{f}:2:3: value 1: ")
    assert lines[1].startswith(f"{f}:3") and "too few fields" in lines[1]


# -- the plug-in point ---------------------------------------------------------------------------------

def test_a_format_plugs_in_with_one_function(tmp_path, monkeypatch, capsys):
    import sys
    import types
    mod = types.ModuleType("fake_validator")

    def validate(path, *, checked, **_):
        checked["rows"] += 2
        yield v.Problem(str(path), "bad-row", "row 2 is bad", offset=10, record="row 2, shard 0")
    mod.validate = validate
    monkeypatch.setitem(sys.modules, "fake_validator", mod)
    monkeypatch.setitem(v.VALIDATORS, "fake", "fake_validator")
    f = tmp_path / "x.fake"
    f.write_bytes(b"whatever")
    summary = v.run([f], format="fake", on_problem=lambda p: None)
    assert summary.errors == 1 and summary.by_kind == {"bad-row": 1} and summary.checked["rows"] == 2
    assert str(next(v.validate(f, "fake"))) == f"{f}: byte offset 10, row 2, shard 0: row 2 is bad"
