"""OFRecord: codec, framing, part files, sharded writer, reader with OneFlow's parameters, CLI."""
import base64
import json
import os
import struct
import warnings

import numpy as np
import pytest

from recordkit import FormatError
from recordkit.cli.main import main
from recordkit.errors import ErrorBudgetExceeded
from recordkit.formats.ofrecord import codec, schema
from recordkit.formats.ofrecord.dataset import load_index, part_name, part_paths, scan_part, sidecar_path
from recordkit.formats.ofrecord.reader import OFRecordReader, balanced_split
from recordkit.formats.ofrecord.writer import OFRecordWriter, frame


def labels(batches):
    return [[int(r["label"].value[0]) for r in b] for b in batches]


def write_set(d, n=10, parts=3, **kw):
    with OFRecordWriter(d, parts, **kw) as w:
        for i in range(n):
            w.write({"x": np.full(3, i / 3, np.float32), "label": i, "name": f"r{i}"})
    return d


# -- codec -------------------------------------------------------------------------------------

def test_hand_computed_test_vector_of_the_spec():
    assert frame(codec.encode({"label": 3})).hex() == "1000000000000000" "0a0e0a056c6162656c12052a030a0103"


def test_values_keep_their_types_through_a_round_trip():
    rec = {"f32": np.array([0.1, -2.5], np.float32), "f64": np.array([0.1]), "i32": np.array([-7, 2**31 - 1], np.int32),
           "i64": np.array([-(2**63), 2**63 - 1]), "py_int": 5, "py_float": 0.1, "b": b"\x00\xff", "s": "héllo",
           "many": [b"a", b"bc"], "empty": np.zeros(0, np.float32), "u8": np.array([200], np.uint8)}
    back = codec.decode(codec.encode(rec))
    assert back["f32"] == codec.Feature("float_list", np.array([0.1, -2.5], np.float32))
    assert back["f64"].kind == "double_list" and back["f64"].value[0] == 0.1
    assert back["i32"].value.dtype == np.int32 and back["i32"].value.tolist() == [-7, 2**31 - 1]
    assert back["i64"].value.tolist() == [-(2**63), 2**63 - 1]
    assert back["py_int"].kind == "int64_list" and back["py_float"].kind == "double_list"
    assert back["b"].value == [b"\x00\xff"] and back["s"].value == ["héllo".encode()]
    assert back["many"].value == [b"a", b"bc"]
    assert back["empty"].kind == "float_list" and len(back["empty"]) == 0  # kind kept for an empty list
    assert back["u8"].kind == "int32_list" and back["u8"].value.tolist() == [200]


def test_records_written_by_protobuf_directly_decode_the_same():
    msg = schema.OFRecord()
    msg.feature["images"].float_list.value.extend([1.5, 2.5])
    msg.feature["labels"].int32_list.value.append(7)
    rec = codec.decode(msg.SerializeToString())
    assert rec["images"].value.tolist() == [1.5, 2.5] and rec["labels"].value.tolist() == [7]


def test_unsupported_values_are_rejected():
    with pytest.raises(TypeError, match="cannot store"):
        codec.encode({"x": np.array([1 + 2j])})
    with pytest.raises(TypeError, match="names must be str"):
        codec.encode({1: 2})


def test_garbage_record_is_a_located_error():
    with pytest.raises(FormatError, match=r"does not parse.*byte offset 40, record 3"):
        codec.decode(b"\xff\xff\xff", path="p", offset=40, index=3)


# -- framing and parts ----------------------------------------------------------------------------

@pytest.mark.parametrize("tail,what", [
    (struct.pack("<q", 0), "record length 0 is not positive"),
    (struct.pack("<q", -5), "record length -5 is not positive"),
    (struct.pack("<q", 100) + b"abc", "runs past the end of the file"),
    (b"\x01\x02\x03", "3 bytes left at the end"),
])
def test_broken_frames_are_reported_with_offset_and_record_index(tmp_path, tail, what):
    good = frame(codec.encode({"a": 1}))
    p = tmp_path / "part-0"
    p.write_bytes(good * 2 + tail)
    index = scan_part(str(p))
    assert len(index) == 2
    err = index.error()
    assert what in str(err) and err.offset == 2 * len(good) and "record 2" in str(err)


def test_part_names_follow_oneflow():
    assert [part_name("part-", i, -1) for i in (0, 10)] == ["part-0", "part-10"]
    assert part_name("part-", 7, 5) == "part-00007" and part_name("part-", 100, 2) == "part-100"


