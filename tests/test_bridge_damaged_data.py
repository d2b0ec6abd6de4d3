"""The bridge formats' data bytes are not trusted: sparse offsets that fall back (in any integer
type), shapes whose size wraps around, damaged Arrow offsets, column names that are not UTF-8 and
shards that no longer match their recorded digests are located errors for `cat`, `read`,
`convert` and `validate` alike, never quietly wrong data nor a traceback."""
from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest

from bridge_corpus import STREAMS, cli, make_ctf, mds_ndarray, npy_bytes, write_mds, write_tar

SPARSE = [{"name": "x", "alias": "x", "format": "sparse", "dim": 10, "precision": "float"}]
SPARSE_COLUMNS = [("x.indices", "ndarray:int32"), ("x.offsets", None), ("x.values", "ndarray:float32")]


def commands(capsys, path, *extra):
    """(exit status, stdout + stderr) of cat, read, validate and convert on ``path``."""
    out = {}
    for name, argv in (("cat", ["cat", path, *extra]), ("read", ["read", path, "--mb-size", "4", *extra]),
                       ("validate", ["validate", path]), ("convert", ["convert", path, f"{path}.ctf", *extra])):
        code, text, err = cli(capsys, *argv)
        out[name] = (code, text + err)
    return out


def assert_all_refuse(capsys, path, *needles, extra=()):
    for name, (code, text) in commands(capsys, path, *extra).items():
        assert code == 1, f"{name}: exit {code}\n{text}"
        for needle in needles:
            assert needle in text, f"{name}: {needle!r} not in\n{text}"


def members_of(shard) -> list[tuple[str, bytes]]:
    with tarfile.open(shard) as t:
        return [(m.name, t.extractfile(m).read()) for m in t.getmembers()]


# -- sparse offsets ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["<u8", "<u4", "|u1"])
def test_webdataset_offsets_that_fall_back_are_refused_when_stored_unsigned(tmp_path, capsys, dtype):
    out = tmp_path / "wds"
    assert cli(capsys, "convert", make_ctf(tmp_path / "in.ctf", n=6), out, "--to", "webdataset", *STREAMS)[0] == 0
    shard = out / "shard-000000.tar"
    members, victim = [], None
    for name, data in members_of(shard):
        if name.endswith(".lab.offsets.npy"):
            off = np.load(io.BytesIO(data)).astype(dtype)
            if victim is None and len(off) >= 4 and off[-1] > 0:
                off[1], off[2] = off[-1], 0  # [0, n, 0, ..., n]: unsigned differences never go negative
                victim = name
            data = npy_bytes(off)
        members.append((name, data))
    write_tar(shard, members)
    assert victim is not None
    assert_all_refuse(capsys, str(out), str(shard), victim, "offsets must rise", "byte offset", "sample 0")


@pytest.mark.parametrize("encoding,offsets", [("ndarray:uint64", [0, 3, 0, 3]),
                                              ("ndarray:int8", [0, 100, -100, 3])])  # int8 steps wrap around
def test_mds_offsets_that_fall_back_are_refused_whatever_their_integer_type(tmp_path, capsys, encoding, offsets):
    columns = [(c, e or encoding) for c, e in SPARSE_COLUMNS]
    good = [mds_ndarray(np.array([7], np.int32)), mds_ndarray(np.array([0, 1], encoding.split(":")[1])),
            mds_ndarray(np.array([7.0], np.float32))]
    bad = [mds_ndarray(np.array([1, 2, 3], np.int32)), mds_ndarray(np.array(offsets, encoding.split(":")[1])),
           mds_ndarray(np.array([1.0, 2.0, 3.0], np.float32))]
    shard = write_mds(tmp_path / "mds", columns, [good, bad], SPARSE)
    assert_all_refuse(capsys, str(tmp_path / "mds"), shard, "x.offsets' must rise", "byte offset", "sample 1")


def test_the_shared_offsets_check_compares_neighbours_never_their_difference():
    from recordkit.formats.csr import join_offsets, offsets_problem
    for dtype in (np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int64):
        assert offsets_problem(np.array([0, 1, 1, 3], dtype), 3) is None
        assert "fall back" in offsets_problem(np.array([0, 3, 0, 3], dtype), 3)
    assert "fall back" in offsets_problem(np.array([0, 100, -100, 3], np.int8), 3)
    assert "not 0" in offsets_problem(np.array([1, 3], np.uint64), 3)
    assert "not the 3" in offsets_problem(np.array([0, 2], np.uint64), 3)
    assert "no offsets" in offsets_problem(np.zeros(0, np.uint64), 0)
    # two sequences' offsets concatenated: the step between them may fall, inside one may not
    indptr, counts = join_offsets(np.array([0, 2, 3, 0, 1], np.uint64), [3, 2], [3, 1])
    assert indptr.tolist() == [0, 2, 3, 4] and counts.tolist() == [2, 1]
    assert join_offsets(np.array([0, 3, 0, 3, 0, 1], np.uint64), [4, 2], [3, 1]) is None


# -- sizes that overflow ------------------------------------------------------------------------------

