"""Validating a CTF file: the index scan (sequence ids) and every chunk's text, located.

The chunks are parsed by the reader's own kernel with no error budget (it never stops early),
so validation finds exactly what reading finds, as ``file:line:column``. The kernel records the
first 256 events of a parse and counts the rest; when a chunk has more errors than that, its
sequences are parsed again in halves until every error has its location (a single sequence
with more than 256 errors reports the rest as one counted problem at its first line). Warnings
(padded dense samples, undeclared inputs, empty sequences) are located as far as recorded and
counted in full.

After an error the reader drops the rest of its sequence (CNTK's rule: a half-read sequence
would pair features with the wrong labels), so the parser does not look at it; validation then
parses what was skipped (the rest of the error's line from its next ``|``, and the sequence's
later lines, each as a sequence of its own) so that problems behind the first are found too.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterator

from recordkit.errors import FormatError, UsageError
from recordkit.formats.ctf import messages as msg
from recordkit.formats.validate import Problem, checksum_problems, is_checksum_error
from recordkit.engine import DEFAULT_CHUNK_SIZE

KINDS = {
    msg.E_NUMBER: "malformed-number", msg.E_SIGN: "malformed-number", msg.E_EXPONENT: "malformed-number",
    msg.E_AFTER_NUMBER: "malformed-number", msg.E_SPARSE_INDEX: "malformed-sparse", msg.E_COLON: "malformed-sparse",
    msg.E_INDEX_OVERFLOW: "sparse-index-range", msg.E_INDEX_RANGE: "sparse-index-range",
    msg.E_TOO_MANY: "too-many-values", msg.E_NO_VALUES: "no-values", msg.E_DUPLICATE_INPUT: "duplicate-input",
    msg.E_STRAY: "stray-text", msg.E_EMPTY_NAME: "empty-name", msg.E_ID_ALONE: "id-alone",
    msg.E_DUPLICATE_ID: "duplicate-id", msg.E_ID_OVERFLOW: "id-overflow", msg.E_NO_ID: "missing-id",
    msg.W_PADDED: "padded-sample", msg.W_UNKNOWN: "undeclared-input", msg.W_EMPTY_SEQUENCE: "empty-sequence",
}
_UNLIMITED = 1 << 62


def _reader_class(storage_options, unverified: bool):
    from recordkit.formats.ctf.reader import CTFReader

    class ValidatingReader(CTFReader):
        """CTFReader whose error budget never runs out and never prints: validation reports
        from the kernel's events itself. ``unverified``: the file's checksum mismatches were
        reported already, so its text is checked without the checksum sidecar."""

        def _open_index(self, cache_index, cache_dir):
            if unverified:
                from recordkit.storage.source import open_source
                self._source.close()
                self._source = open_source(self.path, storage_options=storage_options, verify=False)
            return super()._open_index(cache_index, cache_dir)

        def _warn_error(self, text):
            pass

        def _warn_kind(self, code, text):
            pass

    return ValidatingReader


def validate(path, *, checked: Counter, streams=None, skip_sequence_ids: bool = False, chunk_size: int = DEFAULT_CHUNK_SIZE,
             precision="float", storage_options=None, cache_dir=None, **_) -> Iterator[Problem]:
    if not streams:
        raise UsageError(f"{path}: a CTF file is validated against its stream declarations: give them "
                         f"(--stream NAME=FORMAT:DIM[:ALIAS], or --header FILE)")
    path = str(path)
    checked["files"] += 1
    bad_blocks = list(checksum_problems(path, storage_options=storage_options))
    yield from bad_blocks
    try:
        reader = _reader_class(storage_options, bool(bad_blocks))(
            path, streams, precision=precision or "float", max_errors=_UNLIMITED, skip_sequence_ids=skip_sequence_ids,
            trace_level=0, chunk_size=chunk_size, storage_options=storage_options, cache_dir=cache_dir)
    except FormatError as e:
        if not is_checksum_error(e):
            yield Problem.from_error(e, "empty-file" if "is empty" in e.message else "unreadable")
        return
    with reader:
        checked["bytes"] += reader.index.file_size
        yield from _index_problems(reader)
        for c in range(len(reader.chunks)):
            checked["chunks"] += 1
            lo, hi = int(reader._bounds[c]), int(reader._bounds[c + 1])
            yield from _piece(reader, c, lo, hi, checked)


def _index_problems(reader) -> Iterator[Problem]:
    idx = reader.index
    for code, _seq, line, col, _stream, a, b in idx.errors:
        yield Problem(reader.path, KINDS.get(code, "index"), msg.error_message(code, None, a, b), line, col)
    if idx.error_count > len(idx.errors):
        last = idx.errors[-1] if idx.errors else None
        yield Problem(reader.path, "duplicate-id", "further sequence id errors after this line (not located: the "
                                                   "index scan records the first ones)",
                      last[2] if last else 1, 1, count=idx.error_count - len(idx.errors))


def _piece(reader, chunk_id: int, lo: int, hi: int, checked: Counter) -> Iterator[Problem]:
    """Problems of sequences [lo, hi) of the index (all of a chunk, or part of one being bisected)."""
    try:
        _, buf, parsed = reader._parse_piece(chunk_id, lo, hi, 0)
    except FormatError as e:
        if not is_checksum_error(e):
            yield Problem.from_error(e, "padding-too-large" if "padded" in e.message else "unreadable",
                                     record=e.record or f"chunk {chunk_id}")
        checked["sequences"] += hi - lo
        return
    kept, _columns, errors, nerr, warns, wcounts, _stopped, _widest = parsed
    if nerr > len(errors) and hi - lo > 1:  # more errors than the kernel located: halve and parse again
        mid = (lo + hi) // 2
        yield from _piece(reader, chunk_id, lo, mid, checked)
        yield from _piece(reader, chunk_id, mid, hi, checked)
        return
    checked["sequences"] += hi - lo
    keys, id_mode = reader.index.keys, reader.index.id_mode
    records = [f"sequence {int(keys[lo + j])}" if id_mode else None for j in range(hi - lo)]
    found = list(_events(reader, buf, errors, warns, records, [0] * (hi - lo)))
    idx, buf_start = reader.index, int(reader.index.offsets[lo])
    rest = []
    for code, seq, line, col, *_ in errors:
        if code in msg.DROPS_SEQUENCE and 0 <= seq < hi - lo:
            s = lo + seq
            start = int(idx.offsets[s])
            rest += _pieces_after(buf, buf_start, start, start + int(idx.sizes[s]), int(idx.first_lines[s]) + 1,
                                  line, col, 0, records[seq], later_lines=True)
    found += _continue(reader, buf, buf_start, rest)
    yield from sorted(found, key=lambda p: (p.line, p.column or 0))
    yield from _unlocated(reader, chunk_id, lo, errors, nerr, warns, wcounts)


def _events(reader, buf, errors, warns, records, shifts, skip_empty: bool = False) -> Iterator[Problem]:
    """Kernel events as problems, in line order (``records``/``shifts``: per parsed sequence, its
    record text and what to add to the kernel's columns)."""
    streams = reader.streams
    events = [(line, col + shifts[seq], 0, code, seq, stream, a, b) for code, seq, line, col, stream, a, b in errors]
    events += [(line, col + shifts[seq], 1, code, seq, stream, a, b) for code, seq, line, col, stream, a, b in warns
               if not (skip_empty and code == msg.W_EMPTY_SEQUENCE)]
    for line, col, is_warning, code, seq, stream, a, b in sorted(events):
        record = records[seq] if 0 <= seq < len(records) else None
        if not is_warning:
            name = streams[stream].name if stream >= 0 else None
            yield Problem(reader.path, KINDS.get(code, "syntax"), msg.error_message(code, name, a, b), line, col,
                          record=record)
        elif code == msg.W_PADDED:
            yield Problem(reader.path, KINDS[code], f"dense input '{streams[stream].name}' has {a} of {b} values: "
                                                    f"padded with zeros", line, col, record=record, severity="warning")
        elif code == msg.W_UNKNOWN:
            name = bytes(buf[a:a + b]).decode("utf-8", "replace")
            yield Problem(reader.path, KINDS[code], f"input '{name}' is not declared: skipped", line, col,
                          record=record, severity="warning")
        else:
            yield Problem(reader.path, KINDS.get(code, "warning"), "sequence has no samples of any declared input: "
                                                                    "skipped", line, col, record=record,
                          severity="warning")


def _pieces_after(buf, buf_start: int, start: int, end: int, first_line: int, line: int, col: int, shift: int,
                  record, *, later_lines: bool) -> list:
    """What the parser skipped after an error that dropped the sequence (or piece) at bytes
    [start, end) starting on ``first_line``: the rest of the error's line from its next ``|``, and
    (``later_lines``) each later line. Pieces are ``(start, end, line, column shift, record)``,
    absolute byte offsets; the kernel counts a piece's columns from its start, ``shift`` corrects that."""
    data = bytes(memoryview(buf)[start - buf_start:end - buf_start])
    at = 0
    for _ in range(line - first_line):  # the start of the error's line
        nl = data.find(b"\n", at)
        if nl < 0:
            return []
        at = nl + 1
    nl = data.find(b"\n", at)
    line_end = len(data) if nl < 0 else nl + 1
    pieces = []
    bar = data.find(b"|", at + col, line_end)  # col is 1-based: from the byte after the error
    if bar >= 0:
        pieces.append((start + bar, start + line_end, line, shift + bar - at, record))
    if later_lines:
        at, n = line_end, line + 1
        while at < len(data):
            nl = data.find(b"\n", at)
            stop = len(data) if nl < 0 else nl + 1
            pieces.append((start + at, start + stop, n, 0, record))
            at, n = stop, n + 1
    return pieces


def _continue(reader, buf, buf_start: int, pieces: list) -> Iterator[Problem]:
    """Parse the pieces the reader skips after an error, each as a sequence of its own, and report
    what they hold: the problems behind the first one of a sequence. An error in a piece continues
    with the rest of its line in turn."""
    import numpy as np
    while pieces:
        offsets = np.array([p[0] for p in pieces], np.uint64)
        sizes = np.array([p[1] - p[0] for p in pieces], np.uint64)
        lines = np.array([p[2] - 1 for p in pieces], np.uint64)
        _kept, _cols, errors, _nerr, warns, _wcounts, _stopped, _widest = reader._parser.parse(
            buf, buf_start, offsets, sizes, lines, 0, len(pieces))
        yield from _events(reader, buf, errors, warns, [p[4] for p in pieces], [p[3] for p in pieces],
                           skip_empty=True)
        nxt = []
        for code, seq, line, col, *_ in errors:
            if code in msg.DROPS_SEQUENCE and 0 <= seq < len(pieces):
                start, end, first, shift, record = pieces[seq]
                nxt += _pieces_after(buf, buf_start, start, end, first, line, col, shift, record, later_lines=False)
        pieces = nxt


def _unlocated(reader, chunk_id, lo, errors, nerr, warns, wcounts) -> Iterator[Problem]:
    first_line = int(reader.index.first_lines[lo]) + 1
    if nerr > len(errors):
        yield Problem(reader.path, "errors-not-located", f"{nerr - len(errors)} more error(s) in the sequence "
                                                         f"starting on this line (not located one by one)",
                      first_line, 1, count=nerr - len(errors))
    located = Counter(code for code, *_ in warns)
    for code, n in sorted(wcounts.items()):
        if n > located[code]:
            yield Problem(reader.path, KINDS.get(code, "warning"), f"{n - located[code]} more warning(s) of this kind "
                                                                   f"in chunk {chunk_id} (counted, not located)",
                          first_line, 1, record=f"chunk {chunk_id}", severity="warning", count=n - located[code])
