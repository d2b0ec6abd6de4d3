"""``recordkit convert IN OUT``: between CTF and CBF (either direction, or re-chunking)."""
from __future__ import annotations

import os
import sys
import time

from recordkit.cli import sources
from recordkit.cli.cat import report_tolerated
from recordkit.cli.progress import byte_progress
from recordkit.engine.streams import StreamSpec, resolve_precision
from recordkit.errors import FormatError, UsageError


def register(sub) -> None:
    p = sub.add_parser("convert", help="convert between CTF, CBF and OFRecord",
                       description="Convert IN to OUT. Formats: IN by content, OUT by extension (.cbf/.bin, "
                                   ".ctf/.txt) or --to (ofrecord: OUT is a directory of part files). CTF and "
                                   "OFRecord input need their streams: --stream (for OFRecord the ALIAS is the "
                                   "feature name) or --header. See the README for the record <-> stream mapping.")
    p.add_argument("path", metavar="IN")
    p.add_argument("output", metavar="OUT")
    p.add_argument("--to", choices=["ctf", "cbf", "ofrecord", "kvfile", "binfile", "webdataset", "tfrecord", "mds"],
                   help="output format (default: from OUT's extension); kvfile/binfile: SINGA record stores; "
                        "webdataset/tfrecord/mds: a directory of shards")
    p.add_argument("--shard-size", dest="shard_size", type=int, default=None, metavar="BYTES",
                   help="webdataset/tfrecord/mds output: start a new shard after this many bytes "
                        "(default 256 MiB; mds 64 MiB)")
    p.add_argument("--image-feature", dest="image_feature", action="append", default=[], metavar="NAME",
                   help="OFRecord input to webdataset/tfrecord without --stream: the bytes feature NAME holds "
                        "encoded JPEG/PNG images, copied unchanged (WebDataset members KEY.jpg / KEY.png)")
    p.add_argument("--parts", type=int, default=None, metavar="N",
                   help="OFRecord output: number of part files (default 1); with --engine ray: at most N part "
                        "files, each a run of consecutive input chunks (default: one per input chunk)")
    p.add_argument("--from", dest="source_format", choices=["csv"], default=None,
                   help="read IN as a SINGA CSV store (CSVInputLayer's format) instead of sniffing it")
    p.add_argument("--csv-dim", type=int, default=None, metavar="N", help="CSV input: values per line after the label")
    p.add_argument("--csv-separator", default=",", metavar="SEP", help="CSV input: field separator (default ',')")
    p.add_argument("--csv-no-label", action="store_true", help="CSV input: lines have no label column")
    p.add_argument("--header", metavar="FILE",
                   help="CNTK converter header file: one stream a line, 'name alias dense|sparse dim'")
    p.add_argument("--checksum", action="store_true",
                   help="also write a NAME.rkcrc checksum sidecar beside every output file (verified on read)")
    p.add_argument("--output-chunk-size", dest="output_chunk_size", type=int, default=None, metavar="BYTES",
                   help="CBF output chunk size (default: --chunk-size, 32 MiB)")
    p.add_argument("--engine", choices=["local", "ray"], default="local",
                   help="local: this process (default); ray: a Ray cluster, one read task per input chunk, "
                        "OUT a directory of part files (cbf or ofrecord)")
    p.add_argument("--ray-address", metavar="ADDRESS", default=None,
                   help="with --engine ray: the cluster to join (default: start a local one)")
    sources.add_ctf_arguments(p)
    p.set_defaults(run=run)


def read_header_file(path: str) -> list[StreamSpec]:
    """Streams from a ctf2bin header file: ``name alias dense|sparse dim`` per line."""
    streams = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            fields = line.split()
            if len(fields) != 4:
                raise FormatError(path, f"expected 'name alias dense|sparse dim', found {len(fields)} field(s)",
                                  line=n, column=1)
            name, alias, fmt, dim = fields
            try:
                streams.append(StreamSpec(name, fmt, dim, alias))
            except ValueError as e:
                raise FormatError(path, str(e), line=n, column=1) from None
    if not streams:
        raise FormatError(path, "no streams in the header file")
    return streams


