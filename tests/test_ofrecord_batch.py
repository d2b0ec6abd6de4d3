"""The compiled batch decoder agrees with the reference raw decoder, and locates problems."""
import struct
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from recordkit import FormatError
from recordkit.errors import ErrorBudgetExceeded
from recordkit.formats.ofrecord import codec, schema
from recordkit.formats.ofrecord.batch import decode_frames, normalize_spec
from recordkit.formats.ofrecord.decoders import raw_decode
from recordkit.formats.ofrecord.reader import OFRecordReader
from recordkit.formats.ofrecord.writer import OFRecordWriter, frame


def frames_of(records):
    return [(codec.encode(r), ("mem", i, 8 * i)) for i, r in enumerate(records)]


def both(records, name, shape, dtype, **kw):
    fast = decode_frames(frames_of(records), normalize_spec({name: dict(shape=shape, dtype=dtype, **kw)}))[name]
    ref = raw_decode([codec.decode(codec.encode(r)) for r in records], name, shape, dtype, **kw)
    return fast, ref


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int32", "int64", "uint8"])
@pytest.mark.parametrize("source", [np.float32, np.float64, np.int32, np.int64])
def test_every_list_kind_to_every_output_dtype(source, dtype):
    rng = np.random.default_rng(0)
    recs = [{"v": (rng.normal(size=6) * 50).astype(source)} for _ in range(5)]
    fast, ref = both(recs, "v", (2, 3), dtype)
    assert fast.shape == (5, 2, 3) and fast.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(fast, ref)


def test_bytes_values_are_signed_int8():
    recs = [{"b": b"\xc8\x01\x7f"}, {"b": b"\x05"}]
    for dtype in ("uint8", "float32", "int32"):
        fast, ref = both(recs, "b", (3,), dtype)
        np.testing.assert_array_equal(fast, ref)
    assert both(recs, "b", (3,), "uint8")[0][0].tolist() == [200, 1, 127]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=8), st.sampled_from(["truncate", "dim1_varying_length"]))
def test_ragged_lists_follow_truncate_and_varying_rules(lengths, mode):
    recs = [{"v": np.arange(n, dtype=np.float32) + 1} for n in lengths]
    fast, ref = both(recs, "v", (5,), "float32", **{mode: True})
    np.testing.assert_array_equal(fast, ref)


def test_unpacked_lists_written_by_other_writers_decode_too():
    msg = schema.OFRecord()
    msg.feature["v"].float_list.value.extend([1.5, 2.5])
    raw = bytearray(msg.SerializeToString())
    # rewrite the packed float run (0a 08 ...) into two unpacked floats (0d xx xx xx xx, twice)
    packed = struct.pack("<ff", 1.5, 2.5)
    at = raw.index(packed)
    unpacked = b"\x0d" + packed[:4] + b"\x0d" + packed[4:]
    list_msg = bytes(unpacked)
    feature = b"\x12" + bytes([len(list_msg)]) + list_msg
    entry = b"\x0a\x01v" + b"\x12" + bytes([len(feature)]) + feature
    record = b"\x0a" + bytes([len(entry)]) + entry
    assert at > 0
    out = decode_frames([(record, ("mem", 0, 0))], normalize_spec({"v": ((2,), "float32")}))["v"]
    assert out.tolist() == [[1.5, 2.5]]
    assert codec.decode(record)["v"].value.tolist() == [1.5, 2.5]  # and protobuf agrees


@pytest.mark.parametrize("records,spec,match", [
    ([{"a": 1}], {"b": ((), "int64")}, r"feature 'b' is missing \(byte offset 0, record 0\)"),
    ([{"a": np.arange(3.0)}], {"a": ((2,), "float32")}, "has 3 values, expected 2"),
    ([{"a": [b"x", b"y"]}], {"a": ((2,), "uint8")}, "exactly one bytes value, has 2"),
])
def test_problems_name_the_feature_and_the_record(records, spec, match):
    with pytest.raises(FormatError, match=match):
        decode_frames(frames_of(records), normalize_spec(spec))


def test_malformed_record_is_reported():
    with pytest.raises(FormatError, match="malformed"):
        decode_frames([(b"\x0a\x50\x00", ("p", 4, 99))], normalize_spec({"a": ((), "int32")}))


def test_reader_batches_match_records_and_honour_the_budget(tmp_path):
    d = tmp_path / "d"
    with OFRecordWriter(d, 2) as w:
        for i in range(10):
            w.write({"img": np.full(4, i, np.float32), "label": np.array([i], np.int32)})
    r = OFRecordReader(d, batch_size=4, epochs=1)
    got = list(r.batches({"img": ((2, 2), np.float32), "label": ((), np.int32)}))
    assert [b["img"].shape for b in got] == [(4, 2, 2), (4, 2, 2), (2, 2, 2)]
    assert sorted(np.concatenate([b["label"] for b in got]).tolist()) == list(range(10))
    assert all((b["img"][:, 0, 0] == b["label"]).all() for b in got)
    # a record without the feature: fails, or is skipped and counted under a budget
    part = sorted(d.iterdir())[0]
    with open(part, "ab") as f:
        f.write(frame(codec.encode({"other": 1})))
    with pytest.raises(ErrorBudgetExceeded, match="feature 'label' is missing"):
        list(OFRecordReader(d, 4, epochs=1).batches({"label": ((), np.int32)}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = OFRecordReader(d, 4, epochs=1, max_errors=1)
        n = sum(len(b["label"]) for b in r.batches({"label": ((), np.int32)}))
    assert n == 10 and r.budget.count == 1


def test_bad_spec_dtype():
    with pytest.raises(ValueError, match="not one of"):
        normalize_spec({"a": ((), np.float16)})


def test_feature_without_a_kind_is_reported_as_such():
    entry = b"\x0a\x01a" + b"\x12\x00"              # key "a", an empty Feature (no list set)
    record = b"\x0a" + bytes([len(entry)]) + entry
    with pytest.raises(FormatError, match="feature 'a' has no kind set"):
        decode_frames([(record, ("mem", 0, 0))], normalize_spec({"a": ((), "int32")}))
    empty_entry = b"\x0a\x00"  # an entry with neither key nor value: no feature named "a"
    with pytest.raises(FormatError, match="feature 'a' is missing"):
        decode_frames([(empty_entry, ("mem", 0, 0))], normalize_spec({"a": ((), "int32")}))