def test_a_npy_header_claiming_an_impossible_shape_is_a_located_error(tmp_path, capsys):
    out = tmp_path / "wds"
    assert cli(capsys, "convert", make_ctf(tmp_path / "in.ctf", n=6), out, "--to", "webdataset", *STREAMS)[0] == 0
    shard = out / "shard-000000.tar"
    members = members_of(shard)
    name, data = members[0]
    assert name.endswith(".feat.npy")
    text = data[10:10 + int.from_bytes(data[8:10], "little")].decode("latin1")
    text = text[:text.index("'shape': (")] + "'shape': (1099511627776, 1099511627776), }"
    text += " " * ((64 - (10 + len(text) + 1) % 64) % 64) + "\n"
    members[0] = (name, data[:8] + len(text).to_bytes(2, "little") + text.encode("latin1")
                  + data[10 + int.from_bytes(data[8:10], "little"):])
    write_tar(shard, members)
    assert_all_refuse(capsys, str(out), str(shard), name, "claims", "sample 0")


def test_an_mds_shape_whose_size_wraps_around_in_int64_is_a_located_error(tmp_path, capsys):
    streams = [{"name": "d", "alias": "d", "format": "dense", "dim": 4, "precision": "float"}]
    one = np.ones((1, 4), np.float32)
    # (2**62 + 1) x 4 float32 is 2**64 + 16 bytes: 16 in int64 arithmetic, exactly what the column holds
    shard = write_mds(tmp_path / "mds", [("d", "ndarray:float32")],
                      [[mds_ndarray(one, shape=(2**62 + 1, 4))], [mds_ndarray(one)]], streams)
    assert_all_refuse(capsys, str(tmp_path / "mds"), shard, "column 'd': shape (4611686018427387905, 4)",
                      "sample 0")


# -- Arrow files ------------------------------------------------------------------------------------------

def test_a_damaged_offset_in_an_hf_arrow_file_is_located_and_validate_reports_it(tmp_path, capsys):
    import pyarrow as pa
    out = tmp_path / "hf"
    assert cli(capsys, "convert", make_ctf(tmp_path / "in.ctf", n=6), out, "--to", "hf", *STREAMS)[0] == 0
    path = out / "data-00000-of-00001.arrow"
    data = bytearray(path.read_bytes())
    batch = next(iter(pa.ipc.open_stream(bytes(data))))
    offs = batch.column(batch.schema.get_field_index("feat")).buffers()[1].to_pybytes()[:4 * (batch.num_rows + 1)]
    at = bytes(data).find(offs)
    assert at > 0 and bytes(data).find(offs, at + 1) < 0
    o = np.frombuffer(offs, "<i4").copy()
    o[1], o[2] = o[2], o[1]  # the sequences' sample offsets out of order, still inside the values
    data[at:at + len(offs)] = o.tobytes()
    path.write_bytes(bytes(data))
    assert_all_refuse(capsys, str(out), str(path), "record batch 0", "non-monotonic offset")


@pytest.mark.parametrize("fmt", ["parquet", "hf"])
def test_column_names_that_are_not_utf8_are_located_errors(tmp_path, capsys, fmt):
    out = tmp_path / "out"
    assert cli(capsys, "convert", make_ctf(tmp_path / "in.ctf", n=6), out, "--to", fmt, *STREAMS)[0] == 0
    path = out if fmt == "parquet" else out / "data-00000-of-00001.arrow"
    data = path.read_bytes()
    # the field name 'feat' in the schema / footer (length-prefixed, not inside the JSON metadata)
    hits = [i for i in range(len(data)) if data[i:i + 4] == b"feat" and data[i - 1:i] != b'"']
    assert hits
    damaged = bytearray(data)
    for i in hits:
        damaged[i] = 0xFF
    path.write_bytes(bytes(damaged))
    assert_all_refuse(capsys, str(out), str(path), "UTF-8")


# -- digests ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("algo", ["sha1", "sha256", "md5"])
def test_validate_reports_an_mds_shard_that_no_longer_matches_its_recorded_digest(tmp_path, capsys, algo):
    columns = [("d", "ndarray:float32")]
    samples = [[mds_ndarray(np.full((2, 4), k, np.float32))] for k in range(3)]
    streams = [{"name": "d", "alias": "d", "format": "dense", "dim": 4, "precision": "float"}]
    shard = write_mds(tmp_path / "mds", columns, samples, streams, hashes=[algo])
    code, _, err = cli(capsys, "validate", tmp_path / "mds")
    assert code == 0, err
    data = bytearray(Path(shard).read_bytes())
    data[-1] ^= 0x01  # one value's lowest bit: still a well-formed shard
    Path(shard).write_bytes(bytes(data))
    code, text, err = cli(capsys, "validate", tmp_path / "mds")
    assert code == 1, text + err
    assert shard in text and algo in text and "shard 0" in text and "mds-digest-mismatch" in err, text + err
    assert hashlib.new(algo, bytes(data)).hexdigest() in text


