"""Opening a data source from command-line arguments (shared by cat, stats, convert, ...).

CTF files need their streams declared (``--stream``); CBF files carry them in their
header, so there ``--stream NAME=FORMAT:DIM:ALIAS`` only selects and renames.
"""
from __future__ import annotations

import argparse

from recordkit.engine.streams import StreamSpec
from recordkit.errors import RecordkitError, UsageError


def add_ctf_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stream", action="append", default=[], metavar="NAME=FORMAT:DIM[:ALIAS]",
                   help="declare a stream, e.g. features=dense:784:F or labels=sparse:10 (repeatable)")
    p.add_argument("--max-errors", type=int, default=0, metavar="N",
                   help="tolerate N malformed inputs (each is reported and its sequence skipped)")
    p.add_argument("--skip-sequence-ids", action="store_true",
                   help="ignore sequence ids: every line is a sequence of its own")
    p.add_argument("--precision", choices=["float", "double"], default=None,
                   help="element type: float (float32; the CTF default) or double (float64); "
                        "CBF keeps the file's types unless this is given")
    p.add_argument("--defines-mb-size", metavar="NAME",
                   help="the stream whose sample count is the sequence length")
    p.add_argument("--chunk-size", type=int, default=32 << 20, metavar="BYTES",
                   help="index chunk size in bytes (default 32 MiB)")
    p.add_argument("--cache-index", action="store_true",
                   help="write the index beside the input and reuse it while it is newer than the input")
    p.add_argument("--trace-level", type=int, default=1, choices=[0, 1, 2],
                   help="0: errors only, 1: warnings too (default), 2: information too")
    add_storage_arguments(p)


def add_storage_arguments(p: argparse.ArgumentParser) -> None:
    """Remote inputs and outputs: any fsspec URL (s3://, gs://, memory://, ...)."""
    p.add_argument("--storage-options", type=_json_object, default=None, metavar="JSON",
                   help='fsspec options for URLs, e.g. \'{"client_kwargs": {"endpoint_url": "http://..."}}\'')
    p.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="keep the chunks (and index) of remote inputs in DIR and reuse them")


def _json_object(text: str) -> dict:
    import json
    try:
        value = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not JSON: {e}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def storage(args) -> dict:
    """The storage keyword arguments readers take, from the command line."""
    return dict(storage_options=getattr(args, "storage_options", None), cache_dir=getattr(args, "cache_dir", None))


def parse_streams(args) -> list[StreamSpec]:
    if not args.stream:
        raise SystemExit("recordkit: error: declare at least one --stream NAME=FORMAT:DIM[:ALIAS] for a CTF file")
    streams = []
    for text in args.stream:
        try:
            spec = StreamSpec.parse(text)
        except ValueError as e:
            raise SystemExit(f"recordkit: error: {e}")
        if spec.name == "key":
            raise SystemExit("recordkit: error: 'key' is reserved for the sequence key; choose another stream name")
        if args.defines_mb_size == spec.name:
            spec = StreamSpec(spec.name, spec.format, spec.dim, spec.alias, defines_mb_size=True)
        streams.append(spec)
    if args.defines_mb_size and not any(s.defines_mb_size for s in streams):
        raise SystemExit(f"recordkit: error: --defines-mb-size {args.defines_mb_size}: no such stream")
    return streams


def open_ctf(args, path=None, streams=None):
    from recordkit.formats.ctf import CTFReader
    return CTFReader(path or args.path, streams or parse_streams(args), precision=args.precision or "float",
                     max_errors=args.max_errors, skip_sequence_ids=args.skip_sequence_ids,
                     trace_level=args.trace_level, chunk_size=args.chunk_size, cache_index=args.cache_index,
                     **storage(args))


def open_cbf(args, path=None):
    from recordkit.formats.cbf import CBFReader
    selection = None
    if args.stream:
        selection = []
        for text in args.stream:
            try:
                selection.append(StreamSpec.parse(text))
            except ValueError as e:
                raise SystemExit(f"recordkit: error: {e}")
    try:
        return CBFReader(path or args.path, selection, precision=args.precision, **storage(args))
    except ValueError as e:
        if isinstance(e, RecordkitError):
            raise
        raise UsageError(str(e)) from None


def open_source(args, path=None):
    """A reader for ``path`` (default ``args.path``), its format sniffed from the content."""
    from recordkit.formats.detect import BRIDGE_FORMATS, sniff
    path = path or args.path
    kind = sniff(path, getattr(args, "storage_options", None))
    if kind == "cbf":
        return open_cbf(args, path)
    if kind in BRIDGE_FORMATS:
        return open_bridge(args, kind, path)
    return open_ctf(args, path)


def open_bridge(args, kind: str, path=None):
    """A WebDataset, TFRecord or MDS reader: streams from the data set's own description, or
    from ``--stream`` (which then names the member fields / feature lists / columns)."""
    import importlib
    cls = {"webdataset": "WebDatasetReader", "tfrecord": "TFRecordReader", "mds": "MDSReader"}[kind]
    module = importlib.import_module(f"recordkit.formats.{kind}")
    streams = None
    if getattr(args, "stream", None):
        streams = parse_streams(args)
    try:
        return getattr(module, cls)(path or args.path, streams, precision=getattr(args, "precision", None),
                                    **storage(args))
    except ValueError as e:
        if isinstance(e, RecordkitError):
            raise
        raise UsageError(str(e)) from None
