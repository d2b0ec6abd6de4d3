"""OFRecord sides of ``cat``, ``stats``, ``inspect``, plus ``reshard``: the parts chosen from the command
line, the work done by ``formats/ofrecord/summary.py`` (``validate``: formats/ofrecord/validate.py)."""
from __future__ import annotations

import base64
import json
import math
import os
import sys

import numpy as np
import orjson

from recordkit.formats.ofrecord import codec, summary
from recordkit.formats.ofrecord.dataset import part_paths


def _parts(args) -> list[str]:
    return part_paths(args.path, getattr(args, "data_part_num", None), getattr(args, "part_name_prefix", "part-"),
                      getattr(args, "part_name_suffix_length", -1),
                      storage_options=getattr(args, "storage_options", None))


def _records(path, storage_options=None):
    return summary.records(path, storage_options)


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
    return summary.describe(_parts(args), args.path, getattr(args, "storage_options", None))


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
    return summary.feature_totals(_parts(args), getattr(args, "storage_options", None))


def reshard(args) -> int:
    from recordkit.formats.ofrecord.dataset import read_streams
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    paths = _parts(args)
    opts = getattr(args, "storage_options", None)
    # counted from the parts' indexes (sidecars, or a scan of the length prefixes): the records are
    # read once, below
    from recordkit.formats.ofrecord.dataset import load_index, read_part
    total = sum(len(load_index(p, storage_options=opts)) for p in paths)
    # the records are copied as they are: the stream declarations the data set records still hold
    streams = read_streams(args.path, storage_options=opts)
    with OFRecordWriter(args.output, args.parts, sharding="contiguous" if not args.round_robin else "round_robin",
                        total=total if not args.round_robin else None, streams=streams,
                        part_name_suffix_length=args.part_name_suffix_length_out, storage_options=opts) as w:
        for path in paths:
            index, data = read_part(path, opts)
            err = index.error()
            if err is not None:
                raise err
            for off, n in zip(index.offsets.tolist(), index.lengths.tolist()):
                w.write(data[off:off + n])  # frames are copied as they are: no re-encoding
    print(f"recordkit: {total} records from {len(paths)} part(s) -> {len(w.paths)} part(s) in {args.output}",
          file=sys.stderr)
    return 0
