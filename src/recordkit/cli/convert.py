"""``recordkit convert IN OUT``: between CTF and CBF (either direction, or re-chunking)."""
from __future__ import annotations

import os
import sys
import time

from recordkit.cli import sources
from recordkit.cli.cat import report_tolerated
from recordkit.cli.progress import byte_progress
from recordkit.engine.streams import StreamSpec, resolve_precision
from recordkit.errors import FormatError


def register(sub) -> None:
    p = sub.add_parser("convert", help="convert between CTF, CBF and OFRecord",
                       description="Convert IN to OUT. Formats: IN by content, OUT by extension (.cbf/.bin, "
                                   ".ctf/.txt) or --to (ofrecord: OUT is a directory of part files). CTF and "
                                   "OFRecord input need their streams: --stream (for OFRecord the ALIAS is the "
                                   "feature name) or --header. See the README for the record <-> stream mapping.")
    p.add_argument("path", metavar="IN")
    p.add_argument("output", metavar="OUT")
    p.add_argument("--to", choices=["ctf", "cbf", "ofrecord", "kvfile", "binfile"],
                   help="output format (default: from OUT's extension); kvfile/binfile: SINGA record stores")
    p.add_argument("--parts", type=int, default=1, metavar="N", help="OFRecord output: number of part files")
    p.add_argument("--from", dest="source_format", choices=["csv"], default=None,
                   help="read IN as a SINGA CSV store (CSVInputLayer's format) instead of sniffing it")
    p.add_argument("--csv-dim", type=int, default=None, metavar="N", help="CSV input: values per line after the label")
    p.add_argument("--csv-separator", default=",", metavar="SEP", help="CSV input: field separator (default ',')")
    p.add_argument("--csv-no-label", action="store_true", help="CSV input: lines have no label column")
    p.add_argument("--header", metavar="FILE",
                   help="CNTK converter header file: one stream a line, 'name alias dense|sparse dim'")
    p.add_argument("--output-chunk-size", dest="output_chunk_size", type=int, default=None, metavar="BYTES",
                   help="CBF output chunk size (default: --chunk-size, 32 MiB)")
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
    from recordkit.formats.detect import by_extension, sniff
    target = args.to or by_extension(args.output)
    if target is None and os.path.isdir(args.output):
        target = "ofrecord"
    if target is None:
        raise SystemExit(f"recordkit: error: cannot tell the format of {args.output} from its extension: use --to")
    if os.path.isdir(args.output) and target is None:
        target = "ofrecord"
    if os.path.exists(args.output) and os.path.samefile(args.path, args.output):
        raise SystemExit("recordkit: error: IN and OUT are the same file")
    source_kind = "csv" if args.source_format == "csv" else sniff(args.path)
    if source_kind == "csv":
        if not args.csv_dim:
            raise SystemExit("recordkit: error: --from csv needs --csv-dim N (the values per line)")
        from recordkit.formats.singa.deserializer import SingaCSVDeserializer
        reader = SingaCSVDeserializer(args.path, args.csv_dim, separator=args.csv_separator,
                                      has_label=not args.csv_no_label, precision=args.precision or "float")
    elif source_kind == "singa":
        from recordkit.formats.singa.deserializer import SingaRecordDeserializer
        reader = SingaRecordDeserializer(args.path, precision=args.precision or "float")
    elif source_kind == "cbf":
        reader = sources.open_cbf(args)
    elif source_kind == "ofrecord":
        from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
        streams = read_header_file(args.header) if args.header else sources.parse_streams(args)
        reader = OFRecordDeserializer(args.path, streams, precision=args.precision or "float")
    else:
        streams = read_header_file(args.header) if args.header else None
        reader = sources.open_ctf(args, streams=streams)
    precision = args.precision or _precision_of(reader)
    if target == "ofrecord":
        writer = _OFRecordSink(args.output, reader.streams, precision, args.parts)
    elif target in ("kvfile", "binfile"):
        from recordkit.formats.singa.deserializer import SingaRecordWriter
        writer = SingaRecordWriter(args.output, reader.streams, store=target)
    elif target == "cbf":
        from recordkit.formats.cbf import CBFWriter, from_ctf
        if _keeps_alias(reader) and from_ctf.supports(reader, resolve_precision(precision)):
            return _ctf_to_cbf(args, reader)
        writer = CBFWriter(args.output, reader.streams, precision=precision,
                           chunk_size=args.output_chunk_size or args.chunk_size)
    else:
        from recordkit.formats.ctf import CTFWriter
        writer = CTFWriter(args.output, [StreamSpec(s.name, s.format, s.dim, s.alias if _keeps_alias(reader) else None)
                                         for s in reader.streams], precision=precision)
    t0 = time.perf_counter()
    total = sum(c.size for c in reader.chunks)
    # CTF pieces go to the writer unjoined (it takes sequences in order): one copy fewer
    chunks = reader.iter_chunks(threads=2, whole=False) if _keeps_alias(reader) else reader.iter_chunks(threads=2)
    with reader, writer, byte_progress(total, "convert") as bar:
        for chunk in chunks:
            writer.write_chunk(chunk)
            bar.update(_chunk_bytes(reader, chunk))
    _report(args, reader, writer.sequences_written, time.perf_counter() - t0)
    return 0


def _report(args, reader, sequences: int, seconds: float) -> None:
    size = os.path.getsize(args.path)
    if os.path.isdir(args.path):
        size = sum(os.path.getsize(p) for p in getattr(reader, "paths", []))
    print(f"recordkit: converted {sequences} sequences, {args.path} -> {args.output} "
          f"({size / 1e6:.1f} MB in {seconds:.2f} s, {size / 1e6 / max(seconds, 1e-9):.1f} MB/s)", file=sys.stderr)
    report_tolerated(reader)


def _ctf_to_cbf(args, reader) -> int:
    """CTF -> CBF parsing straight into CBF records: the same file as CTFReader -> CBFWriter, fewer copies."""
    from recordkit.formats.cbf import from_ctf
    t0 = time.perf_counter()
    total = sum(c.size for c in reader.chunks)
    with reader, byte_progress(total, "convert") as bar:
        written = from_ctf.convert(reader, args.output, chunk_size=args.output_chunk_size or args.chunk_size,
                                   threads=2, progress=bar.update)
    _report(args, reader, written, time.perf_counter() - t0)
    return 0


class _OFRecordSink:
    """CBF/CTF-writer-like adapter: chunks in, one OFRecord record per sequence out."""

    def __init__(self, directory, streams, precision, parts):
        import numpy as np
        from recordkit.formats.ofrecord.writer import OFRecordWriter
        self.streams = streams
        self.dtype = np.float64 if precision == "double" else np.float32
        self.writer = OFRecordWriter(directory, parts)

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
    return reader.__class__.__name__ == "CTFReader"