def test_parts_are_discovered_or_named_and_missing_parts_are_errors(tmp_path):
    d = write_set(tmp_path / "d", parts=3)
    assert [os.path.basename(p) for p in part_paths(d)] == ["part-00000", "part-00001", "part-00002"]
    assert len(part_paths(d, data_part_num=2, part_name_suffix_length=5)) == 2
    with pytest.raises(FileNotFoundError, match="part-0: part file missing"):
        part_paths(d, data_part_num=3)  # suffix length -1 names part-0, which does not exist


def test_sidecar_index_is_written_reused_and_rebuilt_when_stale(tmp_path):
    d = write_set(tmp_path / "d", parts=1)
    p = part_paths(d)[0]
    first = load_index(p, write=True)
    assert os.path.exists(sidecar_path(p))
    again = load_index(p)
    assert again.offsets.tolist() == first.offsets.tolist()
    with open(p, "ab") as f:
        f.write(frame(codec.encode({"label": 99})))
    assert len(load_index(p)) == len(first) + 1  # size changed: the sidecar is not trusted
    with open(sidecar_path(p), "wb") as f:
        f.write(b"garbage")
    assert len(load_index(p)) == len(first) + 1


# -- writer --------------------------------------------------------------------------------------

def test_round_robin_and_contiguous_sharding(tmp_path):
    rr = write_set(tmp_path / "rr", n=10, parts=4)
    assert [len(scan_part(p)) for p in part_paths(rr)] == [3, 3, 2, 2]
    assert labels([list(OFRecordReader(p, 100, epochs=1).records()) for p in part_paths(rr)])[0] == [0, 4, 8]
    ct = write_set(tmp_path / "ct", n=10, parts=4, sharding="contiguous", total=10)
    assert labels([list(OFRecordReader(p, 100, epochs=1).records()) for p in part_paths(ct)]) == \
        [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]


def test_no_empty_parts_are_written(tmp_path):
    d = write_set(tmp_path / "d", n=2, parts=5)
    assert len(os.listdir(d)) == 2


def test_interrupted_writer_leaves_no_part(tmp_path):
    d = tmp_path / "d"
    with pytest.raises(RuntimeError):
        with OFRecordWriter(d, 2) as w:
            w.write({"a": 1})
            raise RuntimeError("killed")
    assert not d.exists() and os.listdir(tmp_path) == []  # no data set, no staging directory left


def test_rewriting_swaps_the_whole_data_set_and_keeps_other_files(tmp_path):
    d = tmp_path / "d"
    with OFRecordWriter(d, 3) as w:
        for i in range(9):
            w.write({"a": i})
    (d / "README.txt").write_text("mine")
    (d / "notes").mkdir()
    (d / "notes" / "n.txt").write_text("also mine")
    with OFRecordWriter(d, 2, checksums=True) as w:
        for i in range(4):
            w.write({"a": 100 + i})
    assert sorted(os.listdir(d)) == ["README.txt", "notes", "part-00000", "part-00000.rkcrc", "part-00001",
                                     "part-00001.rkcrc"]
    assert (d / "notes" / "n.txt").read_text() == "also mine"
    assert sorted(int(r[0]["a"].value[0]) for r in OFRecordReader(d, epochs=1)) == [100, 101, 102, 103]
    assert [n for n in os.listdir(tmp_path) if n != "d"] == []  # staging directory gone


# -- reader ----------------------------------------------------------------------------------------

def test_batches_epochs_partial_last_batch_and_len(tmp_path):
    d = write_set(tmp_path / "d", n=10, parts=3)
    r = OFRecordReader(d, batch_size=4, epochs=1)
    got = labels(r)
    assert len(r) == 3 and [len(b) for b in got] == [4, 4, 2]
    assert sorted(x for b in got for x in b) == list(range(10))
    assert [len(b) for b in OFRecordReader(d, 4, epochs=1, drop_last=True)] == [4, 4]
    endless = iter(OFRecordReader(d, 4))  # OneFlow's default: endless, full batches across epochs
    assert [len(next(endless)) for _ in range(5)] == [4] * 5


def test_shuffle_buffer_is_a_seeded_permutation(tmp_path):
    d = write_set(tmp_path / "d", n=30, parts=3)
    a = [x for b in labels(OFRecordReader(d, 7, epochs=1, random_shuffle=True, shuffle_buffer_size=8,
                                          random_seed=3)) for x in b]
    b = [x for b in labels(OFRecordReader(d, 7, epochs=1, random_shuffle=True, shuffle_buffer_size=8,
                                          random_seed=3)) for x in b]
    assert a == b and sorted(a) == list(range(30)) and a != sorted(a)


