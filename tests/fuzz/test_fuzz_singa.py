"""Fuzz tests: mutated SINGA KVFile / BinFile / TextFile stores and records.

Reading a damaged store (strict or tolerant) and sniffing it may only raise
``RecordkitError`` subclasses naming the file and byte offset; a length field claiming
2^62 bytes is reported, never allocated. ``records.decode_record`` on garbage raises
``FormatError`` only.
"""
from __future__ import annotations

import atexit
import itertools
import shutil
import os
import struct
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from recordkit.errors import FormatError, RecordkitError
from recordkit.formats import singa
from recordkit.formats.singa import records
from recordkit.formats.singa.binfile import encode_tuple as bin_tuple
from recordkit.formats.singa.kvfile import encode_tuple as kv_tuple

from .wire import varint

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SPECIAL = [0, 1, 7, 2**31, 2**32, 2**62, 2**63, 2**64 - 1]
CORPUS = Path(__file__).parent / "corpus" / "singa"
_counter = itertools.count()
_TMP = tempfile.mkdtemp(prefix="rk-fuzz-singa-")
atexit.register(shutil.rmtree, _TMP, True)


def new_file(content: bytes) -> str:
    path = os.path.join(_TMP, f"store{next(_counter)}.bin")
    with open(path, "wb") as f:
        f.write(content)
    return path


tuples = st.lists(st.tuples(st.binary(max_size=6), st.binary(min_size=1, max_size=10)), max_size=5)


@st.composite
def store_bytes(draw):
    kind = draw(st.sampled_from(["kvfile", "binfile", "textfile"]))
    items = draw(tuples)
    if kind == "kvfile":
        data = b"".join(kv_tuple(k, v) for k, v in items)
    elif kind == "binfile":
        data = b"".join(bin_tuple(k, v) for k, v in items)
    else:
        data = b"".join(v.replace(b"\n", b" ") + b"\n" for _, v in items)
    data = bytearray(data)
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["flip", "truncate", "insert", "length", "magic"]))
        pos = draw(st.integers(0, len(data)))
        if op == "flip" and data:
            pos = min(pos, len(data) - 1)
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del data[pos:]
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=9))
        elif op == "length":
            data[pos:pos + 8] = struct.pack("<Q", draw(st.sampled_from(SPECIAL)))
        elif op == "magic":
            data[pos:pos] = b"sg" + bytes([draw(st.integers(0, 3)), draw(st.integers(0, 1))])
    return draw(st.sampled_from(["kvfile", "binfile", "textfile"])), bytes(data)


def check_located(e: FormatError, path: str) -> None:
    assert isinstance(e, RecordkitError)
    assert e.path == path, (e.path, path)
    assert str(e).startswith(path)
    assert e.offset is not None or e.line is not None, f"no position in {e}"


def read_all(path, kind, tolerant):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with singa.open(path, "read", kind, tolerant=tolerant) as store:
            out = list(store)
            store.seek_to_first()
            again = list(store)
    assert out == again
    return out


@SETTINGS
@given(store_bytes(), st.booleans())
def test_store_read_mutated(kind_data, tolerant):
    kind, data = kind_data
    path = new_file(data)
    try:
        items = read_all(path, kind, tolerant)
    except FormatError as e:
        assert not tolerant, f"tolerant read raised {e}"
        check_located(e, path)
        return
    total = sum(len(k) + len(v) for k, v in items)
    assert total <= len(data) + 20 * len(items)  # nothing conjured beyond the file


@SETTINGS
@given(store_bytes())
def test_sniff_and_autodetect_mutated(kind_data):
    _, data = kind_data
    path = new_file(data)
    kind = singa.sniff_store(path)
    assert kind in (None, "kvfile", "binfile", "textfile")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with singa.open(path, "read") as store:
                list(store)
    except FormatError as e:
        assert e.path == path


