"""Fuzz tests: mutated OFRecord records and part files never crash the reader.

Contract: only ``RecordkitError`` subclasses escape (``FormatError`` naming the file and
position), the compiled kernels never read out of bounds, and a length that claims 2^62
bytes is an error, not an allocation. Inputs are valid records (``codec.encode``) put
through bit flips, truncations, varint overflows, lying length fields, wrong wire types
and nested garbage, plus raw protobuf wire trees built from scratch.
"""
from __future__ import annotations

import atexit
import itertools
import shutil
import os
import struct
import tempfile
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from recordkit.errors import FormatError, RecordkitError
from recordkit.formats.ofrecord import _kernel, codec
from recordkit.formats.ofrecord.dataset import scan_part
from recordkit.formats.ofrecord.reader import OFRecordReader

from .wire import varint

SETTINGS = settings(max_examples=250, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
NAMES = ["x", "y", "b", "z", "\u00e9"]
SPECIAL_LENGTHS = [0, 1, 2**31 - 1, 2**31, 2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1]
_counter = itertools.count()
_TMP = tempfile.mkdtemp(prefix="rk-fuzz-ofrecord-")
atexit.register(shutil.rmtree, _TMP, True)


# -- generators --------------------------------------------------------------------------------------
@st.composite
def feature_values(draw):
    kind = draw(st.sampled_from(["f32", "f64", "i32", "i64", "bytes", "empty"]))
    n = draw(st.integers(0, 6))
    if kind == "f32":
        return np.array(draw(st.lists(st.floats(width=32, allow_nan=False), min_size=n, max_size=n)), np.float32)
    if kind == "f64":
        return np.array(draw(st.lists(st.floats(allow_nan=False), min_size=n, max_size=n)), np.float64)
    if kind == "i32":
        return np.array(draw(st.lists(st.integers(-2**31, 2**31 - 1), min_size=n, max_size=n)), np.int32)
    if kind == "i64":
        return np.array(draw(st.lists(st.integers(-2**63, 2**63 - 1), min_size=n, max_size=n)), np.int64)
    if kind == "bytes":
        return draw(st.lists(st.binary(max_size=8), min_size=1, max_size=3))
    return np.zeros(0, np.float32)


@st.composite
def valid_records(draw):
    names = draw(st.lists(st.sampled_from(NAMES), max_size=4, unique=True))
    return codec.encode({name: draw(feature_values()) for name in names})


@st.composite
def wire_messages(draw, depth=0):
    """Raw protobuf wire format: random fields, nested messages, lengths that may lie."""
    parts = []
    for _ in range(draw(st.integers(0, 4))):
        field = draw(st.sampled_from([1, 1, 1, 2, 3, 4, 5, 0, 15, 16, 2**29 - 1]))
        wire = draw(st.sampled_from([0, 1, 2, 2, 2, 3, 4, 5, 6, 7]))
        parts.append(varint((field << 3) | wire))
        if wire == 0:
            parts.append(varint(draw(st.sampled_from(SPECIAL_LENGTHS + [5, 127, 128]))))
        elif wire == 1:
            parts.append(draw(st.binary(min_size=0, max_size=8)))
        elif wire == 5:
            parts.append(draw(st.binary(min_size=0, max_size=4)))
        elif wire == 2:
            if depth < 4 and draw(st.booleans()):
                body = draw(wire_messages(depth + 1))
            else:
                body = draw(st.binary(max_size=12))
            lie = draw(st.sampled_from([None, None, None] + SPECIAL_LENGTHS + [len(body) + 1, -1]))
            parts.append(varint(len(body) if lie is None else lie))
            parts.append(body)
    return b"".join(parts)


@st.composite
def mutated(draw, base):
    data = bytearray(draw(base))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "truncate", "insert", "varint", "wiretype", "splice", "delete"]))
        pos = draw(st.integers(0, len(data))) if data else 0
        if op == "flip" and data:
            pos = min(pos, len(data) - 1)
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del data[pos:]
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=6))
        elif op == "delete":
            del data[pos:pos + draw(st.integers(1, 4))]
        elif op == "varint":
            special = draw(st.sampled_from(SPECIAL_LENGTHS + [-1]))
            raw = varint(special) if draw(st.booleans()) else b"\xff" * draw(st.integers(9, 12)) + b"\x01"
            data[pos:pos + draw(st.integers(0, 3))] = raw
        elif op == "wiretype" and data:
            pos = min(pos, len(data) - 1)
            data[pos] = (data[pos] & ~7) | draw(st.integers(0, 7))
        elif op == "splice":
            data[pos:pos] = draw(wire_messages())
    return bytes(data)


record_bytes = st.one_of(valid_records(), mutated(valid_records()), wire_messages(), mutated(wire_messages()),
                         st.binary(max_size=40))


def frame_bytes(payloads, frame_ops):
    out = bytearray()
    for payload, op in zip(payloads, frame_ops):
        if op == "ok":
            out += struct.pack("<q", len(payload)) + payload
        elif op == "zero":
            out += struct.pack("<q", 0) + payload
        elif op == "negative":
            out += struct.pack("<q", -len(payload) - 1) + payload
        elif op == "huge":
            out += struct.pack("<q", 2**62) + payload
        elif op == "short":
            out += struct.pack("<q", len(payload))[:3]
        elif op == "long":
            out += struct.pack("<q", len(payload) + 5) + payload
    return bytes(out)


frame_op = st.sampled_from(["ok"] * 8 + ["zero", "negative", "huge", "short", "long"])


def new_part(content: bytes) -> str:
    d = os.path.join(_TMP, f"ds{next(_counter)}")
    os.makedirs(d)
    path = os.path.join(d, "part-00000")
    with open(path, "wb") as f:
        f.write(content)
    return path


