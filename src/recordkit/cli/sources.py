"""Opening a data source from command-line arguments (shared by cat, stats, convert, ...).

CTF files need their streams declared (``--stream``); CBF files carry them in their
header, so there ``--stream NAME=FORMAT:DIM:ALIAS`` only selects and renames.
"""
from __future__ import annotations

import argparse

from recordkit.engine.streams import StreamSpec, check_streams
from recordkit.errors import FormatError, RecordkitError, UsageError
from recordkit.engine import DEFAULT_CHUNK_SIZE


STREAM_HELP = ("declare a stream, e.g. features=dense:784:F or labels=sparse:10 (repeatable): needed where the data "
               "does not declare its streams (CTF text), a selection (and renaming) where it does")


def add_stream_argument(p: argparse.ArgumentParser) -> None:
    """``--stream NAME=FORMAT:DIM[:ALIAS]``, the same in every command that reads a data set."""
    from recordkit.cli import argtypes
    p.add_argument("--stream", action="append", default=[], type=argtypes.stream, metavar="NAME=FORMAT:DIM[:ALIAS]",
                   help=STREAM_HELP)


def add_ctf_arguments(p: argparse.ArgumentParser) -> None:
    from recordkit.cli import argtypes
    add_stream_argument(p)
    p.add_argument("--max-errors", type=argtypes.non_negative_int, default=0, metavar="N",
                   help="tolerate N malformed inputs (each is reported and its sequence skipped)")
    p.add_argument("--skip-sequence-ids", action="store_true",
                   help="ignore sequence ids: every line is a sequence of its own")
    p.add_argument("--precision", choices=["float", "double"], default=None,
                   help="element type: float (float32; the CTF default) or double (float64); "
                        "CBF keeps the file's types unless this is given")
    p.add_argument("--defines-mb-size", metavar="NAME", type=argtypes.non_empty,
                   help="the stream whose sample count is the sequence length")
    p.add_argument("--chunk-size", type=argtypes.size, default=DEFAULT_CHUNK_SIZE, metavar="BYTES",
                   help="index chunk size in bytes, e.g. 65536, 64K, 32M (default 32M)")
    p.add_argument("--cache-index", action="store_true",
                   help="write the index beside the input and reuse it while it is newer than the input")
    p.add_argument("--allow-empty-stream", action="append", default=[], metavar="NAME", dest="allow_empty_stream",
                   help="a declared stream NAME (or alias) may have no sample in the whole input (repeatable); "
                        "otherwise that is an error at the end (exit 1): usually a mistyped alias")
    p.add_argument("--allow-padding", action="append", default=[], metavar="NAME", dest="allow_padding",
                   help="the dense stream NAME (or alias) may have no sample as wide as its declared dim, every "
                        "sample zero padded (repeatable); otherwise that is an error at the end (exit 1): "
                        "usually a wrong dim")
    p.add_argument("--trace-level", type=int, default=1, choices=[0, 1, 2],
                   help="0: errors only (tolerated errors counted, not listed); 1: warnings too (default); "
                        "2: information too (each chunk loaded: sequences, samples, bytes)")
    add_storage_arguments(p)
    p.set_defaults(check=argtypes.check_streams)


def add_storage_arguments(p: argparse.ArgumentParser) -> None:
    """Remote inputs and outputs: any fsspec URL (s3://, gs://, memory://, ...)."""
    from recordkit.cli import argtypes
    p.add_argument("--storage-options", type=argtypes.json_object, default=None, metavar="JSON",
                   help='fsspec options for URLs, e.g. \'{"client_kwargs": {"endpoint_url": "http://..."}}\'')
    p.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="keep the chunks (and index) of remote inputs in DIR and reuse them")
    p.add_argument("--cache-limit", default=None, metavar="SIZE",
                   help="keep the --cache-dir within SIZE (e.g. 20GB): least recently used ranges that can be "
                        "fetched again are evicted")
    p.add_argument("--offline", action="store_true",
                   help="read remote inputs from the --cache-dir only, without contacting the store (a range "
                        "not in the cache is an error naming it)")


def settle_cache(args) -> None:
    """``--cache-limit`` and ``--offline`` folded into ``args.cache_dir`` (a ``CacheDir``), which every
    command passes to its readers as it is."""
    if not hasattr(args, "cache_dir"):
        return
    from recordkit.storage.range_cache import cache_dir_of
    args.cache_dir = cache_dir_of(args.cache_dir, cache_limit=getattr(args, "cache_limit", None),
                                  offline=getattr(args, "offline", False))


def storage(args) -> dict:
    """The storage keyword arguments readers take, from the command line."""
    return dict(storage_options=getattr(args, "storage_options", None), cache_dir=getattr(args, "cache_dir", None))


def allowed_empty(args) -> list[str]:
    """``--allow-empty-stream`` names: declared streams that may have no sample in the whole input."""
    return list(getattr(args, "allow_empty_stream", None) or [])


def allowed_padding(args) -> list[str]:
    """``--allow-padding`` names: dense streams whose declared dim no sample may reach."""
    return list(getattr(args, "allow_padding", None) or [])


