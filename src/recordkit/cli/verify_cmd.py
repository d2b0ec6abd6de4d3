"""``recordkit verify SRC DST`` and ``verify --manifest FILE DST``; ``convert --manifest FILE``.

Opens both sides as the engine's Deserializers (``recordkit.compose.verify`` compares them):
CBF files and SINGA record stores carry their streams; CTF files and OFRecord data sets take
them from ``--stream``/``--header``, or else from the other side (a conversion keeps stream
names, and a CBF -> CTF conversion writes them as the CTF names). A text side (CTF) is read at
the precision of the other side, because that is the precision its numbers were written at;
an OFRecord side at the precision its records hold (float_list or double_list).
"""
from __future__ import annotations

import sys
from recordkit.engine import DEFAULT_CHUNK_SIZE



def register(sub) -> None:
    from recordkit.cli import argtypes
    p = sub.add_parser("verify", help="prove a conversion lossless: compare every sequence of SRC and DST",
                       description="Compare every sequence of SRC and DST in storage order: keys (when both "
                                   "sides store keys), sample counts and values per stream, exactly (where DST "
                                   "holds float32 and SRC float64, SRC rounded to float32 first). Prints the "
                                   "first differences with their locations on both sides; exit status 1 when "
                                   "the data sets differ. With --manifest FILE (written by `convert --manifest`) "
                                   "only DST is read and compared with the manifest's keys, lengths and digests.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="SRC DST, or only DST with --manifest")
    p.add_argument("--manifest", metavar="FILE", help="compare DST with this manifest instead of a SRC")
    p.add_argument("--max-differences", type=argtypes.positive_int, default=10, metavar="N",
                   help="differences to print (all are counted; default 10)")
    p.add_argument("--keys", choices=["auto", "yes", "no"], default="auto",
                   help="match sequences by key: auto (when both sides store keys, else by position), yes, "
                        "no (by position only)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    from recordkit.cli.sources import add_stream_argument
    add_stream_argument(p)  # the streams of a side that does not declare them (default: those of the other side)
    p.add_argument("--header", metavar="FILE", help="streams from a ctf2bin header file")
    p.add_argument("--defines-mb-size", metavar="NAME", help="the stream whose sample count is the sequence length")
    p.add_argument("--precision", choices=["float", "double"], default=None,
                   help="read CTF sides at this precision (default: the other side's)")
    p.add_argument("--skip-sequence-ids", action="store_true", help="CTF: every line is a sequence")
    p.add_argument("--chunk-size", type=argtypes.size, default=DEFAULT_CHUNK_SIZE, metavar="BYTES", help="CTF index chunk size")
    from recordkit.cli.sources import add_storage_arguments
    add_storage_arguments(p)
    p.set_defaults(run=run)


def declared_streams(args):
    if getattr(args, "stream", None):
        from recordkit.cli.sources import parse_streams
        return parse_streams(args)
    if getattr(args, "header", None):
        from recordkit.cli.sources import read_header_file
        return read_header_file(args.header)
    return None


def _like(streams, aliases: bool = False):
    """Declarations for a side that has none, from the other side: same names, formats, dims
    (a conversion writes the names as CTF names / OFRecord feature names; the recorded aliases
    where the other side ``keeps_aliases``, as a conversion from it does)."""
    from recordkit.engine.streams import StreamSpec
    return [StreamSpec(s.name, s.format, s.dim, alias=s.alias if aliases else s.name,
                       defines_mb_size=s.defines_mb_size) for s in streams]


def _precision_of(d) -> str:
    """'double' when a side delivers any float64 values (per stream, or the reader's one precision)."""
    import numpy as np
    wide = any(s.dtype is not None and np.dtype(s.dtype) == np.float64 for s in d.streams)
    own = getattr(d, "dtype", None)
    return "double" if wide or (own is not None and np.dtype(own) == np.float64) else "float"


def _ofrecord_precision(path, streams, storage_options) -> str:
    """'double' when the first record holds a declared stream's values as double_list, else 'float'."""
    from recordkit.formats.ofrecord import codec
    from recordkit.formats.ofrecord.dataset import load_index, part_paths
    from recordkit.storage import open_source
    for part in part_paths(path, storage_options=storage_options):
        index = load_index(part, storage_options=storage_options)
        if not len(index):
            continue
        src = open_source(part, storage_options=storage_options)
        try:
            rec = codec.decode(src.pread(int(index.offsets[0]), int(index.lengths[0])), path=part,
                               offset=int(index.offsets[0]) - 8, index=0)
        finally:
            src.close()
        kinds = {rec[n].kind for s in streams for n in (s.alias if not s.is_sparse else s.alias + ":values",)
                 if n in rec}
        return "double" if "double_list" in kinds else "float"
    return "float"


def open_side(path, kind, args, streams=None, precision=None):
    """A Deserializer for one side, opened by its format's registry entry: ``streams`` for a side
    that does not describe its own (CTF, OFRecord) or a selection of one that does; ``precision``
    for a text side (CTF)."""
    from recordkit.cli.sources import storage
    from recordkit.errors import UsageError
    opts = getattr(args, "storage_options", None)
    fmt = _format_of(path, opts)
    if fmt.describes_streams:  # CBF, SINGA stores, Parquet, HF, Lance, WebDataset, TFRecord, MDS...: a selection by name
        return fmt.open_reader(path, _like(streams) if streams else None, **storage(args))
    if not streams:
        raise UsageError(f"{path}: {kind} needs stream declarations: give --stream NAME=FORMAT:DIM[:ALIAS] "
                         f"(or --header FILE)")
    if fmt.records == "features":  # records of named features: at the precision the records hold
        precision = _ofrecord_precision(path, streams, opts)
    return fmt.open_reader(path, streams, precision=precision or "float", skip_sequence_ids=args.skip_sequence_ids,
                           chunk_size=args.chunk_size, **storage(args))


def _format_of(path, storage_options):
    from recordkit.formats import registry
    from recordkit.formats.detect import sniff_format
    return registry.get(sniff_format(path, storage_options))


def open_pair(args, src_path, dst_path):
    """(src, dst) Deserializers: the self-described side first, the other one declared from it."""
    from recordkit.errors import UsageError
    from recordkit.formats.detect import sniff
    opts = getattr(args, "storage_options", None)
    kinds = [sniff(src_path, opts), sniff(dst_path, opts)]
    paths = [src_path, dst_path]
    declared = declared_streams(args)
    # the side that knows most about itself first: streams and dtypes (CBF, SINGA), then dtypes (OFRecord), then CTF
    formats = [_format_of(p, opts) for p in paths]
    described = [f.describes_streams for f in formats]
    recorded = [None if described[i] else formats[i].recorded_streams(paths[i], opts) for i in range(2)]
    # a side that may record its declarations (OFRecord) after those that describe theirs, before CTF
    order = sorted(range(2), key=lambda i: 0 if described[i] else 1 if formats[i].records_streams else 2)
    opened = [None, None]
    for i in order:
        other = opened[1 - i]
        streams = declared or recorded[i] or (_like(other.streams, getattr(other, "keeps_aliases", False))
                                              if other is not None else None)
        if streams is None and not described[i]:
            raise UsageError(f"neither {src_path} ({kinds[0]}) nor {dst_path} ({kinds[1]}) carries its streams: "
                             f"declare them with --stream NAME=FORMAT:DIM[:ALIAS] (or --header FILE)")
        precision = args.precision or (_precision_of(other) if other is not None else None)
        opened[i] = open_side(paths[i], kinds[i], args, streams, precision)
    return opened[0], opened[1]


def run(args) -> int:
    from recordkit.compose import verify as v
    from recordkit.errors import UsageError
    keys = {"auto": None, "yes": True, "no": False}[args.keys]
    if args.manifest:
        if len(args.paths) != 1:
            raise UsageError("with --manifest give only DST")
        from recordkit.formats.detect import sniff
        manifest = v.load_manifest(args.manifest, storage_options=args.storage_options)
        dst_path = args.paths[0]
        kind = sniff(dst_path, args.storage_options)
        dst = open_side(dst_path, kind, args, declared_streams(args) or _like(manifest.streams),
                        args.precision or manifest.precision)
        with dst:
            result = v.verify_manifest(manifest, dst, max_differences=args.max_differences, compare_keys=keys)
        names = (f"manifest {args.manifest} (of {manifest.meta.get('source')})", dst_path)
    else:
        if len(args.paths) != 2:
            raise UsageError("give SRC and DST (or --manifest FILE DST)")
        src, dst = open_pair(args, *args.paths)
        with src, dst:
            result = v.verify(src, dst, max_differences=args.max_differences, compare_keys=keys)
        names = tuple(args.paths)
    if args.json:
        import json
        print(json.dumps({"src": names[0], "dst": names[1], **result.to_dict()}))
    else:
        _print(result, names, args.max_differences)
    return 0 if result.equal else 1


def _print(result, names, max_differences) -> None:
    for d in result.differences:
        print(str(d))
    if result.differing > len(result.differences):
        print(f"... and {result.differing - len(result.differences)} more (--max-differences)")
    for note in result.notes:
        print(f"recordkit: note: {note}", file=sys.stderr)
    verdict = "identical" if result.equal else f"DIFFERENT ({result.differing} difference(s))"
    print(f"recordkit: {names[0]} vs {names[1]}: {result.sequences} sequences compared "
          f"(SRC {result.src_sequences}, DST {result.dst_sequences}), keys "
          f"{'compared' if result.keys_compared else 'not compared'}: {verdict}", file=sys.stderr)


# -- convert --manifest ------------------------------------------------------------------------------

def add_manifest_option(p) -> None:
    """``convert --manifest FILE``: after a successful conversion, the manifest of IN (at the output's
    precision) is written to FILE, so that ``verify --manifest FILE OUT`` can check OUT later, without IN."""
    p.add_argument("--manifest", metavar="FILE",
                   help="also write a per-sequence hash manifest of IN (key, lengths, value digests per stream) "
                        "to FILE, for `recordkit verify --manifest FILE OUT` later without IN")
    convert = p.get_default("run")
    p.set_defaults(run=lambda args: _convert_then_manifest(convert, args))


def _convert_then_manifest(convert, args) -> int:
    code = convert(args)
    if code or not getattr(args, "manifest", None):
        return code
    from recordkit.compose.verify import write_manifest
    reader, precision = _conversion_source(args)
    with reader:
        n = write_manifest(args.manifest, reader, precision=precision, source=str(args.path),
                           storage_options=args.storage_options)
    print(f"recordkit: manifest of {n} sequences ({precision} values) -> {args.manifest}", file=sys.stderr)
    return code


def _conversion_source(args):
    """IN opened as ``convert`` opens it (the library's reader choice), and the precision of what
    the conversion wrote (float32 where the target holds no float64)."""
    from recordkit.cli import sources
    from recordkit.compose import convert as conversion
    from recordkit.formats.detect import sniff_format
    opts = args.storage_options
    fmt = args.source_format or sniff_format(args.path, opts)
    reader = conversion.open_reader(
        args.path, source_format=fmt, streams=sources.streams_arg(args), precision=args.precision, storage_options=opts,
        cache_dir=args.cache_dir, max_errors=args.max_errors, skip_sequence_ids=args.skip_sequence_ids,
        trace_level=args.trace_level, chunk_size=args.chunk_size, cache_index=args.cache_index,
        csv_dim=args.csv_dim, csv_separator=args.csv_separator, csv_has_label=not args.csv_no_label,
        allow_empty_streams=sources.allowed_empty(args), allow_padding=sources.allowed_padding(args))
    target = conversion.resolve_target(args.output, args.to, opts)
    from recordkit.formats import registry
    narrows = not registry.get(target).float64
    precision = "float" if narrows else (args.precision or conversion.precision_of(reader))
    return reader, precision
