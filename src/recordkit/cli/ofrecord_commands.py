"""OFRecord sides of ``cat``, ``stats``, ``inspect``, plus ``reshard`` (``validate``: formats/ofrecord/validate.py)."""
from __future__ import annotations

import base64
import json
import math
import os
import sys

import numpy as np
import orjson

from recordkit.formats.ofrecord import codec
from recordkit.formats.ofrecord.dataset import part_paths, scan_part


def _parts(args) -> list[str]:
    return part_paths(args.path, getattr(args, "data_part_num", None), getattr(args, "part_name_prefix", "part-"),
                      getattr(args, "part_name_suffix_length", -1),
                      storage_options=getattr(args, "storage_options", None))


def _part(path, storage_options=None):
    """(index, bytes) of a whole part, local or remote (checksum-verified when it has a sidecar)."""
    from recordkit.storage import open_source
    src = open_source(path, storage_options=storage_options)
    try:
        index = scan_part(src)
        data = src.pread(0, index.size, cache=False)
    finally:
        src.close()
    return index, data


def _records(path, storage_options=None):
    index, data = _part(path, storage_options)
    err = index.error()
    for i, (off, n) in enumerate(zip(index.offsets.tolist(), index.lengths.tolist())):
        yield i, off - 8, codec.decode(data[off:off + n], path=path, offset=off - 8, index=i)
    if err is not None:
        raise err


def _json_value(f: codec.Feature):
    if f.kind == "bytes_list":
        return [base64.b64encode(v).decode("ascii") for v in f.value]
    return f.value  # orjson prints float32/float64 in their shortest round-trip form


def cat(args) -> int:
    out = sys.stdout.buffer
    for path in _parts(args):
        for _, _, rec in _records(path, getattr(args, "storage_options", None)):
            obj = {name: {"kind": f.kind, "values": _json_value(f)} for name, f in rec.items()}
            finite = all(f.kind == "bytes_list" or f.kind.startswith("int") or np.isfinite(f.value).all()
                         for f in rec.values())
            if finite:
                out.write(orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
            else:
                plain = {k: {"kind": v["kind"], "values": [float(str(x)) if math.isfinite(x) else float(x)
                                                           for x in v["values"]]}
                         if v["kind"] in ("float_list", "double_list") else v for k, v in obj.items()}
                out.write(json.dumps(plain, default=lambda a: a.tolist(), separators=(",", ":")).encode() + b"\n")
    return 0


def describe(args) -> dict:
    parts = []
    features: dict = {}
    for path in _parts(args):
        index, data = _part(path, getattr(args, "storage_options", None))
        parts.append({"path": path, "bytes": index.size, "records": len(index),
                      "problem": None if index.error() is None else str(index.error())})
        for i, (off, n) in enumerate(zip(index.offsets.tolist(), index.lengths.tolist())):
            try:
                rec = codec.decode(data[off:off + n], path=path, offset=off - 8, index=i)
            except Exception:
                continue
            for name, f in rec.items():
                d = features.setdefault(name, {"kinds": {}, "min_length": None, "max_length": 0, "records": 0})
                d["kinds"][f.kind] = d["kinds"].get(f.kind, 0) + 1
                d["records"] += 1
                d["max_length"] = max(d["max_length"], len(f))
                d["min_length"] = len(f) if d["min_length"] is None else min(d["min_length"], len(f))
    return {"format": "ofrecord", "path": str(args.path), "parts": parts,
            "records": sum(p["records"] for p in parts), "features": features}


def inspect(args) -> int:
    info = describe(args)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(info) + b"\n")
        return 0
    print(f"{info['path']}: OFRecord, {len(info['parts'])} part(s), {info['records']} records")
    for p in info["parts"]:
        print(f"  {os.path.basename(p['path']):<24} {p['bytes']:>12} bytes {p['records']:>10} records"
              + (f"  PROBLEM: {p['problem']}" if p["problem"] else ""))
    print("features:")
    for name, d in sorted(info["features"].items()):
        kinds = ", ".join(f"{k} x{n}" for k, n in d["kinds"].items())
        print(f"  {name:<20} {kinds:<28} length {d['min_length']}..{d['max_length']} in {d['records']} records")
    return 0


def stats(args) -> dict:
    totals: dict = {}
    records = 0
    for path in _parts(args):
        for _, _, rec in _records(path, getattr(args, "storage_options", None)):
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


def reshard(args) -> int:
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    paths = _parts(args)
    opts = getattr(args, "storage_options", None)
    total = sum(len(_part(p, opts)[0]) for p in paths)
    with OFRecordWriter(args.output, args.parts, sharding="contiguous" if not args.round_robin else "round_robin",
                        total=total if not args.round_robin else None,
                        part_name_suffix_length=args.part_name_suffix_length_out, storage_options=opts) as w:
        for path in paths:
            index, data = _part(path, opts)
            err = index.error()
            if err is not None:
                raise err
            for off, n in zip(index.offsets.tolist(), index.lengths.tolist()):
                w.write(data[off:off + n])  # frames are copied as they are: no re-encoding
    print(f"recordkit: {total} records from {len(paths)} part(s) -> {len(w.paths)} part(s) in {args.output}",
          file=sys.stderr)
    return 0