def parse_streams(args) -> list[StreamSpec]:
    if not args.stream:
        from recordkit.formats import registry
        from recordkit.formats.detect import streams_needed
        path = getattr(args, "path", None) or ", ".join(map(str, getattr(args, "paths", [])))
        raise UsageError(streams_needed(path, registry.get("ctf"), getattr(args, "storage_options", None)))
    streams = []
    for text in args.stream:
        try:
            spec = StreamSpec.parse(text)
        except ValueError as e:
            raise UsageError(str(e)) from None
        if spec.name == "key":
            raise UsageError("'key' is reserved for the sequence key; choose another stream name")
        if args.defines_mb_size == spec.name:
            spec = StreamSpec(spec.name, spec.format, spec.dim, spec.alias, defines_mb_size=True)
        streams.append(spec)
    if args.defines_mb_size and not any(s.defines_mb_size for s in streams):
        raise UsageError(f"--defines-mb-size {args.defines_mb_size}: no such stream")
    try:
        return check_streams(streams)
    except ValueError as e:  # names or aliases given twice
        raise UsageError(str(e)) from None


def _selection(args):
    """--stream texts as a selection of a self-describing data set's streams (None: all)."""
    selection = None
    if getattr(args, "stream", None):
        selection = []
        for text in args.stream:
            try:
                selection.append(StreamSpec.parse(text))
            except ValueError as e:
                raise UsageError(str(e)) from None
    return selection


def read_header_file(path: str) -> list[StreamSpec]:
    """Streams from a ctf2bin header file: ``name alias dense|sparse dim`` per line."""
    import io
    from recordkit.storage.location import open_local
    streams = []
    with io.TextIOWrapper(open_local(path)) as f:  # a FIFO is refused, never opened
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


def streams_arg(args):
    """The input's streams from --header or --stream (None when neither is given)."""
    if args.header:
        return read_header_file(args.header)
    return parse_streams(args) if args.stream else None


def reader_options(args) -> dict:
    """The reader options a command line gives; each format's reader factory takes those it names
    (``registry._call``)."""
    return dict(precision=getattr(args, "precision", None), max_errors=getattr(args, "max_errors", 0),
                skip_sequence_ids=getattr(args, "skip_sequence_ids", False),
                trace_level=getattr(args, "trace_level", None),
                chunk_size=getattr(args, "chunk_size", None) or DEFAULT_CHUNK_SIZE,
                cache_index=getattr(args, "cache_index", False), allow_empty_streams=allowed_empty(args),
                allow_padding=allowed_padding(args), **storage(args))


def open_reader(args, path=None):
    """A reader for ``path`` (default ``args.path``), its format sniffed from the content and opened
    by the registry: --stream declares the streams of a format whose data does not (CTF text), and
    selects and renames the streams of one that does (CBF, OFRecord written by recordkit, Parquet...)."""
    from recordkit.storage.probe import reusing
    path = path or args.path
    with reusing(path, getattr(args, "storage_options", None), getattr(args, "cache_dir", None)):
        return _open_reader(args, path)  # a URL: one look, for detection and the open


def _open_reader(args, path):
    from recordkit.formats import registry
    from recordkit.formats.detect import sniff_format
    fmt = registry.get(sniff_format(path, getattr(args, "storage_options", None),
                                    part_name_prefix=getattr(args, "part_name_prefix", None),
                                    cache_dir=getattr(args, "cache_dir", None)))
    if fmt.needs_streams and not getattr(args, "stream", None):
        from recordkit.formats.detect import streams_needed
        raise UsageError(streams_needed(path, fmt, getattr(args, "storage_options", None)))
    streams = parse_streams(args) if getattr(args, "stream", None) else None
    try:
        reader = fmt.open_reader(path, streams, **reader_options(args))
    except ValueError as e:
        if isinstance(e, RecordkitError):
            raise
        raise UsageError(str(e)) from None
    wanted = getattr(args, "defines_mb_size", None)
    if wanted is not None and wanted not in {s.name for s in reader.streams}:
        reader.close()
        raise UsageError(f"--defines-mb-size {wanted}: no such stream in {path} "
                         f"(it has: {', '.join(s.name for s in reader.streams)})")
    return reader


def add_part_arguments(p) -> None:
    """OneFlow's ``OFRecordDataset`` part naming: which files of a directory are the data set."""
    from recordkit.cli import argtypes
    p.add_argument("--data-part-num", type=argtypes.positive_int, default=None, metavar="N",
                   help="OFRecord directory: read exactly parts 0..N-1 (default: every PREFIX<digits> file of "
                        "the directory)")
    p.add_argument("--part-name-prefix", default="part-", metavar="PREFIX",
                   help="OFRecord directory: the part files' name before the number (default 'part-')")
    p.add_argument("--part-name-suffix-length", type=argtypes.suffix_length, default=-1, metavar="K",
                   help="OFRecord directory: digits of the part number, zero padded (-1: no padding, the "
                        "default), as OneFlow")


def ofrecord_parts(args) -> list[str]:
    """The part files of the OFRecord data set ``args.path`` that the part-selection options name."""
    from recordkit.formats.ofrecord.dataset import part_paths
    return part_paths(args.path, getattr(args, "data_part_num", None), getattr(args, "part_name_prefix", "part-"),
                      getattr(args, "part_name_suffix_length", -1),
                      storage_options=getattr(args, "storage_options", None))
