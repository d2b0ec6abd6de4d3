"""``recordkit stats``: parse everything, report per-stream counts and value ranges."""
from __future__ import annotations

import sys

import orjson

from recordkit.cli import sources
from recordkit.cli.cat import report_tolerated
from recordkit.cli.progress import byte_progress


def register(sub) -> None:
    p = sub.add_parser("stats", help="per-stream sequence/sample/non-zero counts and sum/min/max",
                       description="Parse the whole file and print, per stream, the samples, non-zeros, and "
                                   "the sum, min and max of all values (sparse: of the stored values).")
    p.add_argument("path", help="a CTF or CBF file, or an OFRecord directory or part file")
    sources.add_ctf_arguments(p)
    sources.add_part_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def _num(v) -> str:
    return "-" if v is None else f"{v:.6g}"


def table(header: list[str], rows: list[list], *, left: int = 1) -> str:
    """Columns as wide as their widest cell (a long stream name no longer pushes its row out of
    line): the first ``left`` columns left-aligned, the numbers right-aligned, two spaces apart."""
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
                     .rstrip() for row in cells)


def run(args) -> int:
    from recordkit.report.totals import stream_totals
    from recordkit.formats import registry
    from recordkit.formats.detect import sniff_format
    fmt = registry.get(sniff_format(args.path, args.storage_options, part_name_prefix=args.part_name_prefix))
    if fmt.records == "features" and not args.stream:  # per feature; with --stream, per declared stream
        from recordkit.formats.ofrecord import summary
        result = summary.feature_totals(sources.ofrecord_parts(args), args.storage_options)
        if args.json:
            sys.stdout.buffer.write(orjson.dumps(result) + b"\n")
        else:
            print(f"{args.path}: {result['records']} records")
            rows = [[name, t["kind"], t["records"], t["values"], _num(t["sum"]), _num(t["min"]), _num(t["max"])]
                    for name, t in sorted(result["features"].items())]
            print(table(["feature", "kind", "records", "values", "sum", "min", "max"], rows, left=2))
        return 0
    reader = sources.open_reader(args)
    with reader, byte_progress(sum(c.size for c in reader.chunks), "stats") as bar:
        result = stream_totals(reader, bar)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(result) + b"\n")
    else:
        print(f"{reader.path}: {result['sequences']} sequences")
        rows = [[name, t["samples"], t["nnz"], _num(t["sum"]), _num(t["min"]), _num(t["max"])]
                for name, t in result["streams"].items()]
        print(table(["stream", "samples", "nnz", "sum", "min", "max"], rows, left=1))
    report_tolerated(reader)
    return 0