def test_ranks_get_contiguous_balanced_parts(tmp_path):
    assert [list(balanced_split(10, 4, i)) for i in range(4)] == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]
    d = write_set(tmp_path / "d", n=12, parts=4)
    shares = [set(x for b in labels(OFRecordReader(d, 5, epochs=1, rank=r, world_size=3)) for x in b)
              for r in range(3)]
    assert set.union(*shares) == set(range(12)) and sum(map(len, shares)) == 12
    # more ranks than parts: split at record boundaries (tests/test_ofrecord_ranks.py); fewer records than ranks fails
    with pytest.raises(ValueError, match="every rank needs at least one record"):
        OFRecordReader(d, 5, rank=0, world_size=13)


def test_shuffle_after_epoch_changes_part_order_but_not_epoch_zero(tmp_path):
    d = write_set(tmp_path / "d", n=8, parts=8)
    r = OFRecordReader(d, 8, epochs=3, shuffle_after_epoch=True)
    assert r.parts_for_epoch(0) == part_paths(d) and r.parts_for_epoch(1) != r.parts_for_epoch(2)
    epochs = labels(r)
    assert epochs[0] == list(range(8)) and sorted(epochs[1]) == list(range(8))


def test_bad_records_fail_or_are_skipped_under_a_budget(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    good = [frame(codec.encode({"label": i})) for i in range(4)]
    (d / "part-0").write_bytes(good[0] + frame(b"\xff\xff") + good[1] + struct.pack("<q", 50) + b"cut")
    with pytest.raises(ErrorBudgetExceeded, match="does not parse"):
        list(OFRecordReader(d, 10, epochs=1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = OFRecordReader(d, 10, epochs=1, max_errors=2)
        assert labels(r) == [[0, 1]]
    assert r.budget.count == 2 and any("rest of the part skipped" in str(w.message) for w in caught)


# -- CLI -------------------------------------------------------------------------------------------

def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cat_prints_records_in_part_then_file_order(tmp_path, capsys):
    d = write_set(tmp_path / "d", n=5, parts=2)
    code, out, _ = run(capsys, "cat", str(d))
    recs = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["label"]["values"][0] for r in recs] == [0, 2, 4, 1, 3]
    assert recs[1]["x"] == {"kind": "float_list", "values": [0.6666667, 0.6666667, 0.6666667]}
    assert np.float32(recs[1]["x"]["values"][0]) == np.float32(2 / 3)  # reads back to the same float32
    assert base64.b64decode(recs[0]["name"]["values"][0]) == b"r0"


def test_validate_reports_every_problem_and_fails(tmp_path, capsys):
    d = tmp_path / "d"
    d.mkdir()
    good = frame(codec.encode({"a": 1}))
    (d / "part-0").write_bytes(good + frame(b"\xff") + good)
    (d / "part-1").write_bytes(good + struct.pack("<q", 0))
    code, out, err = run(capsys, "validate", str(d))
    assert code == 1
    assert f"{d / 'part-0'}: byte offset {len(good)}, record 1:" in out
    assert f"{d / 'part-1'}: byte offset {len(good)}, record 1: record length 0 is not positive" in out
    assert "2 problem(s)" in err
    write_set(tmp_path / "ok")
    assert run(capsys, "validate", str(tmp_path / "ok"))[0] == 0


def test_inspect_and_stats(tmp_path, capsys):
    d = write_set(tmp_path / "d", n=6, parts=2)
    code, out, _ = run(capsys, "inspect", str(d), "--json")
    info = json.loads(out)
    assert code == 0 and info["records"] == 6 and info["features"]["x"]["kinds"] == {"float_list": 6}
    code, out, _ = run(capsys, "stats", str(d), "--json")
    s = json.loads(out)
    assert s["records"] == 6 and s["features"]["label"]["sum"] == 15 and s["features"]["x"]["values"] == 18


def test_reshard_keeps_every_record_in_order(tmp_path, capsys):
    d = write_set(tmp_path / "d", n=11, parts=3, sharding="contiguous", total=11)
    code, _, _ = run(capsys, "reshard", str(d), str(tmp_path / "out"), "--parts", "4")
    assert code == 0 and sorted(os.listdir(tmp_path / "out")) == [f"part-0000{i}" for i in range(4)]
    _, a, _ = run(capsys, "cat", str(d))
    _, b, _ = run(capsys, "cat", str(tmp_path / "out"))
    assert a == b


# -- the compiled encoder is protobuf's deterministic serialization ------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402

_values = st.one_of(
    st.lists(st.floats(width=32, allow_nan=False), max_size=6).map(lambda v: np.array(v, np.float32)),
    st.lists(st.floats(allow_nan=False), max_size=6).map(lambda v: np.array(v, np.float64)),
    st.lists(st.integers(-(2**31), 2**31 - 1), max_size=6).map(lambda v: np.array(v, np.int32)),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=6).map(lambda v: np.array(v, np.int64)),
    st.lists(st.binary(max_size=300), min_size=1, max_size=3),
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(min_size=0, max_size=12), _values, max_size=5))
def test_encoder_matches_protobuf_deterministic_serialization(record):
    ours = codec.encode(record)
    parsed = schema.OFRecord()
    parsed.ParseFromString(ours)
    assert parsed == codec.to_message(record)  # the same message
    keys = sorted(k.encode() for k in record)
    if not any(b.startswith(a) for a, b in zip(keys, keys[1:])):
        # entries sorted by key: upb agrees byte for byte unless one key is a prefix of
        # another (upb then puts the longer first; C++ protobuf, like us, the shorter)
        assert ours == codec.to_message(record).SerializeToString(deterministic=True)


