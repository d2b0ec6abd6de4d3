"""What the commands learn from an OFRecord data set, as library functions: every record decoded
(``records``), the structure (``describe``: parts, features, kinds, lengths) and per-feature totals
(``feature_totals``, walked on the wire by the compiled ``FeatureStats``). The commands (``cli/cat.py``,
``stats.py``, ``inspect_cmd.py``) only select the parts from the command line and print.
"""
from __future__ import annotations

import numpy as np

from recordkit.formats.ofrecord import codec
from recordkit.formats.ofrecord.dataset import read_part


def records(path, storage_options=None):
    """(record index, byte offset of its frame, {feature: Feature}) of every record of one part, in
    order; a damaged tail is raised (located) after the records before it."""
    index, data = read_part(path, storage_options)
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


def describe(paths: list, path, storage_options=None) -> dict:
    """Parts (bytes, records, the first problem) and features (kinds, lengths, records holding them)."""
    parts = []
    features: dict = {}
    for part in paths:
        index, data = read_part(part, storage_options)
        parts.append({"path": part, "bytes": index.size, "records": len(index),
                      "problem": None if index.error() is None else str(index.error())})
        for i, (off, n) in enumerate(zip(index.offsets.tolist(), index.lengths.tolist())):
            try:
                rec = codec.decode(data[off:off + n], path=part, offset=off - 8, index=i)
            except Exception:
                continue
            for name, f in rec.items():
                d = features.setdefault(name, {"kinds": {}, "min_length": None, "max_length": 0, "records": 0})
                d["kinds"][f.kind] = d["kinds"].get(f.kind, 0) + 1
                d["records"] += 1
                d["max_length"] = max(d["max_length"], len(f))
                d["min_length"] = len(f) if d["min_length"] is None else min(d["min_length"], len(f))
    return {"format": "ofrecord", "path": str(path), "parts": parts,
            "records": sum(p["records"] for p in parts), "features": features}


def feature_totals(paths: list, storage_options=None) -> dict:
    """Per-feature totals of every record, walked on the wire by the compiled ``FeatureStats``
    (no record objects); a record it cannot take is decoded by protobuf, which raises its located
    error or gives the values. Same numbers as decoding each record (same arithmetic)."""
    from recordkit.formats.ofrecord._kernel import FeatureStats
    acc = FeatureStats()
    total = 0
    for part in paths:
        index, data = read_part(part, storage_options)
        buf = np.frombuffer(data, dtype=np.uint8)
        offsets = np.ascontiguousarray(index.offsets, dtype=np.int64)
        lengths = np.ascontiguousarray(index.lengths, dtype=np.int64)
        start = 0
        while (r := acc.add(buf, offsets, lengths, start)) >= 0:
            off, n = int(offsets[r]), int(lengths[r])
            add_decoded(acc, codec.decode(data[off:off + n], path=part, offset=off - 8, index=r))
            start = r + 1
        total += len(index)
        err = index.error()
        if err is not None:
            raise err
    totals = {name: {**t, "kind": codec.KINDS[t["kind"] - 1]} for name, t in acc.result().items()}
    return {"records": total, "features": totals}


def add_decoded(acc, record: dict) -> None:
    """Count a record that ``FeatureStats`` handed back (not canonical on the wire) from its decoded
    features, with the same arithmetic as the compiled walk."""
    for name, f in record.items():
        if f.kind != "bytes_list" and len(f):
            v = f.value
            acc.add_record(name, codec.KINDS.index(f.kind) + 1, len(f), float(v.sum(dtype=np.float64)),
                           float(v.min()), float(v.max()))
        else:
            acc.add_record(name, codec.KINDS.index(f.kind) + 1, len(f))
