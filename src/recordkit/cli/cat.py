"""``recordkit cat``: every sequence as one JSON object per line, in file order."""
from __future__ import annotations

import base64
import json
import math
import sys

import orjson

from recordkit.errors import UsageError

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
    sources.add_part_arguments(p)
    add_store_arguments(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from recordkit.formats import registry
    from recordkit.formats.detect import sniff_format
    if args.store:  # --store: a SINGA store of that kind
        return cat_store(args)
    from recordkit.storage.probe import reusing
    with reusing(args.path, args.storage_options, args.cache_dir):  # a URL: one look, for detection and the open
        fmt = registry.get(sniff_format(args.path, args.storage_options, part_name_prefix=args.part_name_prefix,
                                        cache_dir=args.cache_dir))
        if fmt.records == "tuples":  # a record store: its key/value tuples
            return cat_store(args)
        if fmt.records == "features" and not args.stream:  # records as they are; with --stream, as those streams
            return cat_ofrecord(args)
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
    from recordkit.engine.deserializer import name_of, tolerated
    s = tolerated(reader)
    if s.get("errors"):
        hint = "; --trace-level 1 lists them" if getattr(reader, "trace_level", 1) < 1 else ""
        print(f"recordkit: {name_of(reader)}: {s['errors']} error(s) tolerated (max {s.get('max_errors', '?')}); "
              f"the affected sequences were skipped{hint}", file=sys.stderr)


# -- OFRecord data sets: one JSON object per record ---------------------------------------------------

def _json_value(f):
    if f.kind == "bytes_list":
        return [base64.b64encode(v).decode("ascii") for v in f.value]
    return f.value  # orjson prints float32/float64 in their shortest round-trip form


def cat_ofrecord(args) -> int:
    """One JSON object per record, in part and record order: {FEATURE: {kind, values}}, bytes as base64."""
    out = sys.stdout.buffer
    import numpy as np
    from recordkit.formats.ofrecord import summary
    for path in sources.ofrecord_parts(args):
        for _, _, rec in summary.records(path, getattr(args, "storage_options", None)):
            obj = {name: {"kind": f.kind, "values": _json_value(f)} for name, f in rec.items()}
            finite = all(f.kind == "bytes_list" or f.kind.startswith("int") or np.isfinite(f.value).all()
                         for f in rec.values())
            if finite:
                out.write(orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
            else:
                plain = {k: {"kind": v["kind"], "values": [float(str(x)) if math.isfinite(x) else float(x)
                                                           for x in v["values"]]}
                         if v["kind"] in ("float_list", "double_list") else v for k, v in obj.items()}
                out.write(json.dumps(plain, default=lambda a: a.tolist(), separators=(",", ":")).encode() + b"\n")
    return 0


# -- SINGA stores: one JSON object per tuple, in store order.
#
# ``{"key": KEY, "value": BASE64}``: the key as text (UTF-8; undecodable bytes as ``\\xNN``
# escapes), for a TextFile the 0-based line number; the value base64-encoded (for a
# TextFile: the line without its newline). ``--decode image-record`` adds the fields of
# the record held in the value (``recordkit.formats.singa.records``): SINGA 0.x
# ``RecordProto``/``SingleLabelImageRecord`` for KVFile and TextFile stores, SINGA 1.x
# ``ImageRecord`` for BinFile. Without ``--store`` the kind is sniffed; a file that cannot
# be told apart is a usage error asking for ``--store``.
#
STORE_CHOICES = ("kvfile", "binfile", "textfile")
DECODE_CHOICES = ("image-record",)


def add_store_arguments(parser) -> None:
    parser.add_argument("--store", choices=STORE_CHOICES, default=None,
                        help="the SINGA store kind (default: sniffed from the content)")
    parser.add_argument("--decode", choices=DECODE_CHOICES, default=None,
                        help="also print the fields of the record each value holds")
    parser.add_argument("--tolerant", action="store_true",
                        help="report a truncated or corrupt tuple on stderr and stop there instead of failing")


def _jsonable(value):
    """Record fields as JSON: arrays as (nested) lists, bytes as base64 text."""
    import numpy as np
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def record_decoder(name: str, kind: str):
    """The hook behind ``--decode``: ``f(value, path, index) -> dict of extra JSON fields``."""
    if name != "image-record":
        raise UsageError(f"unknown decoder {name!r}; use one of {', '.join(DECODE_CHOICES)}")
    from recordkit.formats.singa import records
    decode = records.decoder_for(kind)

    def fields(value: bytes, path: str, index: int) -> dict:
        return _jsonable(decode(value, path=path, record=f"tuple {index}"))
    return fields


def cat_store(args) -> int:
    from recordkit.formats.singa import open as open_store, sniff_store
    kind = getattr(args, "store", None)
    if kind is None:
        kind = sniff_store(args.path, getattr(args, "storage_options", None))
        if kind is None:
            raise UsageError(f"{args.path}: cannot tell which SINGA store this is (empty, unknown or "
                             f"ambiguous content); pass --store kvfile|binfile|textfile")
    decode = record_decoder(args.decode, kind) if getattr(args, "decode", None) else None
    out = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None
    with open_store(args.path, "read", kind, tolerant=bool(getattr(args, "tolerant", False)),
                    storage_options=getattr(args, "storage_options", None)) as store:
        for index, (key, value) in enumerate(store):
            obj = {"key": key.decode("utf-8", "backslashreplace"),
                   "value": base64.b64encode(value).decode("ascii")}
            if decode is not None:
                obj.update(decode(value, store.path, index))
            line = orjson.dumps(obj) + b"\n"
            if out is not None:
                out.write(line)
            else:
                sys.stdout.write(line.decode("utf-8"))
        if out is not None:
            out.flush()
        from recordkit.errors import RecordkitInfo, warn
        warn(f"{store.path}: {store.kind} store read: {store.position[1]} tuples", RecordkitInfo)  # trace level 2
        if store.errors:
            print(f"recordkit: {store.path}: stopped at a broken tuple (tolerated)", file=sys.stderr)
    return 0
