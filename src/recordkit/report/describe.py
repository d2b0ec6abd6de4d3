"""``recordkit inspect`` as a library: a file's or data set's structure from its index, without
decoding the values (streams, chunk table, sequence-length distribution, sizes).

``describe_cbf``, ``describe_ctf``, ``describe_singa`` and ``describe_data_set`` (the registry's
directory formats) return JSON-able dicts; the command (``cli/inspect_cmd.py``) only chooses one
by the detected format and prints it.
"""
from __future__ import annotations

import numpy as np


def length_distribution(lengths: np.ndarray) -> dict:
    if len(lengths) == 0:
        return {"count": 0}
    q = np.percentile(lengths, [50, 90, 99])
    edges = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]
    hist = {}
    lo = 0
    for e in edges + [None]:
        hi = e
        n = int(np.count_nonzero((lengths >= lo) & (lengths < hi))) if hi is not None else int(
            np.count_nonzero(lengths >= lo))
        if n:
            hist[f"{lo}-{hi - 1}" if hi is not None and hi - 1 != lo else (f"{lo}" if hi is not None else f">={lo}")] = n
        lo = hi if hi is not None else lo
    return {"count": int(len(lengths)), "min": int(lengths.min()), "max": int(lengths.max()),
            "mean": float(lengths.mean()), "median": float(q[0]), "p90": float(q[1]), "p99": float(q[2]),
            "histogram": hist}


def describe_singa(path, storage_options=None) -> dict:
    from recordkit.formats import singa
    from recordkit.storage import open_source
    sizes, first, last = [], None, None
    with singa.open(str(path), "read", storage_options=storage_options) as store:
        kind = store.kind
        for key, value in store:
            sizes.append(len(value))
            first = key if first is None else first
            last = key
    v = np.array(sizes or [0])
    src = open_source(str(path), storage_options=storage_options, verify=False)
    size = src.size
    src.close()
    return {"format": "singa", "store": kind, "path": str(path), "bytes": size,
            "tuples": len(sizes), "first_key": None if first is None else first.decode("utf-8", "replace"),
            "last_key": None if last is None else last.decode("utf-8", "replace"),
            "value_bytes": {"min": int(v.min()), "max": int(v.max()), "mean": float(v.mean())}}


def describe_cbf(path, storage_options=None, lengths_out: list | None = None) -> dict:
    from recordkit.formats.cbf import CBFReader
    with CBFReader(path, storage_options=storage_options) as r:
        lengths = np.concatenate([r.sequence_lengths(c.id) for c in r.chunks]) if r.chunks else np.zeros(0)
        if lengths_out is not None:
            lengths_out.append(lengths)
        return {
            "format": "cbf", "path": str(path), "version": r.version, "bytes": r.header.file_size,
            "header_offset": r.header.header_offset,
            "streams": [{"name": s.name, "format": s.format, "dtype": str(s.dtype), "dim": s.dim}
                        for s in r.header.streams],
            "sequences": r.num_sequences, "samples": int(sum(c.num_samples for c in r.chunks)),
            "chunks": [{"id": c.id, "offset": c.offset, "bytes": c.size, "sequences": c.num_sequences,
                        "samples": c.num_samples} for c in r.chunks],
            "sequence_lengths": length_distribution(lengths),
        }


def describe_ctf(path, chunk_size, skip_ids, storage_options=None, lengths_out: list | None = None) -> dict:
    from recordkit.formats.ctf import index as ctf_index
    from recordkit.storage import open_source
    with_source = open_source(str(path), storage_options=storage_options)
    try:
        idx = ctf_index.scan(with_source, skip_sequence_ids=skip_ids)
    finally:
        with_source.close()
    bounds = idx.chunk_bounds(chunk_size)
    if lengths_out is not None:
        lengths_out.append(idx.rows)
    chunks = []
    for c in range(len(bounds) - 1):
        lo, hi = int(bounds[c]), int(bounds[c + 1])
        start = int(idx.offsets[lo])
        chunks.append({"id": c, "offset": start, "bytes": int(idx.offsets[hi - 1] + idx.sizes[hi - 1]) - start,
                       "sequences": hi - lo, "samples": int(idx.rows[lo:hi].sum())})
    return {"format": "ctf", "path": str(path), "bytes": idx.file_size,
            "mode": "sequence ids" if idx.id_mode else "one sequence per line",
            "sequences": len(idx), "samples": int(idx.rows.sum()), "index_errors": idx.error_count,
            "chunks": chunks, "sequence_lengths": length_distribution(idx.rows.astype(np.int64))}


def stream_flags(streams) -> str:
    """A reader's streams as the ``--stream`` options that read them (what ``inspect`` prints, so
    the streams recordkit inferred or found recorded can be copied, edited and passed back)."""
    from recordkit.formats.arrow_layouts import stream_flags as flags
    return flags(streams)


def describe_data_set(path, kind: str, storage_options=None) -> dict:
    """Any registered format that records its own streams (Parquet, Hugging Face, a directory of CBF
    parts): its files, streams and chunks, from its reader's chunk table."""
    from recordkit.formats import registry
    from recordkit.storage import location
    reader = registry.get(kind).open_reader(str(path), None, storage_options=storage_options)
    with reader:
        files = list(getattr(reader, "paths", [str(path)]))
        chunks = [{"id": c.id, "offset": c.offset, "bytes": c.size, "sequences": c.num_sequences,
                   "samples": c.num_samples} for c in reader.chunks]
        from recordkit.engine.deserializer import sequence_lengths
        known = [sequence_lengths(reader, c.id) for c in reader.chunks]
        lengths = (np.concatenate([np.asarray(k, dtype=np.int64) for k in known])
                   if known and all(k is not None for k in known) else np.zeros(0, np.int64))
        streams = [{"name": s.name, "alias": s.alias, "format": s.format, "dtype": str(s.dtype), "dim": s.dim}
                   for s in reader.streams]
        flags, notes = stream_flags(reader.streams), dict(getattr(reader, "column_notes", None) or {})
    size = 0
    for f in files:
        try:
            fs, p = location.filesystem(f, storage_options)
            size += int(fs.size(p))
        except Exception:  # noqa: BLE001 - a size we cannot learn is left out
            pass
    return {"format": kind, "path": str(path), "bytes": size, "files": files, "streams": streams,
            "stream_flags": flags, "notes": notes, "sequences": sum(c["sequences"] for c in chunks), "samples": sum(c["samples"] for c in chunks),
            "chunks": chunks, "sequence_lengths": length_distribution(lengths)}
