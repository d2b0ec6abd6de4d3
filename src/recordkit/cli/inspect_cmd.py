"""``recordkit inspect FILE``: structure of a file without decoding its values.

CBF: version, streams, chunk table (offset, bytes, sequences, samples) and the
sequence length distribution from the chunks' length prefixes. CTF: the index
(mode, sequences, chunks, rows per sequence); no stream declarations needed.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import orjson
from recordkit.engine import DEFAULT_CHUNK_SIZE


def register(sub) -> None:
    from recordkit.cli import argtypes
    p = sub.add_parser("inspect", help="show a file's structure: streams, chunks, sequence lengths",
                       description="Show the structure of PATH without decoding its values. CBF: version, "
                                   "streams, the chunk table and the sequence length distribution; CTF: the index "
                                   "(mode, sequences, chunks, rows per sequence; no --stream needed); OFRecord: "
                                   "parts, record counts, feature names, kinds and lengths; SINGA store: kind, "
                                   "tuples, keys and value sizes.")
    p.add_argument("path", help="a CTF or CBF file, an OFRecord directory or part file, or a SINGA store")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--chunk-size", type=argtypes.size, default=DEFAULT_CHUNK_SIZE, metavar="BYTES",
                   help="CTF: index chunk size, e.g. 65536, 64K, 32M (default 32M)")
    p.add_argument("--skip-sequence-ids", action="store_true", help="CTF: every line is a sequence")
    from recordkit.cli.sources import add_part_arguments, add_stream_argument
    add_stream_argument(p)
    add_part_arguments(p)
    p.add_argument("--plot", metavar="FILE.png|FILE.svg", default=None,
                   help="CTF/CBF: also draw the sequence-length histogram to FILE (needs recordkit[report])")
    from recordkit.cli.sources import add_storage_arguments
    add_storage_arguments(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from recordkit.report.describe import describe_data_set, describe_singa
    from recordkit.formats import registry
    from recordkit.formats.detect import sniff_format
    from recordkit.storage import location
    opts = args.storage_options
    fmt = registry.get(sniff_format(args.path, opts, part_name_prefix=args.part_name_prefix))
    kind = fmt.kind
    one_file = fmt.describer is not None and not location.isdir(args.path, opts)  # CTF, CBF: its own index
    if args.plot and not one_file:
        from recordkit.errors import UsageError
        raise UsageError(f"{args.path}: --plot draws sequence lengths, which {kind} data does not have "
                         f"(a record is one sample); `recordkit report` shows its features")
    if args.plot:
        from recordkit.report.html import _pyplot
        _pyplot()  # a missing extra is said before the file is read
    if fmt.records == "tuples":
        info = describe_singa(args.path, opts)
        if args.json:
            sys.stdout.buffer.write(orjson.dumps(info) + b"\n")
        else:
            print(f"{info['path']}: SINGA {info['store']} store, {info['tuples']} tuples, {info['bytes']} bytes")
            if info["tuples"]:
                print(f"  keys {info['first_key']!r} .. {info['last_key']!r}; value bytes "
                      f"{info['value_bytes']['min']}..{info['value_bytes']['max']} "
                      f"(mean {info['value_bytes']['mean']:.1f})")
        return 0
    if fmt.records == "features":
        return inspect_ofrecord(args)
    if fmt.shards:
        return inspect_bridge(args, kind)
    lengths = [] if args.plot else None
    if not one_file:  # Parquet, HF, CBF part directories
        info = describe_data_set(args.path, kind, opts)
    else:
        info = registry.describe(fmt, args.path, storage_options=opts, lengths_out=lengths,
                                 chunk_size=args.chunk_size, skip_ids=args.skip_sequence_ids)
    if one_file and fmt.needs_streams and args.stream:  # the index needs no declarations; given, they are shown
        from recordkit.cli.sources import parse_streams
        args.defines_mb_size = None
        info["streams"] = [{"name": s.name, "format": s.format, "dtype": "declared", "dim": s.dim,
                            "alias": s.alias} for s in parse_streams(args)]
    if args.plot:
        from recordkit.report.html import write_lengths_plot
        write_lengths_plot(np.bincount(np.asarray(lengths[0], dtype=np.int64)), args.plot,
                           f"Sequence lengths of {os.path.basename(str(args.path))}")
        print(f"recordkit: wrote the sequence-length histogram to {args.plot}", file=sys.stderr)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(info) + b"\n")
        return 0
    out = [f"{info['path']}: {info['format'].upper()}, {info['bytes']} bytes"]
    if "files" in info:
        out.append(f"{len(info['files'])} file(s); {len(info['streams'])} streams:")
        for s in info["streams"]:
            out.append(f"  {s['name']:<20} {s['format']:<6} {s['dtype']:<8} dim {s['dim']}")
        out += stream_lines(info)
    elif "version" in info:  # a binary file's header
        out.append(f"version {info['version']}, header at offset {info['header_offset']}")
        out.append(f"{len(info['streams'])} streams:")
        for s in info["streams"]:
            out.append(f"  {s['name']:<20} {s['format']:<6} {s['dtype']:<8} dim {s['dim']}")
    else:
        out.append(f"mode: {info['mode']}" + (f", {info['index_errors']} index error(s)" if info["index_errors"] else ""))
        if "streams" in info:
            out.append(f"{len(info['streams'])} declared streams:")
            for s in info["streams"]:
                out.append(f"  {s['name']:<20} {s['format']:<6} dim {s['dim']}"
                           + (f" (alias {s['alias']})" if s["alias"] != s["name"] else ""))
    out.append(f"{info['sequences']} sequences, {info['samples']} samples, {len(info['chunks'])} chunks")
    out.append(f"  {'chunk':>6} {'offset':>12} {'bytes':>12} {'sequences':>10} {'samples':>10}")
    rows = info["chunks"]
    shown = rows if len(rows) <= 20 else rows[:10] + [None] + rows[-10:]
    for c in shown:
        if c is None:
            out.append(f"  {'...':>6}")
            continue
        out.append(f"  {c['id']:>6} {c['offset']:>12} {c['bytes']:>12} {c['sequences']:>10} {c['samples']:>10}")
    d = info["sequence_lengths"]
    if d["count"]:
        out.append(f"sequence lengths: min {d['min']}, median {d['median']:g}, mean {d['mean']:.2f}, "
                   f"p90 {d['p90']:g}, p99 {d['p99']:g}, max {d['max']}")
        out.append("  " + ", ".join(f"{k}: {v}" for k, v in d["histogram"].items()))
    print("\n".join(out))
    return 0


def stream_lines(info) -> list[str]:
    """The streams as ``--stream`` options, and what the data says of its columns (class names)."""
    lines = [f"read as: {info['stream_flags']}"] if info.get("stream_flags") else []
    return lines + [f"  {name}: {note}" for name, note in sorted((info.get("notes") or {}).items())]


def inspect_bridge(args, kind: str) -> int:
    """A WebDataset/TFRecord/MDS directory: its streams and shards (from its own description)."""
    from recordkit.cli import sources
    from recordkit.report.describe import stream_flags
    reader = sources.open_reader(args)
    info = {"format": kind, "path": str(args.path),
            "streams": [{"name": s.name, "alias": s.alias, "format": s.format, "dim": s.dim,
                         "dtype": str(s.dtype)} for s in reader.streams],
            "stream_flags": stream_flags(reader.streams),
            "notes": dict(getattr(reader, "column_notes", None) or {}),
            "sequences": sum(c.num_sequences for c in reader.chunks),
            "samples": sum(c.num_samples for c in reader.chunks),
            "shards": [{"path": p, "bytes": c.size, "sequences": c.num_sequences, "samples": c.num_samples}
                       for p, c in zip(reader.paths if hasattr(reader, "paths") else [], reader.chunks)]}
    if getattr(reader, "inferred", False):  # no description: the streams the reader inferred from the data
        from recordkit.engine.streams import stream_arguments
        info["inferred"] = stream_arguments(reader.streams)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(info) + b"\n")
        return 0
    out = [f"{info['path']}: {kind}, {len(info['shards'])} shard(s), {info['sequences']} sequences, "
           f"{info['samples']} samples", f"{len(info['streams'])} streams:"]
    for s in info["streams"]:
        out.append(f"  {s['name']:<20} {s['format']:<6} {s['dtype']:<8} dim {s['dim']}"
                   + (f" (alias {s['alias']})" if s["alias"] != s["name"] else ""))
    out += stream_lines(info)
    if "inferred" in info:
        out.append(f"  inferred (no stream description): {info['inferred']}")
    out.append(f"  {'shard':<40} {'bytes':>12} {'sequences':>10} {'samples':>10}")
    for sh in info["shards"]:
        out.append(f"  {os.path.basename(sh['path']):<40} {sh['bytes']:>12} {sh['sequences']:>10} {sh['samples']:>10}")
    print("\n".join(out))
    return 0


def inspect_ofrecord(args) -> int:
    from recordkit.cli import sources
    from recordkit.formats.ofrecord import summary
    info = summary.describe(sources.ofrecord_parts(args), args.path, getattr(args, "storage_options", None))
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