def run(args) -> int:
    if getattr(args, "engine", "local") == "ray":
        return run_ray(args)
    from recordkit.formats.detect import by_extension, sniff
    from recordkit.storage import location
    opts = args.storage_options
    out = dict(storage_options=opts, checksums=args.checksum)
    target = args.to or by_extension(args.output)
    if target is None and location.isdir(args.output, opts):
        target = "ofrecord"
    if target is None:
        raise SystemExit(f"recordkit: error: cannot tell the format of {args.output} from its extension: use --to")
    if (not location.is_url(args.output) and not location.is_url(args.path) and os.path.exists(args.output)
            and os.path.samefile(args.path, args.output)) or args.path == args.output:
        raise SystemExit("recordkit: error: IN and OUT are the same file")
    source_kind = "csv" if args.source_format == "csv" else sniff(args.path, opts)
    if target in BRIDGE_TARGETS and source_kind == "ofrecord" and not args.stream and not args.header:
        return _records_to_bridge(args, target, out)
    if source_kind == "csv":
        if not args.csv_dim:
            raise SystemExit("recordkit: error: --from csv needs --csv-dim N (the values per line)")
        from recordkit.formats.singa.deserializer import SingaCSVDeserializer
        reader = SingaCSVDeserializer(args.path, args.csv_dim, separator=args.csv_separator,
                                      has_label=not args.csv_no_label, precision=args.precision or "float",
                                      storage_options=opts)
    elif source_kind == "singa":
        from recordkit.formats.singa.deserializer import SingaRecordDeserializer
        reader = SingaRecordDeserializer(args.path, precision=args.precision or "float", storage_options=opts)
    elif source_kind == "cbf":
        reader = sources.open_cbf(args)
    elif source_kind in BRIDGE_TARGETS:
        reader = sources.open_bridge(args, source_kind)
    elif source_kind == "ofrecord":
        from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
        streams = read_header_file(args.header) if args.header else sources.parse_streams(args)
        reader = OFRecordDeserializer(args.path, streams, precision=args.precision or "float",
                                      **sources.storage(args))
    else:
        streams = read_header_file(args.header) if args.header else None
        reader = sources.open_ctf(args, streams=streams)
    precision = args.precision or _precision_of(reader)
    if target in BRIDGE_TARGETS:
        writer = _bridge_writer(target, args, reader.streams, precision,
                                total=sum(c.num_sequences for c in reader.chunks), **out)
    elif target == "ofrecord":
        writer = _OFRecordSink(args.output, reader.streams, precision, args.parts or 1, **out)
    elif target in ("kvfile", "binfile"):
        from recordkit.formats.singa.deserializer import SingaRecordWriter
        writer = SingaRecordWriter(args.output, reader.streams, store=target, **out)
    elif target == "cbf":
        from recordkit.formats.cbf import CBFWriter, from_ctf
        if _keeps_alias(reader) and from_ctf.supports(reader, resolve_precision(precision)):
            return _ctf_to_cbf(args, reader, out)
        writer = CBFWriter(args.output, reader.streams, precision=precision,
                           chunk_size=args.output_chunk_size or args.chunk_size, **out)
    else:
        from recordkit.formats.ctf import CTFWriter
        writer = CTFWriter(args.output, [StreamSpec(s.name, s.format, s.dim, s.alias if _keeps_alias(reader) else None)
                                         for s in reader.streams], precision=precision, **out)
    t0 = time.perf_counter()
    total = sum(c.size for c in reader.chunks)
    # CTF pieces go to the writer unjoined (it takes sequences in order): one copy fewer
    chunks = (reader.iter_chunks(threads=2, whole=False) if reader.__class__.__name__ == "CTFReader"
              else reader.iter_chunks(threads=2))
    with reader, writer, byte_progress(total, "convert") as bar:
        for chunk in chunks:
            writer.write_chunk(chunk)
            bar.update(_chunk_bytes(reader, chunk))
    _report(args, reader, writer.sequences_written, time.perf_counter() - t0)
    return 0


BRIDGE_TARGETS = ("webdataset", "tfrecord", "mds")


def _bridge_writer(target, args, streams, precision, *, total, storage_options=None, checksums=False):
    """The WebDataset/TFRecord/MDS writer for ``--to`` (parts, shard size, checksums from the options)."""
    import importlib
    cls = {"webdataset": "WebDatasetWriter", "tfrecord": "TFRecordWriter", "mds": "MDSWriter"}[target]
    module = importlib.import_module(f"recordkit.formats.{target}")
    try:
        return getattr(module, cls)(args.output, streams, parts=args.parts, shard_size=args.shard_size, total=total,
                                    precision=precision, checksums=checksums, storage_options=storage_options)
    except (ValueError, FileExistsError, NotADirectoryError) as e:
        raise UsageError(str(e)) from None


def _records_to_bridge(args, target, out: dict) -> int:
    """OFRecord -> WebDataset/TFRecord without --stream: records converted feature by feature."""
    from recordkit.formats.records_bridge import convert_records
    t0 = time.perf_counter()
    n = convert_records(args.path, args.output, target, image_features=args.image_feature, parts=args.parts,
                        shard_size=args.shard_size, **out)
    seconds = time.perf_counter() - t0
    print(f"recordkit: converted {n} records feature by feature, {args.path} -> {args.output} ({seconds:.2f} s)",
          file=sys.stderr)
    return 0


def _report(args, reader, sequences: int, seconds: float) -> None:
    size = sum(c.size for c in reader.chunks)
    print(f"recordkit: converted {sequences} sequences, {args.path} -> {args.output} "
          f"({size / 1e6:.1f} MB in {seconds:.2f} s, {size / 1e6 / max(seconds, 1e-9):.1f} MB/s)", file=sys.stderr)
    report_tolerated(reader)


