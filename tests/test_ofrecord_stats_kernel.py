"""`recordkit stats` on OFRecord walks the records on the wire (FeatureStats) instead of decoding
each into objects; its numbers must be the ones the per-record path gave,
bit for bit: the reference below is that path, kept here."""
from __future__ import annotations

import argparse
import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from recordkit.cli import sources
from recordkit.formats.ofrecord import summary
from recordkit.errors import FormatError
from recordkit.formats.ofrecord import codec
from recordkit.formats.ofrecord.writer import OFRecordWriter


def per_record_stats(directory) -> dict:
    """The per-record path `stats` took before the kernel (reference)."""
    args = argparse.Namespace(path=str(directory), storage_options=None)
    totals: dict = {}
    records = 0
    for path in sources.ofrecord_parts(args):
        for _, _, rec in summary.records(path):
            records += 1
            for name, f in rec.items():
                t = totals.setdefault(name, {"kind": f.kind, "records": 0, "values": 0, "sum": 0.0, "min": None,
                                             "max": None})
                t["records"] += 1
                t["values"] += len(f)
                if f.kind != "bytes_list" and len(f):
                    v = f.value
                    t["sum"] += float(v.sum(dtype=np.float64))
                    lo, hi = float(v.min()), float(v.max())
                    t["min"] = lo if t["min"] is None else min(t["min"], lo)
                    t["max"] = hi if t["max"] is None else max(t["max"], hi)
    return {"records": records, "features": totals}


def kernel_stats(directory) -> dict:
    return summary.feature_totals(sources.ofrecord_parts(argparse.Namespace(path=str(directory), storage_options=None)))


def same(a, b) -> bool:
    """Equal results, NaN equal to NaN, key order included; floats exactly equal (a zero's sign
    aside: NumPy's SIMD min/max of [0.0, -0.0] returns either zero depending on position)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    return type(a) is type(b) and a == b


_values = st.one_of(
    st.lists(st.floats(width=32, allow_infinity=True), max_size=300).map(lambda v: np.array(v, np.float32)),
    st.lists(st.floats(), max_size=300).map(lambda v: np.array(v, np.float64)),
    st.lists(st.integers(-(2**31), 2**31 - 1), max_size=40).map(lambda v: np.array(v, np.int32)),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40).map(lambda v: np.array(v, np.int64)),
    st.lists(st.binary(max_size=5), max_size=4),
)
_records = st.lists(st.dictionaries(st.sampled_from(["a", "b", "label", "é", "zz"]), _values, max_size=4),
                    min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(_records, st.integers(1, 3))
def test_stats_from_the_wire_equal_the_per_record_path(tmp_path_factory, records, parts):
    d = tmp_path_factory.mktemp("of") / "set"
    with OFRecordWriter(d, parts) as w:
        for rec in records:
            w.write(codec.encode({k: codec.Feature("bytes_list", v) if isinstance(v, list) else v
                                  for k, v in rec.items()}) if rec else codec.encode({"empty": np.zeros(0, np.float32)}))
    assert same(kernel_stats(d), per_record_stats(d))


def test_long_lists_sum_as_numpy_does(tmp_path):
    """Float32 lists longer than NumPy's cast buffer (8192) and pairwise blocks (128)."""
    rng = np.random.default_rng(3)
    d = tmp_path / "set"
    with OFRecordWriter(d, 2) as w:
        for n in (7, 8, 9, 127, 128, 129, 1000, 8191, 8192, 8193, 20000):
            w.write({"f": (rng.standard_normal(n) * 1e4).astype(np.float32), "d": rng.standard_normal(n),
                     "i": rng.integers(-1000, 1000, n).astype(np.int32)})
    assert same(kernel_stats(d), per_record_stats(d))


def raw_part(path, payloads):
    with open(path, "wb") as f:
        for p in payloads:
            f.write(struct.pack("<q", len(p)) + p)


def test_duplicate_names_count_the_last_entry_and_a_kindless_feature_is_protobufs_error(tmp_path):
    d = tmp_path / "set"
    d.mkdir()
    one = codec.encode({"x": np.array([1.0, 2.0], np.float32)})
    two = codec.encode({"x": np.array([5.0], np.float32)})
    raw_part(d / "part-00000", [one + two])  # the same map key twice: the last entry wins
    assert same(kernel_stats(d), per_record_stats(d))
    assert kernel_stats(d)["features"]["x"]["values"] == 1
    kindless = b"\x0a\x05\x0a\x01k\x12\x00"  # feature 'k' without a list
    raw_part(d / "part-00000", [one, kindless])
    with pytest.raises(FormatError, match="record 1"):
        kernel_stats(d)


def test_a_malformed_record_is_located_like_before(tmp_path):
    d = tmp_path / "set"
    d.mkdir()
    good = codec.encode({"x": np.array([1.0], np.float32)})
    raw_part(d / "part-00000", [good, b"\x0a\xff\xff"])
    with pytest.raises(FormatError) as new:
        kernel_stats(d)
    with pytest.raises(FormatError) as old:
        per_record_stats(d)
    assert str(new.value) == str(old.value) and "record 1" in str(new.value)
