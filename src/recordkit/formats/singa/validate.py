"""Validating a SINGA store: every tuple's framing, and the records the values hold, located.

KVFile and BinFile have no index, so a broken tuple (a length running past the end, bad magic)
ends what can be read: it is reported with its byte offset and tuple index, and the rest of
the file is unreachable. Before that, every value is checked as a SINGA record when the store
holds records (``records="auto"``: when its first value parses as one; 0.x ``RecordProto`` in a
KVFile, 1.x ``ImageRecord`` in a BinFile): each must parse, and for ``RecordProto`` carry as
many features as the first (what conversion needs). A key used twice in a KVFile is a warning
(SINGA's append refuses duplicates). TextFile stores are one value per line and cannot be
malformed; as CSV (``store="csv"`` with ``csv_dim``) every line is parsed as CSVInputLayer does.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterator

from recordkit.errors import FormatError, UsageError
from recordkit.formats.validate import Problem, checksum_problems


def validate(path, *, checked: Counter, store: str | None = None, records: str = "auto", csv_dim: int | None = None,
             csv_separator: str = ",", csv_has_label: bool = True, storage_options=None, **_) -> Iterator[Problem]:
    from recordkit.formats.singa.store import open as open_store, sniff_store as sniff
    path = str(path)
    checked["files"] += 1
    if store == "csv":
        if not csv_dim:
            raise UsageError(f"{path}: a CSV store is validated against its number of values per line: give --csv-dim N")
        yield from checksum_problems(path, storage_options=storage_options)
        yield from _csv(path, checked, csv_dim, csv_separator, csv_has_label, storage_options)
        return
    kind = store or sniff(path, storage_options)
    if kind is None:
        raise UsageError(f"{path}: cannot tell which SINGA store this is (empty, unknown or ambiguous content); "
                         f"pass --store kvfile|binfile|textfile|csv")
    from recordkit.storage import location
    if location.isdir(path, storage_options):  # a SINGA 0.1 shard folder: its shard.dat
        path = location.join(path, "shard.dat")
    yield from checksum_problems(path, storage_options=storage_options)
    decode = _record_decoder(kind) if records != "no" else None
    first_dim, seen = None, set()
    with open_store(path, "read", kind, storage_options=storage_options) as s:
        while True:
            at, index = s.position
            try:
                item = s.read()
            except FormatError as e:
                yield Problem.from_error(e, "tuple-broken")
                return
            if item is None:
                break
            checked["tuples"] += 1
            key, value = item
            if kind == "kvfile":
                if key in seen:
                    yield Problem(path, "duplicate-key", f"key {key.decode('utf-8', 'backslashreplace')!r} is used "
                                                         f"again (SINGA's append mode refuses duplicate keys)",
                                  offset=at, record=f"tuple {index}", severity="warning")
                seen.add(key)
            if decode is None:
                continue
            try:
                rec = decode(value, path=path, offset=at, record=f"tuple {index}")
            except FormatError as e:
                if index == 0 and records == "auto":
                    decode = None  # the values are not records: only the framing is checked
                    continue
                yield Problem(path, "record-does-not-parse", e.message, offset=at, record=f"tuple {index}")
                continue
            if kind == "binfile":
                continue
            n = sum(int(getattr(rec.get(f), "size", 0)) for f in ("data", "pixel") if rec.get(f) is not None)
            if first_dim is None:
                first_dim = n
                if n == 0:
                    yield Problem(path, "record-empty", "the first record holds no data or pixels", offset=at,
                                  record=f"tuple {index}")
            elif n != first_dim:
                yield Problem(path, "record-size", f"record has {n} features, the first had {first_dim}", offset=at,
                              record=f"tuple {index}")
        checked["bytes"] += s.position[0]


def _record_decoder(kind: str):
    from recordkit.formats.singa import records
    if kind == "kvfile":
        return records.decode_record
    if kind == "binfile":
        return records.decode_image_record_v1
    return None  # textfile: values are lines


def _csv(path, checked, dim, separator, has_label, storage_options) -> Iterator[Problem]:
    from recordkit.formats.singa.csvfile import parse_csv_record
    from recordkit.formats.singa.store import open as open_store
    with open_store(path, "read", "textfile", storage_options=storage_options) as s:
        for i, (_, line) in enumerate(s):
            checked["lines"] += 1
            if not line.strip():
                continue
            try:
                parse_csv_record(line, int(dim), separator=separator, has_label=has_label, path=path, line=i + 1)
            except FormatError as e:
                yield Problem.from_error(e, "csv-field")