def _ctf_to_cbf(args, reader, out: dict) -> int:
    """CTF -> CBF parsing straight into CBF records: the same file as CTFReader -> CBFWriter, fewer copies."""
    from recordkit.formats.cbf import from_ctf
    t0 = time.perf_counter()
    total = sum(c.size for c in reader.chunks)
    with reader, byte_progress(total, "convert") as bar:
        written = from_ctf.convert(reader, args.output, chunk_size=args.output_chunk_size or args.chunk_size,
                                   threads=2, progress=bar.update, **out)
    _report(args, reader, written, time.perf_counter() - t0)
    return 0


class _OFRecordSink:
    """CBF/CTF-writer-like adapter: chunks in, one OFRecord record per sequence out."""

    def __init__(self, directory, streams, precision, parts, **storage):
        import numpy as np
        from recordkit.formats.ofrecord.writer import OFRecordWriter
        self.streams = streams
        self.dtype = np.float64 if precision == "double" else np.float32
        self.writer = OFRecordWriter(directory, parts, **storage)

    @property
    def sequences_written(self) -> int:
        return self.writer.records_written

    def write_chunk(self, chunk) -> None:
        from recordkit.formats.ofrecord.deserializer import chunk_records
        for rec in chunk_records(chunk, self.streams, dtype=self.dtype):
            self.writer.write(rec)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self.writer.__exit__(*exc)


def _chunk_bytes(reader, chunk) -> int:
    """Bytes of input behind a chunk or piece, for the progress bar."""
    info = reader.chunks[chunk.chunk_id]
    return info.size * len(chunk) // max(info.num_sequences, 1)


def _precision_of(reader) -> str:
    dtypes = {str(s.dtype) for s in reader.streams if s.dtype is not None}
    if dtypes == {"float64"}:
        return "double"
    return "double" if getattr(reader, "dtype", None) is not None and str(reader.dtype) == "float64" else "float"


def _keeps_alias(reader) -> bool:
    # CTF -> CTF keeps the file's short aliases; CBF has no aliases, its names become the CTF names
    # a WebDataset/TFRecord/MDS data set keeps the aliases of the CTF streams it came from
    return reader.__class__.__name__ == "CTFReader" or getattr(reader, "keeps_alias", False)


def run_ray(args) -> int:
    """``--engine ray``: the same conversion as Ray Data tasks; OUT is a directory of part files.

    Read tasks follow the input's chunks and each write task writes one part atomically
    (``recordkit.integrations.ray``); the parts read in name order hold the sequences a
    local conversion writes, in the same order.
    """
    try:
        import ray
        from recordkit.integrations import ray as rk_ray
    except ImportError:
        raise UsageError("--engine ray needs Ray Data: pip install 'recordkit[ray]'") from None
    from recordkit.formats.detect import by_extension, sniff
    target = args.to or by_extension(args.output) or "ofrecord"
    if target not in ("cbf", "ofrecord"):
        raise UsageError(f"--engine ray writes a directory of cbf or ofrecord parts, not {target} (use --to)")
    from recordkit.storage import location
    opts = args.storage_options
    storage = sources.storage(args)
    if location.isfile(args.output, opts):
        raise UsageError(f"{args.output}: exists and is not a directory (--engine ray writes part files into OUT)")
    kind = args.source_format or sniff(args.path, opts)
    if kind == "cbf":
        try:
            selection = [StreamSpec.parse(text) for text in args.stream] or None
        except ValueError as e:
            raise UsageError(str(e)) from None
        source = rk_ray.cbf_datasource(args.path, selection, precision=args.precision, **storage)
    elif kind == "ofrecord":
        streams = read_header_file(args.header) if args.header else sources.parse_streams(args)
        source = rk_ray.ofrecord_datasource(args.path, streams, precision=args.precision or "float", **storage)
    elif kind == "singa":
        source = rk_ray.singa_datasource(args.path, precision=args.precision or "float", storage_options=opts)
    elif kind == "ctf":
        streams = read_header_file(args.header) if args.header else sources.parse_streams(args)
        source = rk_ray.ctf_datasource(args.path, streams, precision=args.precision or "float",
                                       max_errors=args.max_errors, skip_sequence_ids=args.skip_sequence_ids,
                                       trace_level=args.trace_level, chunk_size=args.chunk_size,
                                       cache_index=args.cache_index, **storage)
    else:
        raise UsageError(f"--engine ray does not read {kind} input; convert it with the local engine")
    precision = args.precision or _precision_of(source)
    started = not ray.is_initialized()
    if started:
        ray.init(address=args.ray_address, include_dashboard=False, logging_level="WARNING")
    try:
        t0 = time.perf_counter()
        dataset = rk_ray.dataset_from(source, num_read_tasks=args.parts)
        sink = rk_ray.write_parts(dataset, args.output, source.streams, to=target, precision=precision,
                                  chunk_size=args.output_chunk_size or args.chunk_size, storage_options=opts,
                                  checksums=args.checksum)
        seconds = time.perf_counter() - t0
    finally:
        if started:
            ray.shutdown()
    print(f"recordkit: converted {sink.sequences_written} sequences, {args.path} -> {args.output} "
          f"({len(sink.paths)} {target} part file(s), {source.num_chunks} input chunk(s), {seconds:.2f} s, Ray)",
          file=sys.stderr)
    return 0
