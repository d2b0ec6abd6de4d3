#!/usr/bin/env python3
"""Record what OneFlow 0.9.0's C++ OFRecord reader and decoders read from the interop data sets.

    /work/shared/tools/oneflow-oracle python tools/oracle/ofrecord_golden.py            # all cases
    /work/shared/tools/oneflow-oracle python tools/oracle/ofrecord_golden.py CASE ...   # some cases

Cases are tests/data/ofrecord_oracle/cases/<case>.json (tools/oracle/make_ofrecord_files.py); the
goldens go to tests/data/ofrecord_oracle/expected/<case>.json. Each case runs in its own child
process, because OneFlow aborts the process on any failed CHECK (a golden then holds the error).

Per case, in eager mode on the CPU:

1. **plan**: every part file the reader will open (``data_part_num`` names built from prefix and
   suffix length, in order) is split into frames (8-byte ``q`` length + payload) and each payload
   parsed with OneFlow's own generated ``oneflow.core.record.record_pb2``: this gives each
   record's feature kinds and lengths, used only to choose decoder shapes;
2. **records**: ``flow.nn.OFRecordReader(dir, batch_size=1, data_part_num, part_name_prefix,
   part_name_suffix_length, random_shuffle=False)``, called once per record; each feature is
   decoded by the C++ decoders with its exact length: numeric lists by
   ``flow.nn.OFRecordRawDecoder(name, (L,), <the list's own dtype>)``, a single bytes value by
   ``flow.nn.OFRecordBytesDecoder(name)`` + ``flow.tensor_buffer_to_list_of_tensors``. Bytes lists
   with several values cannot be read by any OneFlow decoder: their values come from record_pb2
   (``"source": "record_pb2"``). The C++ values are cross-checked against record_pb2's;
3. **batches**: a second reader with the case's ``batch_size``, called ceil(N / batch_size) + 1
   times (so the endless stream wraps around into the next epoch), and every decode of the case's
   ``decodes`` list (``OFRecordRawDecoder(name, shape, dtype, dim1_varying_length, truncate,
   auto_zero_padding)``) applied to each batch; outputs are concatenated along dim 0.

Golden JSON: ``{"case", "kind", "dir", "oracle", "case_sha256", "files": {name: sha256},
"num_records", "records": [{feature: {"kind", "dtype", "values", "sha256", "source"}}],
"batches": {"batch_size", "num_batches", "decodes": [{..spec.., "out_shape", "values", "sha256"}]},
"pb2_mismatches": [...]}``. Floats are exact (float32 as their float64 value; NaN/Infinity JSON
extension), bytes are hex; ``sha256`` is over the C-contiguous little-endian array bytes.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(REPO, "tests", "data", "ofrecord_oracle")
KIND_DTYPE = {"float_list": "float32", "double_list": "float64", "int32_list": "int32", "int64_list": "int64"}


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def part_name(prefix, i, suffix_length):
    d = str(i)
    return prefix + "0" * max(suffix_length - len(d), 0) + d


def plan(case):
    import oneflow.core.record.record_pb2 as pb
    r = case["reader"]
    paths = [os.path.join(REPO, case["dir"], part_name(r["part_name_prefix"], i, r["part_name_suffix_length"]))
             for i in range(r["data_part_num"])]
    records = []
    for p in paths:
        data = open(p, "rb").read()
        off = 0
        while off < len(data):
            (n,) = struct.unpack_from("q", data, off)
            msg = pb.OFRecord()
            msg.ParseFromString(data[off + 8:off + 8 + n])
            feats = {}
            for name in msg.feature:
                f = msg.feature[name]
                kind = f.WhichOneof("kind")
                feats[name] = (kind, list(getattr(f, kind).value))
            records.append(feats)
            off += 8 + n
    return paths, records


def arr_json(a):
    import numpy as np
    a = np.ascontiguousarray(a)
    return {"dtype": str(a.dtype), "out_shape": list(a.shape), "values": a.tolist(), "sha256": sha(a.tobytes())}


def run_case(name: str) -> dict:
    import numpy as np
    import oneflow as flow
    case_path = os.path.join(DATA, "cases", name + ".json")
    case = json.load(open(case_path))
    dtypes = {"float32": flow.float32, "float64": flow.float64, "int32": flow.int32, "int64": flow.int64,
              "int8": flow.int8, "uint8": flow.uint8}
    r = case["reader"]
    rargs = dict(data_part_num=r["data_part_num"], part_name_prefix=r["part_name_prefix"],
                 part_name_suffix_length=r["part_name_suffix_length"], random_shuffle=False, shuffle_after_epoch=False)
    ddir = os.path.join(REPO, case["dir"])
    paths, pbrecs = plan(case)
    N = len(pbrecs)
    out = {"case": name, "kind": case["kind"], "dir": case["dir"],
           "oracle": "OneFlow %s (CPU, eager): flow.nn.OFRecordReader + OFRecordRawDecoder / OFRecordBytesDecoder" % flow.__version__,
           "case_sha256": sha(open(case_path, "rb").read()),
           "files": {os.path.basename(p): sha(open(p, "rb").read()) for p in paths},
           "num_records": N}

    # 2. per record, exact lengths
    reader = flow.nn.OFRecordReader(ddir, batch_size=1, **rargs)
    recs, mismatches = [], []
    for i in range(N):
        rec = reader()
        got = {}
        for fname in sorted(pbrecs[i]):
            kind, values = pbrecs[i][fname]
            if kind == "bytes_list":
                if len(values) == 1:
                    buf = flow.nn.OFRecordBytesDecoder(fname)(rec)
                    (t,) = flow.tensor_buffer_to_list_of_tensors(buf, [(len(values[0]),)], [flow.uint8])
                    b = t.numpy().tobytes()
                    got[fname] = {"kind": kind, "values": [b.hex()], "source": "OFRecordBytesDecoder"}
                    if b != values[0]:
                        mismatches.append([i, fname, "bytes"])
                else:
                    got[fname] = {"kind": kind, "values": [v.hex() for v in values], "source": "record_pb2"}
                continue
            dt = KIND_DTYPE[kind]
            a = flow.nn.OFRecordRawDecoder(fname, (len(values),), dtypes[dt])(rec).numpy()[0]
            j = arr_json(a)
            del j["out_shape"]
            got[fname] = dict(kind=kind, source="OFRecordRawDecoder", **j)
            if a.tobytes() != np.asarray(values, dtype=dt).tobytes():
                mismatches.append([i, fname, "values"])
        recs.append(got)
    out["records"] = recs
    out["pb2_mismatches"] = mismatches

    # 3. batched decodes over the wrap-around
    B = case["batch_size"]
    M = math.ceil(N / B) + 1
    reader = flow.nn.OFRecordReader(ddir, batch_size=B, **rargs)
    decs = []
    for d in case["decodes"]:
        mod = flow.nn.OFRecordRawDecoder(d["name"], tuple(d["shape"]), dtypes[d["dtype"]],
                                         dim1_varying_length=d.get("dim1_varying_length", False),
                                         truncate=d.get("truncate", False),
                                         auto_zero_padding=d.get("auto_zero_padding", False))
        decs.append((d, mod, []))
    for _ in range(M):
        rec = reader()
        for d, mod, acc in decs:
            acc.append(mod(rec).numpy())
    out["batches"] = {"batch_size": B, "num_batches": M,
                      "decodes": [dict(d, **arr_json(np.concatenate(acc))) for d, _, acc in decs]}
    return out


def main(argv):
    if len(argv) >= 2 and argv[0] == "--one":
        res = run_case(argv[1])
        sys.stdout.write("\n@@GOLDEN@@" + json.dumps(res))
        return 0
    names = argv or sorted(f[:-5] for f in os.listdir(os.path.join(DATA, "cases")) if f.endswith(".json"))
    os.makedirs(os.path.join(DATA, "expected"), exist_ok=True)
    failed = 0
    for name in names:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name], capture_output=True, text=True,
                           cwd=REPO)
        if p.returncode == 0 and "@@GOLDEN@@" in p.stdout:
            res = json.loads(p.stdout.split("@@GOLDEN@@", 1)[1])
        else:
            failed += 1
            err = [ln for ln in p.stderr.splitlines() if ln and not ln.startswith("W")][-8:]
            case = json.load(open(os.path.join(DATA, "cases", name + ".json")))
            res = {"case": name, "kind": case["kind"], "dir": case["dir"], "error": "\n".join(err),
                   "returncode": p.returncode}
        with open(os.path.join(DATA, "expected", name + ".json"), "w") as f:
            json.dump(res, f, separators=(",", ":"))
            f.write("\n")
        if "error" in res:
            print(f"{name}: ERROR rc={res['returncode']}\n  " + res["error"].replace("\n", "\n  "))
        else:
            print(f"{name}: {res['num_records']} records, {len(res['files'])} parts, "
                  f"{res['batches']['num_batches']} batches x {res['batches']['batch_size']}, "
                  f"{len(res['batches']['decodes'])} decodes; record_pb2 vs C++ mismatches: {res['pb2_mismatches']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
