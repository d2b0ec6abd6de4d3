"""``recordkit convert IN OUT``: argument parsing and the report; the conversion itself is the
library's ``recordkit.convert`` (``compose/convert.py``), which reads the format registry."""
from __future__ import annotations

import argparse
import sys
import time

from recordkit.cli import sources
from recordkit.cli.cat import report_tolerated
from recordkit.cli.progress import byte_progress
from recordkit.errors import UsageError


def register(sub) -> None:
    from recordkit.cli import argtypes
    from recordkit.formats import registry
    p = sub.add_parser("convert", help="convert between formats (CTF, CBF, OFRecord, SINGA stores, CSV, Parquet, Hugging Face, ...)",
                       description="Convert IN to OUT. Formats: IN by content, OUT by extension (.cbf/.bin, "
                                   ".ctf/.txt, .parquet) or --to (ofrecord, hf: OUT is a directory). CTF input "
                                   "needs its streams: --stream or --header. OFRecord input: the streams the data "
                                   "set records (_recordkit_streams.json, written by this command), else --stream "
                                   "(the ALIAS is the feature name). See the README for the format table and the "
                                   "record <-> stream mapping.")
    p.add_argument("path", metavar="IN", help="the input: any format of the README's table (sniffed), or (--from csv) CSV")
    p.add_argument("output", metavar="OUT", help="the output file, or directory for OFRecord, HF and --engine ray")
    p.add_argument("--to", choices=registry.writable(),
                   help="output format (default: from OUT's extension); kvfile/binfile: SINGA record stores; "
                        "see the README's format table")
    p.add_argument("--parts", type=argtypes.positive_int, default=None, metavar="N",
                   help="OFRecord/Parquet/HF output: number of part files (default 1; OFRecord split as --part-order "
                        "says); with --engine ray: at most N part files, each a run of consecutive input chunks "
                        "(default: one per input chunk)")
    p.add_argument("--part-order", choices=["contiguous", "round-robin"], default="contiguous",
                   help="OFRecord output with --parts N: contiguous (default): part i holds the i-th run of "
                        "sequences, so reading the parts in name order gives file order (as reshard does); "
                        "round-robin: sequence k goes to part k mod N (reading back gives 0, N, 2N, ...)")
    p.add_argument("--shard-size", dest="shard_size", type=argtypes.size, default=None, metavar="BYTES",
                   help="directory output (webdataset/tfrecord/mds/parquet/hf): start a new part after this many bytes "
                        "(default 256 MiB; mds 64 MiB)")
    p.add_argument("--image-feature", dest="image_feature", action="append", default=[], metavar="NAME",
                   help="OFRecord input to webdataset/tfrecord/lance/mds without stream declarations: the bytes "
                        "feature NAME holds encoded JPEG/PNG images, copied unchanged (WebDataset members KEY.jpg / "
                        "KEY.png; MDS jpeg / png columns)")
    p.add_argument("--from", dest="source_format", choices=["csv"], default=None,
                   help="read IN as a SINGA CSV store (CSVInputLayer's format) instead of sniffing it")
    p.add_argument("--csv-dim", type=argtypes.positive_int, default=None, metavar="N",
                   help="CSV input: values per line after the label")
    p.add_argument("--csv-separator", type=argtypes.non_empty, default=",", metavar="SEP",
                   help="CSV input: field separator (default ',')")
    p.add_argument("--csv-no-label", action="store_true", help="CSV input: lines have no label column")
    p.add_argument("--header", metavar="FILE",
                   help="CNTK converter header file: one stream a line, 'name alias dense|sparse dim'")
    p.add_argument("--checksum", action="store_true",
                   help="also write a NAME.rkcrc checksum sidecar beside every output file (verified on read)")
    p.add_argument("--output-chunk-size", dest="output_chunk_size", type=argtypes.size, default=None,
                   metavar="BYTES", help="CBF output chunk size, e.g. 65536, 64K, 32M (default: --chunk-size, 32M)")
    p.add_argument("--engine", choices=["local", "ray"], default="local",
                   help="local: this process (default); ray: a Ray cluster, one read task per input chunk, "
                        "OUT a directory of part files (cbf, ofrecord or parquet) or one webdataset, tfrecord, "
                        "mds or hf data set (a set per write task, joined)")
    p.add_argument("--ray-address", metavar="ADDRESS", default=None,
                   help="with --engine ray: the cluster to join (default: start a local one)")
    p.add_argument("--content-defined-chunking", action=argparse.BooleanOptionalAction, default=None,
                   help="Parquet output: cut data pages by content (pyarrow >= 21), so a data set that changes a "
                        "little keeps most pages byte for byte (deduplicated uploads to the Hugging Face Hub); "
                        "default on for hf:// outputs where pyarrow supports it")
    p.add_argument("--tfrecord-kind", dest="tfrecord_kind", choices=["auto", "example", "sequence"], default=None,
                   help="TFRecord output: one tf.train.Example per sequence (sequences of one sample) or one "
                        "tf.train.SequenceExample; auto (default): Examples when the first chunk's sequences are "
                        "all one sample")
    p.add_argument("--allow-densify", action="store_true",
                   help="convert even when the output is estimated above 10x the input (e.g. sparse streams "
                        "written dense into a format without sparse data)")
    sources.add_ctf_arguments(p)
    p.set_defaults(run=run, check=check_arguments)
    from recordkit.cli.verify_cmd import add_manifest_option
    add_manifest_option(p)  # --manifest FILE: the manifest of IN, written after a successful conversion


