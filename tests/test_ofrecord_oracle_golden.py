"""recordkit's OFRecord reader, writer and raw decoder against golden output of OneFlow 0.9.0.

Data: tests/data/ofrecord_oracle/ (tools/oracle/make_ofrecord_files.py, tools/oracle/README.md):

* ``written_by_recordkit/<case>/``: data sets written by recordkit's OFRecordWriter from the input
  records stored in ``cases/<case>.json`` (float/double/int32/int64/bytes features, variable
  lengths, empty lists, extreme values, suffix lengths -1/3/5, contiguous and round-robin sharding,
  pre-serialized records in unusual wire forms);
* ``written_by_oneflow/<case>/``: data sets written the way OneFlow's own tools write them
  (``oneflow.core.record.record_pb2`` + ``struct.pack("q", len)``), under the oracle's Python.

The goldens (``expected/<case>.json``, tools/oracle/ofrecord_golden.py) hold what OneFlow's C++
``OFRecordReader`` + ``OFRecordRawDecoder``/``OFRecordBytesDecoder`` decoded: every record with
each feature at its exact length (stream order of a batch_size=1 reader), and batched decodes
(cross-type casts, truncate padding, reshapes) over ceil(N/B)+1 batches, i.e. across the
wrap-around of OneFlow's endless stream. No OneFlow is needed here: only committed files are read.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest

from recordkit.formats.ofrecord.reader import OFRecordReader

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "ofrecord_oracle"
CASE_NAMES = sorted(p.stem for p in (DATA / "cases").glob("*.json"))
RK_CASES = [c for c in CASE_NAMES if json.loads((DATA / "cases" / (c + ".json")).read_text())["kind"] == "recordkit"]

try:
    from recordkit.compat.oneflow import ops as decoders
except ImportError:  # the decoders module is optional for this file
    decoders = None


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _case(name: str) -> dict:
    return json.loads((DATA / "cases" / (name + ".json")).read_text())


def _golden(name: str) -> dict:
    g = json.loads((DATA / "expected" / (name + ".json")).read_text())
    assert "error" not in g, f"{name}: OneFlow failed on this case: {g['error']}"
    return g


def _reader(case: dict, batch_size: int, epochs):
    r = case["reader"]
    return OFRecordReader(REPO / case["dir"], batch_size=batch_size, data_part_num=r["data_part_num"],
                          part_name_prefix=r["part_name_prefix"], part_name_suffix_length=r["part_name_suffix_length"],
                          random_shuffle=False, rank=0, world_size=1, epochs=epochs)


def test_every_case_has_a_golden():
    assert len(CASE_NAMES) >= 9
    assert sorted(p.stem for p in (DATA / "expected").glob("*.json")) == CASE_NAMES


@pytest.mark.parametrize("name", CASE_NAMES)
def test_inputs_unchanged(name):
    """The case file and every part file are the ones OneFlow read when the golden was made."""
    g = _golden(name)
    assert _sha((DATA / "cases" / (name + ".json")).read_bytes()) == g["case_sha256"]
    d = REPO / g["dir"]
    for fname, digest in g["files"].items():
        assert _sha((d / fname).read_bytes()) == digest, f"{d / fname} changed since the golden was recorded"


@pytest.mark.parametrize("name", CASE_NAMES)
def test_records_equal_oneflow(name):
    """One epoch through recordkit's reader gives OneFlow's records, in OneFlow's order, bit for bit."""
    case, g = _case(name), _golden(name)
    got = [rec for batch in _reader(case, batch_size=4, epochs=1) for rec in batch]
    assert len(got) == g["num_records"]
    for i, (rec, want) in enumerate(zip(got, g["records"])):
        assert sorted(rec) == sorted(want), f"record {i}: feature names"
        for fname, w in want.items():
            f = rec[fname]
            where = f"{name}: record {i}, feature {fname!r}"
            assert f.kind == w["kind"], where
            if w["kind"] == "bytes_list":
                assert [v.hex() for v in f.value] == w["values"], where
                continue
            a = np.ascontiguousarray(f.value)
            assert str(a.dtype) == w["dtype"], where
            assert _sha(a.tobytes()) == w["sha256"], f"{where}: {a.tolist()} != {w['values']}"