@SETTINGS
@given(store_bytes(), tuples)
def test_append_to_damaged_store_keeps_complete_tuples(kind_data, new):
    kind, data = kind_data
    if kind == "textfile":
        return
    path = new_file(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            before = read_all(path, kind, tolerant=True)
        except FormatError:
            return
        try:
            with singa.open(path, "append", kind) as store:
                for k, v in new:
                    store.write(k + b"#new", v)
        except FormatError as e:
            check_located(e, path)
            assert open(path, "rb").read() == data  # a failed append leaves the file alone
            return
        after = read_all(path, kind, tolerant=False)
    assert after[:len(before)] == before


def test_length_two_to_the_62_is_reported_not_allocated():
    for kind, data in [("kvfile", struct.pack("<Q", 2**62) + b"k"),
                       ("kvfile", kv_tuple(b"a", b"b")[:9] + struct.pack("<Q", 2**62) + b"v"),
                       ("binfile", b"sg\x01\x00" + struct.pack("<Q", 2**62) + b"k"),
                       ("binfile", b"sg\x00\x00" + struct.pack("<Q", 2**64 - 1))]:
        path = new_file(data)
        with pytest.raises(FormatError) as info:
            read_all(path, kind, tolerant=False)
        check_located(info.value, path)
        with pytest.warns(Warning, match="4611686018427387904|18446744073709551615"):
            with singa.open(path, "read", kind, tolerant=True) as store:
                assert list(store) == []
                assert store.errors == 1


# -- records.decode_record -----------------------------------------------------------------------------
@st.composite
def record_values(draw):
    if draw(st.booleans()):
        return draw(st.binary(max_size=40))
    shape = draw(st.lists(st.integers(-5, 2**31 - 1) | st.sampled_from([0, 1, 2, 3]), max_size=4))
    pixel = draw(st.none() | st.binary(max_size=12))
    data = draw(st.none() | st.lists(st.floats(width=32, allow_nan=False), max_size=6))
    parts = [b"\x08" + varint(d) for d in shape]
    if pixel is not None:
        parts.append(b"\x1a" + varint(len(pixel)) + pixel)
    if data:
        body = np.array(data, np.float32).tobytes()
        parts.append(b"\x22" + varint(len(body)) + body)
    raw = bytearray(b"".join(parts))
    if raw and draw(st.booleans()):
        raw[draw(st.integers(0, len(raw) - 1))] ^= 1 << draw(st.integers(0, 7))
    return bytes(raw)


def decode_checked(value):
    try:
        out = records.decode_record(value, path="S.kv", offset=24, record="tuple 3")
    except FormatError as e:
        check_located(e, "S.kv")
        return None
    for key in ("pixel", "data"):
        if out[key] is not None and out["shape"]:
            assert list(out[key].shape) == out["shape"]
    return out


@SETTINGS
@given(record_values())
def test_decode_record_garbage(value):
    decode_checked(value)


@pytest.mark.parametrize("shape,pixel", [([-1, -2], b"ab"), ([0, -5], b""), ([65536] * 4, b""),
                                         ([2, -1, -1], b"ab"), ([0, 2**31 - 1, 2**31 - 1, 2**31 - 1], b"")])
def test_decode_record_bad_shape_is_format_error(shape, pixel):
    value = records.encode_record(shape=shape, pixel=pixel)
    with pytest.raises(FormatError) as info:
        records.decode_record(value, path="S.kv", offset=24, record="tuple 3")
    check_located(info.value, "S.kv")


def test_atheris_finding_zero_dim_with_overflowing_shape_is_format_error():
    """fuzz/fuzz_singa.py found it: a shape with a 0 among dimensions whose product overflows
    matched an empty pixel field (0 == 0) and then made NumPy's reshape raise ValueError."""
    data = (CORPUS / "regress-zero-dim-with-overflowing-shape").read_bytes()
    with pytest.raises(FormatError) as info:
        records.decode_record(data[1:], path="S.kv", offset=0, record="tuple 0")
    check_located(info.value, "S.kv")
    assert "too large" in str(info.value)