def check_arguments(parser, args) -> None:
    """Cross-argument checks, while parsing (one line, exit 2): options that need another."""
    from recordkit.cli import argtypes
    argtypes.check_streams(parser, args)
    if args.source_format is not None and not args.csv_dim:  # --from names the one undetected format, CSV
        parser.error(f"argument --from: {args.source_format} needs --csv-dim N (the values per line)")
    if args.ray_address is not None and args.engine != "ray":
        parser.error("argument --ray-address: only with --engine ray")
    if args.content_defined_chunking is not None and args.engine == "ray":
        parser.error("argument --content-defined-chunking: only with the local engine")


def run(args) -> int:
    if getattr(args, "engine", "local") == "ray":
        return run_ray(args)
    from recordkit.compose import convert as conversion
    opts = args.storage_options
    try:
        target = conversion.resolve_target(args.output, args.to, opts)
    except UsageError:
        raise
    from recordkit.formats import registry
    from recordkit.formats.detect import sniff_format
    source_format = args.source_format or sniff_format(args.path, opts)
    streams = sources.streams_arg(args)
    from recordkit.formats.records_bridge import RECORD_TARGETS, converts_members
    if (target in registry.shard_formats() or target in RECORD_TARGETS) \
            and registry.get(source_format).records == "features" and streams is None and _records_as_records(args):
        return _records_to_bridge(args, target, dict(storage_options=opts, checksums=args.checksum))
    if streams is None and converts_members(source_format, target, args.path, opts):
        return _records_to_bridge(args, target, dict(storage_options=opts, checksums=args.checksum), samples=True)
    if streams is None and registry.get(source_format).needs_streams and not args.source_format:
        sources.parse_streams(args)  # "declare at least one --stream ..."
    with byte_progress(_input_size(args.path, opts), "convert") as bar:
        result = conversion.convert(
            args.path, args.output, target, streams, source_format=source_format, precision=args.precision,
            parts=args.parts, shard_size=args.shard_size, chunk_size=args.chunk_size, output_chunk_size=args.output_chunk_size,
            checksums=args.checksum, storage_options=opts, cache_dir=args.cache_dir,
            allow_densify=getattr(args, "allow_densify", False), progress=bar.update,
            max_errors=args.max_errors, skip_sequence_ids=args.skip_sequence_ids, trace_level=args.trace_level,
            cache_index=args.cache_index, csv_dim=args.csv_dim, csv_separator=args.csv_separator,
            csv_has_label=not args.csv_no_label, part_order=args.part_order,
            allow_empty_streams=sources.allowed_empty(args), allow_padding=sources.allowed_padding(args),
            writer_options=_writer_options(args))
    _report(args, result)
    return 0


def _writer_options(args) -> dict:
    """The output format's options given on the command line (only those given)."""
    given = {"content_defined_chunking": getattr(args, "content_defined_chunking", None),
             "tfrecord_kind": getattr(args, "tfrecord_kind", None)}
    return {k: v for k, v in given.items() if v is not None}


def _input_size(path, storage_options) -> int:
    """The input's bytes, for the progress bar (a directory: its files together)."""
    from recordkit.storage import location
    try:
        fs, target = location.filesystem(path, storage_options)
        return int(fs.du(target)) if fs.isdir(target) else int(fs.size(target))
    except Exception:  # noqa: BLE001 - only the bar's total
        return 0


def _report(args, result) -> None:
    print(f"recordkit: converted {result.sequences} sequences, {args.path} -> {args.output} "
          f"({result.input_bytes / 1e6:.1f} MB in {result.seconds:.2f} s, {result.mb_per_second:.1f} MB/s)",
          file=sys.stderr)
    report_tolerated(result.reader)
    for note in result.notes:
        print(f"recordkit: note: {note}", file=sys.stderr)





def _records_to_bridge(args, target, out: dict, samples: bool = False) -> int:
    """OFRecord -> WebDataset/TFRecord/Lance/MDS without stream declarations: records converted feature by
    feature; ``samples``: WebDataset samples with images or other bytes -> MDS, member by member."""
    from recordkit.formats.records_bridge import convert_records, convert_samples
    given = [f"--{o.replace('_', '-')}" for o in _writer_options(args)] + (
        ["--image-feature"] if samples and args.image_feature else [])
    noun, how = ("samples", "member by member") if samples else ("records", "feature by feature")
    if given:
        raise UsageError(f"{', '.join(given)}: {noun} converted {how} to {target} have no such option")
    t0 = time.perf_counter()
    if samples:
        n = convert_samples(args.path, args.output, target, parts=args.parts, shard_size=args.shard_size, **out)
    else:
        n = convert_records(args.path, args.output, target, image_features=args.image_feature, parts=args.parts,
                            shard_size=args.shard_size, **out)
    seconds = time.perf_counter() - t0
    print(f"recordkit: converted {n} {noun} {how}, {args.path} -> {args.output} ({seconds:.2f} s)", file=sys.stderr)
    return 0


