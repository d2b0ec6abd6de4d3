"""``recordkit cat``: every sequence as one JSON object per line, in file order."""
from __future__ import annotations

import sys

from recordkit.cli import output, sources
from recordkit.cli.progress import byte_progress


def register(sub) -> None:
    p = sub.add_parser("cat", help="print every sequence as a JSON line",
                       description="Print one JSON object per sequence: "
                                   '{"key": ID, "NAME": [SAMPLE, ...], ...}; dense samples are lists of '
                                   'DIM numbers, sparse samples {"indices": [...], "values": [...]}. For an '
                                   'OFRecord file or directory: one object per record, '
                                   '{"FEATURE": {"kind": KIND, "values": [...]}} (bytes as base64). For a SINGA '
                                   'store (--store, or a sniffed KVFile/BinFile): {"key": KEY, "value": BASE64}.')
    p.add_argument("path", help="a CTF or CBF file, an OFRecord directory or part file, or a SINGA store")
    sources.add_ctf_arguments(p)
    from recordkit.cli import ofrecord_cli, singa_cat
    ofrecord_cli.add_part_arguments(p)
    singa_cat.add_arguments(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from recordkit.formats.detect import sniff
    kind = "singa" if args.store else sniff(args.path, args.storage_options)
    if kind == "singa":
        from recordkit.cli import singa_cat
        return singa_cat.cat(args)
    if kind == "ofrecord":
        from recordkit.cli import ofrecord_commands
        return ofrecord_commands.cat(args)
    reader = sources.open_reader(args)
    specs = reader.streams
    out = sys.stdout.buffer
    total = sum(c.size for c in reader.chunks)
    with reader, byte_progress(total, "cat", stdout_shared=True) as bar:
        for chunk, info in zip(reader.iter_chunks(threads=2), reader.chunks):
            lines = [output.dumps(rec) for rec in output.chunk_records(chunk, specs)]
            if lines:
                out.write(b"\n".join(lines) + b"\n")
            bar.update(info.size)
    out.flush()
    report_tolerated(reader)
    return 0


def report_tolerated(reader) -> None:
    """After a run under an error budget: how many errors were tolerated (stderr), at every trace
    level (at level 0, where they were not listed, with how to see them: CNTK's hint)."""
    if not hasattr(reader, "summary"):
        return
    s = reader.summary()
    if s["errors"]:
        hint = "; --trace-level 1 lists them" if getattr(reader, "trace_level", 1) < 1 else ""
        print(f"recordkit: {reader.path}: {s['errors']} error(s) tolerated (max {reader.budget.max_errors}); "
              f"the affected sequences were skipped{hint}", file=sys.stderr)
