"""``recordkit cat`` for SINGA stores: one JSON object per tuple, in store order.

``{"key": KEY, "value": BASE64}``: the key as text (UTF-8; undecodable bytes as ``\\xNN``
escapes), for a TextFile the 0-based line number; the value base64-encoded (for a
TextFile: the line without its newline). ``--decode image-record`` adds the fields of
the record held in the value (``recordkit.formats.singa.records``): SINGA 0.x
``RecordProto``/``SingleLabelImageRecord`` for KVFile and TextFile stores, SINGA 1.x
``ImageRecord`` for BinFile. Without ``--store`` the kind is sniffed; a file that cannot
be told apart is a usage error asking for ``--store``.
"""
from __future__ import annotations

import base64
import sys

import orjson

from recordkit.errors import UsageError

STORE_CHOICES = ("kvfile", "binfile", "textfile")
DECODE_CHOICES = ("image-record",)


def add_arguments(parser) -> None:
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
    decode = records.decode_image_record_v1 if kind == "binfile" else records.decode_record

    def fields(value: bytes, path: str, index: int) -> dict:
        return _jsonable(decode(value, path=path, record=f"tuple {index}"))
    return fields


def cat(args) -> int:
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