def _records_as_records(args) -> bool:
    """OFRecord records go feature by feature (not as streams) when the data set records no stream
    declarations (OneFlow's own sets) or images are named."""
    if args.image_feature:
        return True
    from recordkit.formats.ofrecord.dataset import read_streams
    return read_streams(args.path, storage_options=args.storage_options) is None


def rk_ray_sets() -> tuple:
    """The directory formats ``--engine ray`` writes as one joined data set."""
    from recordkit.integrations.ray.convert import SET_FORMATS
    return SET_FORMATS


def run_ray(args) -> int:
    """``--engine ray``: the same conversion as Ray Data tasks; OUT is a directory of part files.

    Read tasks follow the input's chunks and each write task writes one part atomically
    (``recordkit.integrations.ray``); the parts read in name order hold the sequences a
    local conversion writes, in the same order.
    """
    if args.part_order != "contiguous":
        raise UsageError("--engine ray writes each part from a run of consecutive input chunks: "
                         "--part-order round-robin needs the local engine")
    try:
        import ray
        from recordkit.integrations import ray as rk_ray
    except ImportError:
        raise UsageError("--engine ray needs Ray Data: pip install 'recordkit[ray]'") from None
    from recordkit.compose.convert import precision_of as _precision_of
    from recordkit.formats.detect import by_extension
    from recordkit.formats import registry
    target = args.to or by_extension(args.output) or "ofrecord"
    if target not in registry.ray_targets():
        raise UsageError(f"--engine ray writes a directory of {', '.join(registry.ray_targets('parts'))} or "
                         f"{', '.join(registry.ray_targets('native'))} parts, or a {', '.join(rk_ray_sets())} data "
                         f"set, not {target} (use --to)")
    from recordkit.storage import location
    opts = args.storage_options
    if location.isfile(args.output, opts):
        raise UsageError(f"{args.output}: exists and is not a directory (--engine ray writes part files into OUT)")
    if args.header:
        streams = sources.read_header_file(args.header)
    else:
        streams = sources.parse_streams(args) if args.stream else None
    source = rk_ray.datasource_for(args.path, source_format=args.source_format, streams=streams,
                                   precision=args.precision, storage_options=opts, cache_dir=args.cache_dir,
                                   allow_empty_streams=sources.allowed_empty(args),
                                   allow_padding=sources.allowed_padding(args), max_errors=args.max_errors,
                                   skip_sequence_ids=args.skip_sequence_ids, trace_level=args.trace_level,
                                   chunk_size=args.chunk_size, cache_index=args.cache_index)
    held = [s.name for s in source.streams if s.is_bytes]
    if held:  # Ray's blocks carry numeric columns (integrations/ray/_arrow.py)
        raise UsageError(f"--engine ray converts numeric streams, not bytes stream '{held[0]}': convert it with "
                         f"the local engine, or select the numeric streams with --stream")
    precision = args.precision or _precision_of(source)
    from recordkit.integrations.ray import _quiet
    started = not ray.is_initialized()
    if started:  # below trace level 2, Ray's logs stay in its session directory (integrations/ray/_quiet.py)
        ray.init(address=args.ray_address, include_dashboard=False, **_quiet.init_options(args.trace_level))
    try:
        t0 = time.perf_counter()
        with _quiet.quiet(args.trace_level):
            dataset = rk_ray.dataset_from(source, num_read_tasks=args.parts)
            if registry.get(target).ray == "native":  # Ray Data's own Parquet writer over the mapping's columns
                from recordkit.integrations.ray.parquet import write_parquet
                paths, written = write_parquet(dataset, args.output, source.streams, precision=precision,
                                               storage_options=opts, checksums=args.checksum)
                sink = argparse.Namespace(paths=paths, sequences_written="?" if written is None else written)
            else:
                sink = rk_ray.write_parts(dataset, args.output, source.streams, to=target, precision=precision,
                                          chunk_size=args.output_chunk_size or args.chunk_size, storage_options=opts,
                                          checksums=args.checksum, shard_size=getattr(args, "shard_size", None))
        seconds = time.perf_counter() - t0
    finally:
        if started:
            ray.shutdown()
    print(f"recordkit: converted {sink.sequences_written} sequences, {args.path} -> {args.output} "
          f"({len(sink.paths)} {target} part file(s), {source.num_chunks} input chunk(s), {seconds:.2f} s, Ray)",
          file=sys.stderr)
    return 0