def check_located(e: FormatError, path: str) -> None:
    assert isinstance(e, RecordkitError)
    assert e.path == path, (e.path, path)
    assert str(e).startswith(path), str(e)
    assert e.offset is not None or e.line is not None, f"no position in {e}"


# -- record level ------------------------------------------------------------------------------------
def decode_or_error(data: bytes):
    try:
        return codec.decode(data, path="P.ofrecord", offset=16, index=2)
    except FormatError as e:
        check_located(e, "P.ofrecord")
        assert e.record == "record 2"
        return None


@SETTINGS
@given(record_bytes)
def test_codec_decode_mutated(data):
    rec = decode_or_error(data)
    if rec is not None:
        for name, f in rec.items():
            assert isinstance(name, str) and f.kind in codec.KINDS


@SETTINGS
@given(record_bytes)
def test_kernel_decode_record_mutated(data):
    out = _kernel.decode_record(np.frombuffer(data, np.uint8))
    assert out is None or isinstance(out, dict)
    if out:
        for name, (kind, value) in out.items():
            assert 0 <= kind <= 5
            if kind not in (0, 1):
                assert value.ndim == 1 and value.nbytes <= 8 * max(len(data), 1)


@SETTINGS
@given(st.lists(record_bytes, min_size=1, max_size=5), st.sampled_from([0, 1, 3, 7]),
       st.sampled_from(["float32", "float64", "int8", "int32", "int64", "uint8"]), st.integers(0, 2),
       st.sampled_from(NAMES))
def test_kernel_decode_numeric_mutated(records, k, dtype, mode, name):
    lengths = np.array([len(r) for r in records], np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    buf = np.frombuffer(b"".join(records), np.uint8) if any(records) else np.zeros(0, np.uint8)
    arr, problem = _kernel.decode_numeric(buf, offsets, lengths, name.encode("utf-8"), k, dtype, mode)
    assert arr.shape == (len(records), k) and arr.dtype == np.dtype(dtype)
    if problem is not None:
        code, r, _ = problem
        assert 1 <= code <= 5 and 0 <= r < len(records)


@SETTINGS
@given(st.binary(max_size=64), st.lists(st.sampled_from([0, 1, -1, 2**62, -(2**63), 2**63 - 1, 7]), max_size=4))
def test_kernel_scan_frames_garbage(junk, lengths):
    data = b"".join(struct.pack("<q", n) for n in lengths) + junk
    offsets, lens, problem = _kernel.scan_frames(np.frombuffer(data, np.uint8))
    assert len(offsets) == len(lens)
    for o, n in zip(offsets.tolist(), lens.tolist()):
        assert 8 <= o and n > 0 and o + n <= len(data)
    if problem is not None:
        code, off, idx, _ = problem
        assert code in (1, 2, 3, 4) and 0 <= off <= len(data) and idx == len(offsets)


def test_length_two_to_the_62_is_an_error_not_an_allocation():
    path = new_part(struct.pack("<q", 2**62) + b"\x0a\x00")
    index = scan_part(path)
    err = index.error()
    assert err is not None and err.offset == 0 and err.path == path
    with pytest.raises(FormatError) as info:
        list(OFRecordReader(path, batch_size=4, epochs=1, rank=0, world_size=1).records())
    check_located(info.value, path)
    # inside a record: a bytes value claiming 2^62 bytes
    rec = b"\x0a" + varint(14) + b"\x0a\x01x\x12" + varint(11) + b"\x0a" + varint(9) + b"\x0a" + varint(2**62)
    assert _kernel.decode_record(np.frombuffer(rec, np.uint8)) is None
    with pytest.raises(FormatError):
        codec.decode(rec, path="r", offset=0)


# -- part files and the reader -----------------------------------------------------------------------
SPEC = {"x": ((3,), np.float32), "y": ((), np.int64),
        "b": {"shape": (4,), "dtype": "uint8", "truncate": True},
        "z": {"shape": (2,), "dtype": "float64", "dim1_varying_length": True}}


def drain(path, how, max_errors):
    reader = OFRecordReader(path, batch_size=3, epochs=1, rank=0, world_size=1, max_errors=max_errors)
    try:
        if how == "records":
            return sum(len(b) for b in reader)
        spec = {k: SPEC[k] for k in how}
        return sum(len(next(iter(b.values()))) for b in reader.batches(spec))
    finally:
        reader.close()


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(record_bytes, min_size=0, max_size=6), st.lists(frame_op, min_size=6, max_size=6),
       st.binary(max_size=10),
       st.sampled_from(["records", ("x",), ("y",), ("x", "y"), ("b",), ("z", "y")]), st.sampled_from([0, 2, 100]))
def test_part_file_mutated(records, ops, tail, how, max_errors):
    path = new_part(frame_bytes(records, ops) + tail)
    index = scan_part(path)
    assert index.size == os.path.getsize(path)
    err = index.error()
    if err is not None:
        check_located(err, path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            n = drain(path, how, max_errors)
            assert n <= len(records)
        except FormatError as e:
            check_located(e, path)


# -- findings, fixed: regression tests ---------------------------------------------------------------
@pytest.mark.parametrize("data", [b"\x00\x00", b"\x00" * 16, b"\x02\x00", b"\x80\x80\x80\x80\x80\x08\x08",
                                  b"\n\x07\n\x01x\x12\x02\x12\x00\x00\x00"])
def test_invalid_tag_is_format_error(data):
    from recordkit.formats.ofrecord import schema
    with pytest.raises(Exception):
        schema.OFRecord().ParseFromString(data)  # protobuf (the reference) rejects these bytes
    with pytest.raises(FormatError) as info:
        codec.decode(data, path="P.ofrecord", offset=0, index=0)
    check_located(info.value, "P.ofrecord")