def test_writer_output_is_the_same_every_run(tmp_path):
    rec = {name: np.arange(3, dtype=np.float32) for name in ("zeta", "alpha", "mid", "b", "a")}
    assert len({codec.encode(rec) for _ in range(5)}) == 1


def test_random_access_by_index(tmp_path):
    from recordkit.formats.ofrecord.dataset import OFRecordDataset
    d = write_set(tmp_path / "d", n=10, parts=3)
    with OFRecordDataset(d) as ds:
        assert len(ds) == 10
        # round robin over 3 parts: part 0 holds 0,3,6,9; part 1 1,4,7; part 2 2,5,8
        assert [int(ds[i]["label"].value[0]) for i in range(10)] == [0, 3, 6, 9, 1, 4, 7, 2, 5, 8]
        assert int(ds[-1]["label"].value[0]) == 8
        with pytest.raises(IndexError):
            ds[10]
    assert all(os.path.exists(sidecar_path(p)) for p in part_paths(d))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(min_size=0, max_size=12), _values, max_size=5))
def test_compiled_decoder_agrees_with_protobuf(record):
    data = codec.encode(record)
    msg = schema.OFRecord()
    msg.ParseFromString(data)
    reference = codec.from_message(msg)
    ours = codec.decode(data)
    assert ours == reference
    assert all(ours[k].value.dtype == reference[k].value.dtype for k in ours if ours[k].kind != "bytes_list")


@pytest.mark.parametrize("block", [9, 20, 50, 1 << 20])
def test_block_wise_scanning_and_reading_match_a_whole_file_scan(tmp_path, monkeypatch, block):
    from recordkit.formats.ofrecord import _kernel, dataset
    rng = np.random.default_rng(1)
    frames = [frame(codec.encode({"v": rng.random(int(rng.integers(0, 40))).astype(np.float32), "i": i}))
              for i in range(30)]
    for tail in (b"", struct.pack("<q", 500) + b"cut", b"\x01\x02"):
        p = tmp_path / f"part-{len(tail)}"
        p.write_bytes(b"".join(frames) + tail)
        data = np.frombuffer(p.read_bytes(), np.uint8)
        ref_o, ref_n, ref_problem = _kernel.scan_frames(data)
        monkeypatch.setattr(dataset, "SCAN_BLOCK", block)
        index = scan_part(str(p))
        assert index.offsets.tolist() == ref_o.tolist() and index.lengths.tolist() == ref_n.tolist()
        assert (index.problem is None) == (ref_problem is None)
        if ref_problem:
            assert index.problem[:3] == ref_problem[:3]
        monkeypatch.setattr(OFRecordReader, "READ_BLOCK", block)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = [int(r["i"].value[0]) for r in OFRecordReader(p, 7, epochs=1, max_errors=1).records()]
        assert got == list(range(30))


def test_symlinked_or_current_directory_targets_are_rewritten_in_place(tmp_path, monkeypatch):
    real = tmp_path / "real"
    with OFRecordWriter(real, 2) as w:
        for i in range(4):
            w.write({"a": i})
    link = tmp_path / "link"
    link.symlink_to(real)
    with OFRecordWriter(link, 1) as w:
        w.write({"a": 7})
    assert link.is_symlink() and sorted(os.listdir(real)) == ["part-00000"]
    monkeypatch.chdir(real)
    with OFRecordWriter(".", 1) as w:
        w.write({"a": 8})
    assert os.getcwd() == str(real) and os.path.exists(os.getcwd())
    assert [int(r[0]["a"].value[0]) for r in OFRecordReader(real, epochs=1)] == [8]


def test_a_new_data_set_directory_gets_the_usual_permissions(tmp_path):
    d = tmp_path / "fresh"
    with OFRecordWriter(d, 1) as w:
        w.write({"a": 1})
    mask = os.umask(0)
    os.umask(mask)
    assert (d.stat().st_mode & 0o777) == (0o777 & ~mask)