@pytest.mark.skipif(decoders is None, reason="recordkit.formats.ofrecord.decoders is not available")
@pytest.mark.parametrize("name", CASE_NAMES)
def test_raw_decode_equals_oneflow_batches(name):
    """Batches of the endless stream (wrapping into the next epoch) through raw_decode equal
    OneFlow's OFRecordRawDecoder outputs for the same shapes, dtypes and flags."""
    case, g = _case(name), _golden(name)
    B, M = g["batches"]["batch_size"], g["batches"]["num_batches"]
    it = iter(_reader(case, batch_size=B, epochs=None))
    batches = [next(it) for _ in range(M)]
    assert all(len(b) == B for b in batches)
    for d in g["batches"]["decodes"]:
        kwargs = {k: d[k] for k in ("truncate", "dim1_varying_length", "auto_zero_padding") if k in d}
        outs = []
        for b in batches:
            if kwargs.get("auto_zero_padding"):
                with pytest.warns(DeprecationWarning):
                    outs.append(decoders.raw_decode(b, d["name"], tuple(d["shape"]), d["dtype"], **kwargs))
            else:
                outs.append(decoders.raw_decode(b, d["name"], tuple(d["shape"]), d["dtype"], **kwargs))
        a = np.ascontiguousarray(np.concatenate(outs))
        what = f"{name}: raw_decode({d['name']!r}, {tuple(d['shape'])}, {d['dtype']}, {kwargs})"
        assert list(a.shape) == d["out_shape"] and str(a.dtype) == d["dtype"], what
        if _sha(a.tobytes()) != d["sha256"]:
            want = np.asarray(d["values"], dtype=d["dtype"]).reshape(a.shape)
            bad = np.argwhere(~((a == want) | (np.isnan(a) & np.isnan(want)) if a.dtype.kind == "f" else (a == want)))
            pytest.fail(f"{what}: differs at {bad[:5].tolist()}: got {a[tuple(bad[0])]!r}, OneFlow {want[tuple(bad[0])]!r}"
                        if len(bad) else f"{what}: same values, different bits (NaN payload / signed zero)")


def _maker():
    spec = importlib.util.spec_from_file_location("make_ofrecord_files", REPO / "tools" / "oracle" / "make_ofrecord_files.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _varint(b: bytes, i: int):
    shift = value = 0
    while True:
        c = b[i]
        i += 1
        value |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return value, i


def _canonical(data: bytes) -> list:
    """A part file as its frames, each frame as its lengths plus its sorted top-level map entries
    (the serialized bytes of every ``feature`` entry): equal iff the files differ at most in the
    order of map entries inside records."""
    frames, off = [], 0
    while off < len(data):
        n = int.from_bytes(data[off:off + 8], "little", signed=True)
        payload, off = data[off + 8:off + 8 + n], off + 8 + n
        entries, i = [], 0
        while i < len(payload):
            start = i
            _, i = _varint(payload, i)          # tag 0x0a
            ln, i = _varint(payload, i)
            i += ln
            entries.append(payload[start:i])
        frames.append((n, sorted(entries)))
    return frames


@pytest.mark.parametrize("name", RK_CASES)
def test_writer_bytes_unchanged(name, tmp_path):
    """The current OFRecordWriter writes exactly the committed (OneFlow-checked) bytes from the case's inputs.

    The failure message says whether only the order of map entries inside records changed."""
    case = _case(name)
    out = tmp_path / "out"
    files = _maker().rk_write(dict(case, _out=str(out)))
    committed = REPO / case["dir"]
    assert files == sorted(os.listdir(committed))
    for fname in files:
        new, old = (out / fname).read_bytes(), (committed / fname).read_bytes()
        if new != old:
            how = "only the order of map entries" if _canonical(new) == _canonical(old) else "content"
            pytest.fail(f"{name}/{fname}: writer output changed ({how}); if intended, regenerate the data "
                        "and the goldens (tools/oracle/README.md)")


_ENCODE_SNIPPET = """
import hashlib, numpy as np
from recordkit.formats.ofrecord import codec
rec = {"labels": 3, "images": np.arange(4, dtype=np.float32), "ids": np.arange(2, dtype=np.int32),
       "weights": np.ones(2), "name": b"x", "zz": 1, "aa": 2, "mm": 3}
print(hashlib.sha256(codec.encode(rec)).hexdigest())
"""


def test_writer_is_deterministic():
    """The same record encodes to the same bytes in every process (reproducible data sets; protobuf's
    own map serialization, upb or C++, uses a per-process hash order)."""
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    digests = {subprocess.run([sys.executable, "-c", _ENCODE_SNIPPET], capture_output=True, text=True, check=True,
                              env=env).stdout.strip() for _ in range(4)}
    assert len(digests) == 1, f"{len(digests)} different encodings of one record in 4 processes"


@pytest.mark.parametrize("name", RK_CASES)
def test_recordkit_inputs_round_trip(name):
    """What OneFlow decoded from recordkit's files is what was handed to the writer (kinds per the
    codec's type table); pre-serialized records are checked against OneFlow only."""
    case, g = _case(name), _golden(name)
    mk = _maker()
    kinds = {"float32": "float_list", "float64": "double_list", "py_float": "double_list", "int32": "int32_list",
             "int64": "int64_list", "py_int": "int64_list", "bytes": "bytes_list", "str": "bytes_list"}
    inputs = [r for r in case["records"] if "serialized" not in r]
    seen = 0
    for want in g["records"]:
        matches = [r for r in inputs if sorted(r) == sorted(want) and all(
            kinds[r[k]["type"]] == want[k]["kind"] and _values_equal(mk, r[k], want[k]) for k in r)]
        seen += bool(matches)
    assert seen == len(inputs)


def _values_equal(mk, spec: dict, golden: dict) -> bool:
    if golden["kind"] == "bytes_list":
        v = spec["values"]
        return [x.encode("utf-8").hex() for x in v] == golden["values"] if spec["type"] == "str" else v == golden["values"]
    a = np.atleast_1d(np.asarray(mk.spec_to_value(spec))).astype(golden["dtype"])
    return _sha(np.ascontiguousarray(a).tobytes()) == golden["sha256"]
