#!/usr/bin/env python3
"""Write the OFRecord interop data sets (both directions) and their case files.

    .venv/bin/python tools/oracle/make_ofrecord_files.py                          # recordkit-written cases
    /work/shared/tools/oneflow-oracle python tools/oracle/make_ofrecord_files.py  # OneFlow-style cases

All data lives in tests/data/ofrecord_oracle/:

* ``cases/<case>.json``: one file per case, read by tools/oracle/ofrecord_golden.py (under the
  oracle) and tests/test_ofrecord_oracle_golden.py: the data set directory, how a reader opens it
  (``data_part_num``, ``part_name_prefix``, ``part_name_suffix_length``), the batch size of the
  batched read and the extra decodes to run on it (cross-type casts, truncate padding, ...);
* kind ``recordkit`` (run in recordkit's venv): the input records are stored in the case file
  (``records``: per feature ``{"type": float32|float64|int32|int64|py_int|py_float|bytes|str,
  "values": [...]}``, or ``{"serialized": hex}`` for a record handed to the writer as bytes), with
  the ``OFRecordWriter`` arguments; the records are written with recordkit into
  ``written_by_recordkit/<case>/``. The test re-writes them and requires identical bytes.
* kind ``oneflow`` (run under the oracle's Python 3.10): part files written the way OneFlow's own
  tools write them -- ``struct.pack("q", len(s)) + s`` with ``s = OFRecord(...).SerializeToString()``
  from OneFlow's generated ``oneflow.core.record.record_pb2`` (shipped in the 0.9.0 wheel) -- into
  ``written_by_oneflow/<case>/``. The script of each case mirrors one of OneFlow's writers
  (docs tutorial ofrecord_to_string.py, imagenet_ofrecord.py, img2ofrecord.py, the face tools,
  the Spark connector's type mapping). Deterministic: ``random.Random`` / numpy PCG64 with fixed seeds.

Floats in JSON are exact (float32 values are stored as their float64 value); NaN and infinities
use Python's JSON extension (NaN, Infinity); bytes are hex strings.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATA_REL = os.path.join("tests", "data", "ofrecord_oracle")
DATA = os.path.join(REPO, DATA_REL)
CASES = os.path.join(DATA, "cases")

F32 = np.float32
FLOAT_EDGES32 = [0.0, -0.0, 1.0, -1.5, float("inf"), float("-inf"), float("nan"), float(np.finfo(F32).max),
                 float(np.finfo(F32).tiny), 1.401298464324817e-45, 0.1, 3.4e-38]
FLOAT_EDGES64 = [0.0, -0.0, 1.0, -1.5, float("inf"), float("-inf"), float("nan"), 1.7976931348623157e308,
                 5e-324, 2.2250738585072014e-308, 0.1, 1e300]
I32_EDGES = [0, 1, -1, 127, -128, 255, 2**31 - 1, -2**31, 300, -300]
I64_EDGES = [0, 1, -1, 2**63 - 1, -2**63, 2**31, -2**31 - 1, 2**53 + 1, 1 << 40, -(1 << 40)]


def write_case(name: str, spec: dict) -> None:
    os.makedirs(CASES, exist_ok=True)
    with open(os.path.join(CASES, name + ".json"), "w") as f:
        json.dump(dict(case=name, **spec), f, indent=1, sort_keys=False)
        f.write("\n")


def fresh_dir(rel: str) -> str:
    path = os.path.join(REPO, rel)
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(path)
    return path


# ----------------------------------------------------------------------------------------------
# recordkit-written cases (recordkit venv)
# ----------------------------------------------------------------------------------------------
def feat(type_: str, values) -> dict:
    if type_ in ("bytes", "str"):
        return {"type": type_, "values": [v.hex() if isinstance(v, bytes) else v for v in values]}
    if type_ in ("py_int", "py_float"):
        return {"type": type_, "values": values}
    return {"type": type_, "values": np.asarray(values, dtype=type_).astype(float if "float" in type_ else int).tolist()}


def spec_to_value(f: dict):
    """An input feature (case-file form) as the Python/NumPy value handed to OFRecordWriter.write."""
    t, v = f["type"], f["values"]
    if t == "bytes":
        return [bytes.fromhex(x) for x in v] if len(v) != 1 else bytes.fromhex(v[0])
    if t == "str":
        return v[0] if len(v) == 1 else list(v)
    if t == "py_int":
        return int(v)
    if t == "py_float":
        return float(v)
    return np.asarray(v, dtype=t)


def spec_to_record(r: dict):
    if "serialized" in r:
        return bytes.fromhex(r["serialized"])
    return {name: spec_to_value(f) for name, f in r.items()}


def rk_write(case: dict) -> list[str]:
    """Write a recordkit case's records with OFRecordWriter into directory ``out`` (the test calls this too)."""
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    w = case["writer"]
    out = case["_out"]
    kwargs = dict(sharding=w["sharding"], part_name_prefix=w["part_name_prefix"],
                  part_name_suffix_length=w["part_name_suffix_length"])
    if w["sharding"] == "contiguous":
        kwargs["total"] = len(case["records"])
    with OFRecordWriter(out, w["num_parts"], **kwargs) as writer:
        for r in case["records"]:
            writer.write(spec_to_record(r))
    return sorted(os.listdir(out))


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _ld(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def wire_variants() -> list[bytes]:
    """Hand-made serialized records that proto2 parsers must accept but no protobuf writer emits."""
    entry = lambda key, feature: _ld(1, _ld(1, key.encode()) + _ld(2, feature))  # noqa: E731
    unpacked_i64 = b"".join(_varint(1 << 3 | 0) + _varint(v) for v in [7, -7, 1 << 40])
    unpacked_i32 = b"".join(_varint(1 << 3 | 0) + _varint(v) for v in [-5, 5, 2**31 - 1])
    unpacked_f = b"".join(_varint(1 << 3 | 5) + struct.pack("<f", v) for v in [1.5, -2.25])
    unpacked_d = b"".join(_varint(1 << 3 | 1) + struct.pack("<d", v) for v in [0.1, -3.0])
    packed_f = _ld(1, struct.pack("<3f", 9.0, 8.0, 7.0))
    rec1 = (entry("labels", _ld(5, unpacked_i64)) + entry("ids", _ld(4, unpacked_i32))
            + entry("images", _ld(2, unpacked_f)) + entry("weights", _ld(3, unpacked_d)))
    # duplicate key: the last entry wins; packed and unpacked halves of one list are concatenated
    rec2 = (entry("labels", _ld(5, _ld(1, _varint(1)))) + entry("images", _ld(2, packed_f))
            + entry("labels", _ld(5, _ld(1, _varint(2) + _varint(3))))
            + entry("ids", _ld(4, _ld(1, _varint(4)) + _varint(1 << 3 | 0) + _varint(6)))
            + entry("weights", _ld(3, _ld(1, struct.pack("<d", 2.5)))))
    # map entries in reverse-alphabetical order, value before key inside the entry
    rec3 = (_ld(1, _ld(2, _ld(3, _ld(1, struct.pack("<d", -1.0)))) + _ld(1, b"weights"))
            + _ld(1, _ld(2, _ld(5, _ld(1, _varint(9)))) + _ld(1, b"labels"))
            + _ld(1, _ld(2, _ld(4, _ld(1, _varint(-1)))) + _ld(1, b"ids"))
            + _ld(1, _ld(2, _ld(2, _ld(1, struct.pack("<f", 0.5)))) + _ld(1, b"images")))
    return [rec1, rec2, rec3]


def recordkit_cases() -> None:
    rng = np.random.default_rng(20240611)
    cases = {}

    # 1. MNIST-like, round robin over 3 parts, suffix 5 (recordkit's writer default): float32 images,
    #    Python-int labels (int64_list), double weights, int32 ids, one bytes value.
    recs = []
    for i in range(17):
        recs.append({
            "images": feat("float32", rng.standard_normal(12).astype(F32)),
            "labels": feat("py_int", int(rng.integers(0, 10))),
            "weights": feat("float64", rng.standard_normal(3)),
            "ids": feat("int32", rng.integers(-2**31, 2**31, 2)),
            "name": feat("bytes", [rng.bytes(5)]),
        })
    cases["rk_mixed_roundrobin_s5"] = dict(
        writer=dict(num_parts=3, sharding="round_robin", part_name_prefix="part-", part_name_suffix_length=5),
        reader=dict(data_part_num=3, part_name_prefix="part-", part_name_suffix_length=5),
        batch_size=4, records=recs,
        decodes=[dict(name="images", shape=[3, 4], dtype="float32"),
                 dict(name="images", shape=[12], dtype="float64"),
                 dict(name="images", shape=[12], dtype="int32"),
                 dict(name="labels", shape=[], dtype="int64"),
                 dict(name="labels", shape=[], dtype="int32"),
                 dict(name="labels", shape=[1], dtype="float32"),
                 dict(name="weights", shape=[3], dtype="float32"),
                 dict(name="ids", shape=[2], dtype="int64"),
                 dict(name="ids", shape=[2], dtype="float64"),
                 dict(name="name", shape=[5], dtype="uint8"),
                 dict(name="name", shape=[5], dtype="int8"),
                 dict(name="name", shape=[5], dtype="float32"),
                 dict(name="name", shape=[5], dtype="int32")])

    # 2. contiguous over 11 parts with suffix -1 (part-0 .. part-10: naming without padding),
    #    np.int32 labels as OneFlow's image classification examples store them, int64 lists.
    recs = []
    for i in range(25):
        recs.append({
            "labels": feat("int32", [int(rng.integers(0, 1000))]),
            "tokens": feat("int64", rng.integers(-2**62, 2**62, 4)),
            "score": feat("py_float", float(rng.standard_normal())),
        })
    cases["rk_contiguous_11parts_s-1"] = dict(
        writer=dict(num_parts=11, sharding="contiguous", part_name_prefix="part-", part_name_suffix_length=-1),
        reader=dict(data_part_num=11, part_name_prefix="part-", part_name_suffix_length=-1),
        batch_size=7, records=recs,
        decodes=[dict(name="labels", shape=[], dtype="int32"),
                 dict(name="labels", shape=[], dtype="float32"),
                 dict(name="tokens", shape=[2, 2], dtype="int64"),
                 dict(name="tokens", shape=[4], dtype="int32"),
                 dict(name="tokens", shape=[4], dtype="float32"),
                 dict(name="tokens", shape=[4], dtype="float64"),
                 dict(name="score", shape=[], dtype="float64"),
                 dict(name="score", shape=[], dtype="float32")])

    # 3. variable lengths: float, double, int32, int64 lists of 0..6 values (and a varying-length
    #    bytes value), contiguous over 4 parts, suffix 5. Batched reads pad with truncate=True.
    recs = []
    for i in range(19):
        n = [int(rng.integers(0, 7)) for _ in range(4)]
        recs.append({
            "f": feat("float32", rng.standard_normal(n[0]).astype(F32) * 100),
            "d": feat("float64", rng.standard_normal(n[1]) * 1e6),
            "i": feat("int32", rng.integers(-1000, 1000, n[2])),
            "l": feat("int64", rng.integers(-2**40, 2**40, n[3])),
            "blob": feat("bytes", [rng.bytes(int(rng.integers(1, 9)))]),
        })
    cases["rk_varlen_contiguous_s5"] = dict(
        writer=dict(num_parts=4, sharding="contiguous", part_name_prefix="part-", part_name_suffix_length=5),
        reader=dict(data_part_num=4, part_name_prefix="part-", part_name_suffix_length=5),
        batch_size=5, records=recs,
        decodes=[dict(name="f", shape=[6], dtype="float32", truncate=True),
                 dict(name="f", shape=[3], dtype="float32", truncate=True),
                 dict(name="f", shape=[2, 3], dtype="int32", truncate=True),
                 dict(name="d", shape=[6], dtype="float64", truncate=True),
                 dict(name="d", shape=[4], dtype="float32", truncate=True),
                 dict(name="i", shape=[6], dtype="int32", truncate=True),
                 dict(name="i", shape=[6], dtype="int64", truncate=True),
                 dict(name="i", shape=[2], dtype="int8", truncate=True),
                 dict(name="l", shape=[6], dtype="int64", truncate=True),
                 dict(name="l", shape=[6], dtype="float64", truncate=True),
                 dict(name="f", shape=[6], dtype="float32", truncate=True, dim1_varying_length=True),
                 dict(name="f", shape=[6], dtype="float32", auto_zero_padding=True)])

    # 4. edge values: extremes of every numeric kind, NaN/inf/-0.0/denormals, empty lists of every
    #    kind, several bytes values in one list, UTF-8 str, non-ASCII feature names. Round robin, 2 parts.
    recs = []
    for i in range(len(FLOAT_EDGES32)):
        recs.append({
            "f32": feat("float32", [FLOAT_EDGES32[i], FLOAT_EDGES32[-1 - i]]),
            "f64": feat("float64", [FLOAT_EDGES64[i], FLOAT_EDGES64[-1 - i]]),
            "i32": feat("int32", [I32_EDGES[i % len(I32_EDGES)]]),
            "i64": feat("int64", [I64_EDGES[i % len(I64_EDGES)], I64_EDGES[-1 - i % len(I64_EDGES)]]),
            "empty_f": feat("float32", []), "empty_d": feat("float64", []),
            "empty_i": feat("int32", []), "empty_l": feat("int64", []),
            "text": feat("str", ["héllo ✓ %d" % i]),
            "multi": feat("bytes", [b"", bytes([i]), b"\x00\xff" * i]),
            "ключ/名前": feat("int32", [i]),
        })
    cases["rk_edge_values_rr2"] = dict(
        writer=dict(num_parts=2, sharding="round_robin", part_name_prefix="part-", part_name_suffix_length=-1),
        reader=dict(data_part_num=2, part_name_prefix="part-", part_name_suffix_length=-1),
        batch_size=5, records=recs,
        decodes=[dict(name="f32", shape=[2], dtype="float32"),
                 dict(name="f32", shape=[2], dtype="float64"),
                 dict(name="f64", shape=[2], dtype="float64"),
                 dict(name="f64", shape=[2], dtype="float32"),
                 dict(name="i32", shape=[], dtype="int32"),
                 dict(name="i32", shape=[], dtype="int8"),
                 dict(name="i32", shape=[], dtype="uint8"),
                 dict(name="i32", shape=[1], dtype="float32"),
                 dict(name="i64", shape=[2], dtype="int64"),
                 dict(name="i64", shape=[2], dtype="int32"),
                 dict(name="i64", shape=[2], dtype="float32"),
                 dict(name="i64", shape=[2], dtype="float64"),
                 dict(name="empty_f", shape=[2], dtype="float32", truncate=True),
                 dict(name="empty_l", shape=[], dtype="int64", truncate=True),
                 dict(name="ключ/名前", shape=[], dtype="int64")])

    # 5. records handed to the writer already serialized, in wire forms no protobuf writer emits
    #    (unpacked repeated scalars, duplicate map keys, packed+unpacked halves, reversed entries),
    #    mixed with ordinary records; a custom part prefix.
    recs = [{"serialized": b.hex()} for b in wire_variants()]
    for i in range(4):
        recs.append({"labels": feat("int64", [10 + i]), "ids": feat("int32", [-i, i]),
                     "images": feat("float32", rng.standard_normal(2 + i % 2).astype(F32)),
                     "weights": feat("float64", [i / 3])})
    cases["rk_wire_variants_prefix"] = dict(
        writer=dict(num_parts=2, sharding="contiguous", part_name_prefix="data.of_record-", part_name_suffix_length=3),
        reader=dict(data_part_num=2, part_name_prefix="data.of_record-", part_name_suffix_length=3),
        batch_size=3, records=recs,
        decodes=[dict(name="labels", shape=[2], dtype="int64", truncate=True),
                 dict(name="images", shape=[3], dtype="float32", truncate=True),
                 dict(name="ids", shape=[3], dtype="int32", truncate=True),
                 dict(name="weights", shape=[2], dtype="float64", truncate=True)])

    for name, c in cases.items():
        rel = os.path.join(DATA_REL, "written_by_recordkit", name)
        fresh_dir(rel)
        spec = dict(kind="recordkit", dir=rel, reader=c["reader"], batch_size=c["batch_size"], decodes=c["decodes"],
                    writer=c["writer"], records=c["records"])
        files = rk_write(dict(spec, _out=os.path.join(REPO, rel)))
        write_case(name, spec)
        print(f"{name}: {len(c['records'])} records -> {rel}/ {files}")


# ----------------------------------------------------------------------------------------------
# OneFlow-style writers (under the oracle: oneflow.core.record.record_pb2)
# ----------------------------------------------------------------------------------------------
def oneflow_cases() -> None:
    import random
    import oneflow.core.record.record_pb2 as ofrecord  # the generated module shipped in the wheel

    # the docs' helper functions (ofrecord_to_string.py), paraphrased
    def listify(v):
        return list(v) if isinstance(v, (list, tuple)) else [v]

    def int32_feature(v):
        return ofrecord.Feature(int32_list=ofrecord.Int32List(value=listify(v)))

    def int64_feature(v):
        return ofrecord.Feature(int64_list=ofrecord.Int64List(value=listify(v)))

    def float_feature(v):
        return ofrecord.Feature(float_list=ofrecord.FloatList(value=listify(v)))

    def double_feature(v):
        return ofrecord.Feature(double_list=ofrecord.DoubleList(value=listify(v)))

    def bytes_feature(v):
        v = listify(v)
        return ofrecord.Feature(bytes_list=ofrecord.BytesList(value=[x.encode() if isinstance(x, str) else x for x in v]))

    def frame(record) -> bytes:
        s = record.SerializeToString()
        return struct.pack("q", record.ByteSize()) + s

    cases = {}

    # a) the docs tutorial ofrecord_to_string.py: dataset/part-0, 3 records of 784 random.random()
    #    floats ("images") and one randint(0, 9) int64 ("labels"); the layout of the docs' own
    #    9,543-byte sample (spec §5.3), regenerated with a fixed seed.
    r = random.Random(5003)
    parts = [[]]
    for _ in range(3):
        topack = {"images": float_feature([r.random() for _ in range(28 * 28)]),
                  "labels": int64_feature([r.randint(0, 9)])}
        parts[0].append(frame(ofrecord.OFRecord(feature=topack)))
    cases["of_docs_tutorial"] = dict(parts=parts, names=["part-0"], reader=dict(data_part_num=1, part_name_prefix="part-", part_name_suffix_length=-1),
                                     batch_size=2, decodes=[dict(name="images", shape=[1, 28, 28], dtype="float32"),
                                                            dict(name="images", shape=[784], dtype="float64"),
                                                            dict(name="labels", shape=[], dtype="int64"),
                                                            dict(name="labels", shape=[], dtype="int32")])

    # b) imagenet_ofrecord.py layout: part-%05d shards, "encoded" bytes, int32 class/label, height,
    #    width, channels, bytes metadata, variable-length float bbox lists and int32 bbox labels.
    r = random.Random(1234)
    shards = 4
    parts = [[] for _ in range(shards)]
    for i in range(14):
        nbox = r.randint(0, 3)
        h, w = r.randint(16, 64), r.randint(16, 64)
        example = ofrecord.OFRecord(feature={
            "encoded": bytes_feature(bytes(r.randrange(256) for _ in range(r.randint(20, 80)))),
            "class/label": int32_feature(r.randint(0, 999)),
            "height": int32_feature(h), "width": int32_feature(w), "channels": int32_feature(3),
            "colorspace": bytes_feature("RGB"), "format": bytes_feature("JPEG"),
            "filename": bytes_feature("n%08d_%d.JPEG" % (r.randint(0, 99999999), i)),
            "class/synset": bytes_feature("n%08d" % r.randint(0, 99999999)),
            "class/text": bytes_feature("tench, Tinca tinca"),
            "object/bbox/xmin": float_feature([r.random() * w for _ in range(nbox)]),
            "object/bbox/xmax": float_feature([r.random() * w for _ in range(nbox)]),
            "object/bbox/ymin": float_feature([r.random() * h for _ in range(nbox)]),
            "object/bbox/ymax": float_feature([r.random() * h for _ in range(nbox)]),
            "object/bbox/label": int32_feature([r.randint(0, 999) for _ in range(nbox)]),
        })
        parts[i * shards // 14].append(frame(example))  # the tool splits contiguous ranges per shard
    cases["of_imagenet_style_s5"] = dict(parts=parts, names=["part-%05d" % k for k in range(shards)],
                                         reader=dict(data_part_num=shards, part_name_prefix="part-", part_name_suffix_length=5),
                                         batch_size=4,
                                         decodes=[dict(name="class/label", shape=[], dtype="int32"),
                                                  dict(name="class/label", shape=[], dtype="float32"),
                                                  dict(name="height", shape=[], dtype="int64"),
                                                  dict(name="object/bbox/xmin", shape=[3], dtype="float32", truncate=True),
                                                  dict(name="object/bbox/label", shape=[3], dtype="int32", truncate=True),
                                                  dict(name="channels", shape=[1], dtype="uint8")])

    # c) img2ofrecord.py: part-<k> without padding, "images" bytes (an encoded image), int32 "labels";
    #    and the face tools (mx_recordio_2_ofrecord*, bin_2_ofrecord): "label"/"issame" int32 + "encoded".
    r = random.Random(77)
    parts = [[] for _ in range(3)]
    for i in range(10):
        img = bytes(r.randrange(256) for _ in range(24))
        parts[i % 3].append(frame(ofrecord.OFRecord(feature={"images": bytes_feature([img]),
                                                             "labels": int32_feature([r.randint(0, 9)]),
                                                             "issame": int32_feature(r.randint(0, 1))})))
    cases["of_img2ofrecord_s-1"] = dict(parts=parts, names=["part-%d" % k for k in range(3)],
                                        reader=dict(data_part_num=3, part_name_prefix="part-", part_name_suffix_length=-1),
                                        batch_size=3,
                                        decodes=[dict(name="images", shape=[24], dtype="uint8"),
                                                 dict(name="images", shape=[4, 6], dtype="float32"),
                                                 dict(name="images", shape=[24], dtype="int8"),
                                                 dict(name="labels", shape=[], dtype="int32"),
                                                 dict(name="issame", shape=[], dtype="int64")])

    # d) the Spark connector's type mapping (Int -> int32, Long -> int64, Float -> float, Double ->
    #    double, String/Binary -> bytes, arrays -> multi-value lists) with extreme values, 2 parts.
    parts = [[], []]
    for i in range(len(FLOAT_EDGES32)):
        rec = ofrecord.OFRecord(feature={
            "id": int64_feature(I64_EDGES[i % len(I64_EDGES)]),
            "age": int32_feature(I32_EDGES[i % len(I32_EDGES)]),
            "f": float_feature([FLOAT_EDGES32[i], -FLOAT_EDGES32[i]]),
            "d": double_feature([FLOAT_EDGES64[i]]),
            "name": bytes_feature("row %d ✓" % i),
            "tags": bytes_feature(["a", "bb", ""][: i % 4]),
            "vec": double_feature([float(j) / (i + 1) for j in range(i % 5)]),
        })
        parts[i // 6].append(frame(rec))
    cases["of_spark_types_s5"] = dict(parts=parts, names=["part-00000", "part-00001"],
                                      reader=dict(data_part_num=2, part_name_prefix="part-", part_name_suffix_length=5),
                                      batch_size=5,
                                      decodes=[dict(name="id", shape=[], dtype="int64"),
                                               dict(name="id", shape=[], dtype="float64"),
                                               dict(name="age", shape=[], dtype="int32"),
                                               dict(name="age", shape=[], dtype="int8"),
                                               dict(name="f", shape=[2], dtype="float32"),
                                               dict(name="f", shape=[2], dtype="float64"),
                                               dict(name="d", shape=[], dtype="float64"),
                                               dict(name="d", shape=[], dtype="float32"),
                                               dict(name="vec", shape=[4], dtype="float64", truncate=True)])

    for name, c in cases.items():
        rel = os.path.join(DATA_REL, "written_by_oneflow", name)
        out = fresh_dir(rel)
        for fname, frames in zip(c["names"], c["parts"]):
            with open(os.path.join(out, fname), "wb") as f:
                f.write(b"".join(frames))
        write_case(name, dict(kind="oneflow", dir=rel, reader=c["reader"], batch_size=c["batch_size"],
                              decodes=c["decodes"], writer="oneflow.core.record.record_pb2 + struct.pack('q')",
                              records=None))
        print(f"{name}: {sum(map(len, c['parts']))} records -> {rel}/ {c['names']}")


if __name__ == "__main__":
    try:
        import oneflow  # noqa: F401
        under_oracle = True
    except ImportError:
        under_oracle = False
    if under_oracle:
        oneflow_cases()
    else:
        sys.path.insert(0, os.path.join(REPO, "src"))
        recordkit_cases()
