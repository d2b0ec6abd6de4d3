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
from recordkit.formats.ofrecord.dataset import part_paths


def _parts(args) -> list[str]:
    return part_paths(args.path, getattr(args, "data_part_num", None), getattr(args, "part_name_prefix", "part-"),
                      getattr(args, "part_name_suffix_length", -1),
                      storage_options=getattr(args, "storage_options", None))


def _part(path, storage_options=None):
    from recordkit.formats.ofrecord.dataset import read_part
    return read_part(path, storage_options)


def _records(path, storage_options=None):
    index, data = _part(path, storage_options)
    err = index.error()
    for i, (off, n) in enumerate(zip(index.offsets.tolist(), index.lengths.tolist())):
        yield i, off - 8, codec.decode(data[off:off + n], path=path, offset=off - 8, index=i)
    if err is not None:
        raise err
    _trace_part(path, len(index), index.size)


def _trace_part(path, records: int, size: int) -> None:
    """Trace level 2 (``--trace-level 2``): one line per part file read."""
    from recordkit.errors import RecordkitInfo, warn
    warn(f"{path}: part loaded: {records} records, {size} bytes", RecordkitInfo)


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
    """Per-feature totals of every record, walked on the wire by the compiled ``FeatureStats``
    (no record objects); a record it cannot take is decoded by protobuf, which raises its located
    error or gives the values. Same numbers as decoding each record (same arithmetic)."""
    from recordkit.formats.ofrecord._kernel import FeatureStats
    acc = FeatureStats()
    records = 0
    for path in _parts(args):
        index, data = _part(path, getattr(args, "storage_options", None))
        buf = np.frombuffer(data, dtype=np.uint8)
        offsets = np.ascontiguousarray(index.offsets, dtype=np.int64)
        lengths = np.ascontiguousarray(index.lengths, dtype=np.int64)
        start = 0
        while (r := acc.add(buf, offsets, lengths, start)) >= 0:
            off, n = int(offsets[r]), int(lengths[r])
            for name, f in codec.decode(data[off:off + n], path=path, offset=off - 8, index=r).items():
                if f.kind != "bytes_list" and len(f):
                    v = f.value
                    acc.add_record(name, codec.KINDS.index(f.kind) + 1, len(f), float(v.sum(dtype=np.float64)),
                                   float(v.min()), float(v.max()))
                else:
                    acc.add_record(name, codec.KINDS.index(f.kind) + 1, len(f))
            start = r + 1
        records += len(index)
        err = index.error()
        if err is not None:
            raise err
    totals = {name: {**t, "kind": codec.KINDS[t["kind"] - 1]} for name, t in acc.result().items()}
    return {"records": records, "features": totals}


def reshard(args) -> int:
    from recordkit.formats.ofrecord.dataset import read_streams
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    paths = _parts(args)
    opts = getattr(args, "storage_options", None)
    total = sum(len(_part(p, opts)[0]) for p in paths)
    # the records are copied as they are: the stream declarations the data set records still hold
    streams = read_streams(args.path, storage_options=opts)
    with OFRecordWriter(args.output, args.parts, sharding="contiguous" if not args.round_robin else "round_robin",
                        total=total if not args.round_robin else None, streams=streams,
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