def test_validate_checks_the_sha1_that_convert_checksum_writes(tmp_path, capsys):
    out = tmp_path / "mds"
    assert cli(capsys, "convert", make_ctf(tmp_path / "in.ctf", n=6), out, "--to", "mds", *STREAMS,
               "--checksum")[0] == 0
    for sidecar in out.glob("*.rkcrc"):  # as a data set written by Streaming itself: only index.json's hashes
        sidecar.unlink()
    shard = out / "shard.00000.mds"
    data = bytearray(shard.read_bytes())
    data[-2] ^= 0x10
    shard.write_bytes(bytes(data))
    code, text, err = cli(capsys, "validate", out)
    assert code == 1 and str(shard) in text and "sha1" in text, text + err


def test_a_digest_recordkit_cannot_compute_is_a_warning_not_a_pass_or_a_failure(tmp_path, capsys):
    streams = [{"name": "d", "alias": "d", "format": "dense", "dim": 4, "precision": "float"}]
    write_mds(tmp_path / "mds", [("d", "ndarray:float32")], [[mds_ndarray(np.ones((1, 4), np.float32))]], streams)
    index = json.loads((tmp_path / "mds" / "index.json").read_text())
    index["shards"][0]["raw_data"]["hashes"] = {"no-such-hash": "00"}
    (tmp_path / "mds" / "index.json").write_text(json.dumps(index))
    code, text, err = cli(capsys, "validate", tmp_path / "mds")
    assert code == 0 and "warning" in text and "no-such-hash" in text, text + err


# -- byte damage, format by format -------------------------------------------------------------------------

FORMATS = ["parquet", "hf", "webdataset", "mds", "tfrecord"]


def damaged_copies(good: bytes, data_end: int):
    """A few deterministic damages: single bytes flipped across the data, the file cut short."""
    for frac in (0.2, 0.4, 0.55, 0.7, 0.85):
        for mask in (0xFF, 0x01):
            data = bytearray(good)
            data[int(data_end * frac)] ^= mask
            yield f"byte {int(data_end * frac)} ^ {mask:#x}", bytes(data)
    for frac in (0.5, 0.97):
        yield f"cut at {int(len(good) * frac)}", good[:int(len(good) * frac)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_byte_damage_ends_in_a_located_error_or_in_data_every_command_reads(tmp_path, capsys, fmt):
    """No traceback from any command; and what validate passes, cat, read and convert read too."""
    base = tmp_path / "good"
    assert cli(capsys, "convert", make_ctf(tmp_path / "in.ctf", n=12), base, "--to", fmt, *STREAMS)[0] == 0
    if base.is_dir():
        names = [n for n in os.listdir(base) if not n.endswith((".json", ".rkcrc"))]
        victim = max(names, key=lambda n: os.path.getsize(base / n))
    else:
        victim = None
    good = (base / victim if victim else base).read_bytes()
    data_end = len(good)
    if fmt == "parquet":  # the footer's column statistics: pyarrow aborts the process on some damage there
        data_end = len(good) - 8 - int.from_bytes(good[-8:-4], "little")
    for what, data in damaged_copies(good, data_end):
        case = tmp_path / "case"
        shutil.rmtree(case, ignore_errors=True)
        if os.path.exists(f"{case}.ctf"):
            os.remove(f"{case}.ctf")
        if victim:
            shutil.copytree(base, case)
            for sidecar in case.glob("*.rkcrc"):
                sidecar.unlink()
            (case / victim).write_bytes(data)
        else:
            case.write_bytes(data)
        results = commands(capsys, str(case))  # an exception escaping main() fails the test here
        if results["validate"][0] == 0:
            for name, (code, text) in results.items():
                assert code == 0, f"{what}: validate passed, {name} failed:\n{text}"
        else:
            assert results["validate"][0] == 1, f"{what}: {results['validate'][1]}"


def test_a_damaged_parquet_footer_never_aborts_the_process(tmp_path):
    """Every byte of a Parquet footer's first 130 bytes changed in turn: opening and reading the file
    is the data or a located error, never the process killed (pyarrow's column-chunk metadata checks
    its level histograms in a constructor whose exception cannot be caught: an abort)."""
    import struct
    import recordkit
    from recordkit.errors import RecordkitError
    from recordkit.formats.parquet import ParquetDeserializer
    src = tmp_path / "a.ctf"
    src.write_text("".join(f"{k} |x {k} {k + 0.5} -1 |y {k % 7}:1\n" for k in range(50)))
    good = tmp_path / "a.parquet"
    recordkit.convert(src, good, streams=["x=dense:3", "y=sparse:7"])
    data = good.read_bytes()
    footer = len(data) - 8 - struct.unpack("<I", data[-8:-4])[0]
    bad = tmp_path / "b.parquet"
    died = []
    for pos in range(footer, min(footer + 130, len(data) - 8)):
        damaged = bytearray(data)
        damaged[pos] ^= 0x55
        bad.write_bytes(bytes(damaged))
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports by its exit status
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
            try:
                with ParquetDeserializer(str(bad)) as r:
                    for c in range(len(r.chunks)):
                        r.load_chunk(c)
            except RecordkitError:
                pass
            except BaseException:
                os._exit(3)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            died.append((pos - footer, status))
    assert died == [], f"footer byte (offset in footer, wait status): {died[:10]}"
