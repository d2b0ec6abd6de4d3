"""``recordkit validate PATH...``: read every byte of a data set and report every problem, located.

A thin layer over ``recordkit.formats.validate``: the format comes from the content (or
``--format``), each format's options are passed through, each problem is printed as it is
found (``file:line:column: what`` for text, ``file: byte offset N, record K: what`` for binary),
then a summary by kind on stderr. Exit status 1 when there was any error (``--strict``: any
warning too), 0 otherwise.
"""
from __future__ import annotations

import sys
from recordkit.engine import DEFAULT_CHUNK_SIZE

WARNINGS_SHOWN_PER_KIND = 20  # beyond this a kind of warning is counted, not printed (--all-warnings shows all)


def register(sub) -> None:
    from recordkit.cli import argtypes
    from recordkit.formats.validate import VALIDATORS
    p = sub.add_parser("validate", help="check every record of a data set (any format) and report every problem",
                       description="Read every file completely and report every problem with its location: "
                                   "FILE:LINE:COLUMN for CTF and CSV text, FILE: byte offset N, record/chunk/tuple K "
                                   "for binary formats; then a summary by kind (stderr). Exit status 1 when any "
                                   "error was found. A CTF file is checked against its stream declarations "
                                   "(--stream or --header); CBF, OFRecord and SINGA stores need none. Files "
                                   "with a .rkcrc checksum sidecar are checked against it too.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or directories (an OFRecord data set) to check")
    p.add_argument("--format", choices=sorted(VALIDATORS), default=None,
                   help="the format of every PATH (default: recognised from the content)")
    p.add_argument("--max-errors", type=argtypes.positive_int, default=None, metavar="N",
                   help="stop after N errors (default: check everything)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: problems, counts by kind, what was checked")
    p.add_argument("--strict", action="store_true", help="warnings fail the check too (exit status 1)")
    p.add_argument("--all-warnings", action="store_true",
                   help=f"print every warning (default: the first {WARNINGS_SHOWN_PER_KIND} of each kind; all are "
                        f"counted)")
    g = p.add_argument_group("CTF")
    g.add_argument("--stream", action="append", default=[], metavar="NAME=FORMAT:DIM[:ALIAS]",
                   help="declare a stream, e.g. features=dense:784:F (repeatable)")
    g.add_argument("--header", metavar="FILE", help="streams from a ctf2bin header file ('name alias dense|sparse dim')")
    g.add_argument("--skip-sequence-ids", action="store_true", help="ignore sequence ids: every line is a sequence")
    g.add_argument("--defines-mb-size", metavar="NAME", help="the stream whose sample count is the sequence length")
    g.add_argument("--precision", choices=["float", "double"], default="float",
                   help="parse values as float32 (default) or float64 (an overflow is checked at that precision)")
    g.add_argument("--chunk-size", type=argtypes.size, default=DEFAULT_CHUNK_SIZE, metavar="BYTES", help="index chunk size (32 MiB)")
    g = p.add_argument_group("OFRecord")
    g.add_argument("--data-part-num", type=argtypes.positive_int, default=None, metavar="N",
                   help="check exactly parts 0..N-1 (default: every PREFIX<digits> file of the directory)")
    g.add_argument("--part-name-prefix", type=argtypes.non_empty, default="part-", metavar="PREFIX",
                   help="OFRecord: part file names start with PREFIX, then the part number (default part-)")
    g.add_argument("--part-name-suffix-length", type=argtypes.suffix_length, default=-1, metavar="K",
                   help="digits of the part number, zero padded (-1: no padding), as OneFlow")
    g = p.add_argument_group("SINGA stores")
    g.add_argument("--store", choices=["kvfile", "binfile", "textfile", "csv"], default=None,
                   help="the store kind (default: sniffed); csv: a CSVInputLayer text file (needs --csv-dim)")
    g.add_argument("--records", choices=["auto", "yes", "no"], default="auto",
                   help="check the values as SINGA records (auto: when the first value is one)")
    g.add_argument("--csv-dim", type=argtypes.positive_int, default=None, metavar="N", help="CSV: values per line after the label")
    g.add_argument("--csv-separator", type=argtypes.non_empty, default=",", metavar="SEP",
                   help="CSV: field separator (default ',')")
    g.add_argument("--csv-no-label", action="store_true", help="CSV: lines have no label column")
    from recordkit.cli.sources import add_storage_arguments
    add_storage_arguments(p)
    p.set_defaults(run=run)


def _streams(args):
    if args.stream:
        from recordkit.cli.sources import parse_streams
        return parse_streams(args)
    if args.header:
        from recordkit.cli.sources import read_header_file
        return read_header_file(args.header)
    return None


def options(args) -> dict:
    """The validators' keyword options from the command line (each format takes what it knows)."""
    store = args.store
    fmt = args.format
    if fmt is None and store is not None:
        fmt = "singa"
    return dict(format=fmt, streams=_streams(args), skip_sequence_ids=args.skip_sequence_ids,
                chunk_size=args.chunk_size, precision=args.precision, data_part_num=args.data_part_num,
                part_name_prefix=args.part_name_prefix, part_name_suffix_length=args.part_name_suffix_length,
                store=store, records=args.records, csv_dim=args.csv_dim, csv_separator=args.csv_separator,
                csv_has_label=not args.csv_no_label, storage_options=args.storage_options, cache_dir=args.cache_dir)


def run(args) -> int:
    from recordkit.formats import validate as v
    from recordkit.errors import UsageError
    if args.max_errors is not None and args.max_errors < 1:
        raise UsageError("--max-errors must be at least 1")
    found = []
    shown = {}
    out = sys.stdout

    def on_problem(p):
        if args.json:
            found.append(p.to_dict())
            return
        if p.severity == "warning" and not args.all_warnings:
            n = shown[p.kind] = shown.get(p.kind, 0) + 1
            if n > WARNINGS_SHOWN_PER_KIND:
                if n == WARNINGS_SHOWN_PER_KIND + 1:
                    print(f"{p.path}: further '{p.kind}' warnings are counted, not shown (--all-warnings)", file=out)
                return
        print(str(p), file=out)

    summary = v.run(args.paths, max_errors=args.max_errors, on_problem=on_problem, **options(args))
    failed = summary.errors > 0 or (args.strict and summary.warnings > 0)
    if args.json:
        import json
        doc = {"paths": list(args.paths), "ok": not failed, **summary.to_dict(), "problems": found}
        out.write(json.dumps(doc) + "\n")
    else:
        _print_summary(summary, args)
    return 1 if failed else 0


def _print_summary(summary, args) -> None:
    c = summary.checked
    units = ", ".join(f"{n} {what}" for what, n in c.items() if what not in ("files", "bytes") and n) or "nothing"
    lines = [f"{units} checked, {summary.errors + summary.warnings} problem(s): {summary.errors} error(s), "
             f"{summary.warnings} warning(s) ({c.get('files', 0)} file(s), {c.get('bytes', 0)} bytes)"]
    if summary.stopped_early:
        lines.append(f"stopped after {args.max_errors} error(s) (--max-errors): the rest was not checked")
    width = max((len(k) for k in summary.by_kind), default=0)
    lines += [f"  {kind:<{width}}  {n}" for kind, n in sorted(summary.by_kind.items(), key=lambda kv: (-kv[1], kv[0]))]
    print("\n".join(lines), file=sys.stderr)
