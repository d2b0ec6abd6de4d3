"""``recordkit report IN [IN...] -o report.html``: what a corpus holds, as one HTML page.

Statistics come from ``recordkit.report.stats`` (one pass with the compiled readers), the
page from ``recordkit.report.html`` (matplotlib, imported only when the page is drawn). A
problem in the input is part of the report, not the end of the command: the page shows
it with its location; the exit status is 1 when any input had errors, so a script can
still tell.
"""
from __future__ import annotations

import sys

from recordkit.errors import RecordkitError


def register(sub) -> None:
    p = sub.add_parser("report", help="write an HTML page with a data set's overview, plots and problems",
                       description="Read each input once (CTF, CBF, OFRecord file or directory, SINGA store) and "
                                   "write one self-contained HTML page: format, size, streams, sequences, "
                                   "errors with their locations, and plots (sequence lengths, value "
                                   "histograms, per-dimension mean/std, sparse index frequencies, class "
                                   "balance, the first images). --stream declares the streams of CTF inputs; CBF, "
                                   "OFRecord and SINGA inputs describe their own. Needs matplotlib: "
                                   "pip install 'recordkit[report]'.")
    from recordkit.cli import argtypes
    p.add_argument("paths", nargs="+", metavar="IN", help="the inputs, any format recordkit reads (one section each)")
    p.add_argument("-o", "--output", required=True, metavar="HTML", help="the page to write")
    p.add_argument("--title", default=None, help="page title (default: recordkit report: NAMES)")
    p.add_argument("--show-errors", type=argtypes.non_negative_int, default=20, metavar="N",
                   help="list at most N errors/warnings per input (all are counted; default 20)")
    from recordkit.cli import sources
    sources.add_ctf_arguments(p)
    p.add_argument("--data-part-num", type=argtypes.positive_int, default=None, metavar="N",
                   help="OFRecord: read exactly parts 0..N-1 (default: every PREFIX<digits> file of the directory)")
    p.add_argument("--part-name-prefix", type=argtypes.non_empty, default="part-", metavar="PREFIX", help="OFRecord part names")
    p.add_argument("--part-name-suffix-length", type=argtypes.suffix_length, default=-1, metavar="K",
                   help="OFRecord: digits of the part number, zero padded (-1: no padding)")
    p.add_argument("--store", choices=("kvfile", "binfile", "textfile"), default=None,
                   help="SINGA: the store kind (default: sniffed from the content)")
    p.set_defaults(max_errors=1000)
    p.set_defaults(run=run)


def run(args) -> int:
    import os

    from recordkit.cli import sources
    from recordkit.cli.progress import byte_progress
    from recordkit.report import html
    from recordkit.report.stats import collect
    html._pyplot()  # before reading anything: a missing extra is said at once
    reports = []
    for path in args.paths:
        from recordkit.formats import registry
        from recordkit.formats.detect import sniff_format
        declares = not args.store and registry.get(sniff_format(path, args.storage_options,
                                                               part_name_prefix=args.part_name_prefix)).needs_streams
        streams = sources.parse_streams(args) if declares else None  # CTF; the others describe their own
        size = _size(path, args.storage_options)
        with byte_progress(size, f"report {os.path.basename(path.rstrip('/'))}") as bar:
            rep = collect(path, streams=streams, max_errors=args.max_errors,
                          max_shown=args.show_errors, progress=bar, chunk_size=args.chunk_size,
                          skip_sequence_ids=args.skip_sequence_ids, precision=args.precision,
                          storage_options=args.storage_options, cache_dir=args.cache_dir,
                          data_part_num=args.data_part_num, part_name_prefix=args.part_name_prefix,
                          part_name_suffix_length=args.part_name_suffix_length, store=args.store)
        reports.append(rep)
    title = args.title or "recordkit report: " + ", ".join(os.path.basename(p.rstrip("/")) for p in args.paths)
    import shlex
    command = "recordkit report " + shlex.join(sys.argv[2:]) if sys.argv[1:2] == ["report"] else None
    html.write_page(args.output, html.render(reports, title=title, command=command))
    bad = [r for r in reports if r.errors]
    for r in reports:
        print(f"{r.path}: {r.format}, {r.sequences} {r.unit}"
              f", {r.errors} error(s)" + ("" if r.complete else ", pass stopped early"), file=sys.stderr)
    print(f"recordkit: wrote {args.output}", file=sys.stderr)
    return 1 if bad else 0


def _size(path, storage_options) -> int:
    """Bytes the progress bar counts: a file's size, or a directory's (OFRecord parts) total."""
    import os
    from recordkit.storage.location import is_url
    if not is_url(str(path)) and os.path.isdir(path):
        return sum(e.stat().st_size for e in os.scandir(path) if e.is_file())
    try:
        from recordkit.storage import open_source
        src = open_source(str(path), storage_options=storage_options, verify=False)
        try:
            return src.size
        finally:
            src.close()
    except (OSError, RecordkitError):
        return 0
