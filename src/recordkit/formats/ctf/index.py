"""The CTF sequence index: one scan of the file, grouped into chunks, optionally cached.

The index is what lets a reader load one chunk at a time: for every sequence its byte
offset and size, its key (the sequence id, or the 0-based line number in line mode),
the line it starts on (so errors can say ``line:column`` without rescanning) and its
row count (non-blank lines: the size estimate chunk descriptions use).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from recordkit.storage.atomic import AtomicFile
from recordkit.formats.ctf import _kernel

BLOCK_SIZE = 4 << 20
CACHE_MAGIC = "recordkit-ctf-index"
CACHE_VERSION = 1
_UTF8_BOM = b"\xef\xbb\xbf"


@dataclass
class CTFIndex:
    offsets: np.ndarray      # uint64, absolute byte offset of each sequence
    sizes: np.ndarray        # uint64, bytes up to the next sequence (or EOF)
    keys: np.ndarray         # uint64
    first_lines: np.ndarray  # uint64, 0-based line of the sequence's first line
    rows: np.ndarray         # uint64, non-blank lines in the sequence
    id_mode: bool            # True: lines carry sequence ids
    errors: list             # index error events (duplicate / overflowing ids)
    error_count: int
    file_size: int

    def __len__(self) -> int:
        return len(self.offsets)

    def chunk_bounds(self, chunk_size: int) -> np.ndarray:
        """First sequence of each chunk (+ a final entry): CNTK's greedy byte chunking."""
        if len(self.offsets) == 0:
            return np.zeros(1, dtype=np.int64)
        limit = max(1, min(int(chunk_size), self.file_size))
        return _kernel.make_chunks(self.offsets, self.sizes, limit)


def scan(source, *, skip_sequence_ids: bool) -> CTFIndex:
    """Index a CTF file in one sequential pass of BLOCK_SIZE reads.

    ``source``: a byte source (``recordkit.storage.open_source``) or a local path.
    """
    if isinstance(source, (str, os.PathLike)):
        from recordkit.storage import open_source
        src = open_source(os.fspath(source), verify=False)
        try:
            return scan(src, skip_sequence_ids=skip_sequence_ids)
        finally:
            src.close()
    path = source.name
    scanner = _kernel.IndexScanner(skip_sequence_ids)
    buf = bytearray(BLOCK_SIZE)
    filled = 0
    size = source.size
    pos = 0
    first = True
    # a local file is read straight into the block (a pread into a new bytes object and a copy
    # into the block cost ~15 ms per 100 MB of text before the scan began)
    read_into = getattr(source, "pread_into", None)
    while True:
        if filled == len(buf):
            buf.extend(bytes(len(buf)))  # one line longer than the buffer: grow
        want = min(len(buf) - filled, max(0, size - pos))
        if read_into is not None:
            with memoryview(buf) as view:
                n = read_into(pos, view[filled:filled + want]) if want else 0
        else:
            block = source.pread(pos, want, cache=False) if want else b""
            n = len(block)
            buf[filled:filled + n] = block
        pos += n
        filled += n
        final = n == 0
        if first and filled:
            first = False
            if buf[:2] == b"\xff\xfe":
                from recordkit.errors import FormatError
                raise FormatError(path, "found a UTF-16 byte order mark: only UTF-8/ASCII CTF files are supported",
                                  line=1, column=1)
            if buf[:3] == _UTF8_BOM:
                scanner.set_content_start(3)
        view = memoryview(buf)
        consumed = scanner.feed(view[:filled], final)
        del view
        if final:
            break
        if consumed:
            buf[:filled - consumed] = buf[consumed:filled]
            filled -= consumed
    offsets, sizes, keys, first_lines, rows, errors = scanner.result()
    return CTFIndex(offsets, sizes, keys, first_lines, rows, scanner.mode == 1, errors,
                    int(scanner.error_count), size)


# ------------------------------------------------------------------------------------------
# Cache (cacheIndex)

def cache_path(path: str, skip_sequence_ids: bool, cache_dir=None) -> str:
    """Beside a local input (as CNTK does); for a remote input, inside ``cache_dir``."""
    if cache_dir is None:
        return f"{path}.{int(bool(skip_sequence_ids))}.rkindex"
    import hashlib
    digest = hashlib.sha256(path.encode()).hexdigest()[:24]
    return os.path.join(os.fspath(cache_dir), f"{digest}.{int(bool(skip_sequence_ids))}.rkindex")


def _local_fingerprint(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def load_cached(path: str, skip_sequence_ids: bool, *, fingerprint=None, cache_dir=None) -> CTFIndex | None:
    """The cached index if it was built from this version of the input and is intact; otherwise None.

    A cache is trusted only if it parses, names this format and version, was built
    from a file of the current size and version (modification time locally, ETag for
    remote objects: ``fingerprint``), and its arrays are consistent with that size:
    anything else is ignored (and later rebuilt).
    """
    from recordkit.errors import NotRegularFileError
    from recordkit.storage.location import open_local
    cpath = cache_path(path, skip_sequence_ids, cache_dir)
    try:
        cache = open_local(cpath)  # a FIFO in the cache's place is refused, not opened (which would block)
    except NotRegularFileError:
        raise
    except OSError:  # none yet (or unreadable): rebuilt
        return None
    try:
        with cache:
            if fingerprint is None:
                fingerprint = _local_fingerprint(path)
                if os.fstat(cache.fileno()).st_mtime_ns < fingerprint[1]:
                    return None
            size, version = fingerprint
            with np.load(cache, allow_pickle=False) as z:
                meta = z["meta"]
                if str(z["magic"]) != CACHE_MAGIC or int(meta[0]) != CACHE_VERSION:
                    return None
                if int(meta[1]) != size or int(meta[2]) != version:
                    return None
                arrays = [np.asarray(z[k], dtype=np.uint64)
                          for k in ("offsets", "sizes", "keys", "first_lines", "rows")]
                id_mode = bool(meta[3])
    except Exception:  # damaged, truncated, foreign: never trusted
        return None
    why = _untrusted_cache_problem(path, arrays, id_mode, size, local=cache_dir is None)
    if why is not None:
        from recordkit.errors import warn
        warn(f"{cpath}: index cache of {path} ignored and rebuilt: {why}")
        return None
    return CTFIndex(*arrays, id_mode=id_mode, errors=[], error_count=0, file_size=size)


_SAMPLED_STARTS = 32
_MAX_GAPS = 10_000


def _untrusted_cache_problem(path: str, arrays, id_mode: bool, size: int, *, local: bool) -> str | None:
    """What is wrong with a cache whose (size, version) matches, or None. The cache is input
    like any other: its sequences must tile the file from the first one to the end (a gap would
    silently drop a sequence), keys must be unique (ids) or be the line numbers (line mode), row
    and line counts must fit the bytes (a huge count would become a huge allocation), and the
    first, last and a sample of offsets must start lines of the file."""
    offsets, sizes, keys, first_lines, rows = arrays
    n = len(offsets)
    if any(len(a) != n for a in arrays) or n == 0:
        return "its arrays differ in length or are empty"
    ends = offsets + sizes
    if np.any(sizes == 0) or np.any(ends < offsets) or (n > 1 and np.any(offsets[1:] < ends[:-1])) \
            or int(ends[-1]) > size:
        return "its sequences overlap or run past the end of the file"
    # gaps between sequences (blank lines in line mode) and at the end may hold no data: else a
    # dropped sequence would go unnoticed
    gap_at = np.concatenate([ends[:-1][offsets[1:] > ends[:-1]], [ends[-1]] if int(ends[-1]) < size else []])
    gap_end = np.concatenate([offsets[1:][offsets[1:] > ends[:-1]], [size] if int(ends[-1]) < size else []])
    if len(gap_at):
        if not local or len(gap_at) > _MAX_GAPS or int((gap_end - gap_at).sum()) > (1 << 20):
            return "it leaves gaps between sequences that cannot be checked cheaply"
        with open(path, "rb") as f:
            for a, b in zip(gap_at.astype(np.int64).tolist(), gap_end.astype(np.int64).tolist()):
                f.seek(a)
                if not _blank_or_comments(f.read(b - a)):
                    return f"bytes {a}..{b} between its sequences hold data"
    if np.any(rows == 0) or np.any(rows > sizes):
        return "a row count does not fit its sequence's bytes"
    if n > 1:
        steps = first_lines[1:].astype(np.int64) - first_lines[:-1].astype(np.int64)
        if np.any(steps < rows[:-1].astype(np.int64)) or np.any(steps > sizes[:-1].astype(np.int64)):
            return "its line numbers do not fit the row counts and bytes"
    if int(first_lines[0]) > int(offsets[0]) or (int(offsets[0]) == 0 and int(first_lines[0]) != 0):
        return "its first line number does not fit the bytes before it"
    if id_mode:
        if len(np.unique(keys)) != n:
            return "a sequence id appears twice"
    elif np.any(keys != first_lines):
        return "line-mode keys are not the line numbers"
    if local and offsets[0] > 0:
        lines = _preamble_lines(path, int(offsets[0]))
        if lines is None:
            return "the bytes before its first sequence hold data"
        if lines != int(first_lines[0]):
            return f"its first sequence starts on line {int(first_lines[0]) + 1}, the file says line {lines + 1}"
    if local:
        picks = np.unique(np.concatenate([[0, n - 1], np.linspace(0, n - 1, _SAMPLED_STARTS).astype(np.int64)]))
        with open(path, "rb") as f:
            for k in picks.tolist():
                at = int(offsets[k])
                if at == 0 or (k == 0 and at <= 3):
                    continue
                f.seek(at - 1)
                if f.read(1) not in (b"\n", b"\r"):
                    return f"sequence {k} does not start a line (byte offset {at})"
    return None


def write_cache(path: str, skip_sequence_ids: bool, index: CTFIndex, *, fingerprint=None, cache_dir=None) -> None:
    """Write the cache (temp file + rename, no fsync: a lost cache is rebuilt), best effort.

    Indexes that found errors are not cached, so the errors are reported again on
    the next open instead of silently disappearing.
    """
    if index.error_count:
        return
    cpath = cache_path(path, skip_sequence_ids, cache_dir)
    try:
        size, version = fingerprint if fingerprint is not None else _local_fingerprint(path)
        os.makedirs(os.path.dirname(os.path.abspath(cpath)), exist_ok=True)
        with AtomicFile(cpath, durable=False, keep_sidecar=True) as f:
            np.savez(f.file, magic=np.array(CACHE_MAGIC),
                     meta=np.array([CACHE_VERSION, size, version, int(index.id_mode)], dtype=np.int64),
                     offsets=index.offsets, sizes=index.sizes, keys=index.keys,
                     first_lines=index.first_lines, rows=index.rows)
    except Exception:
        pass  # best effort, like CNTK: a read-only directory just means no cache


def _preamble_lines(path: str, n: int) -> int | None:
    """The number of lines in the first ``n`` bytes of a CTF file if they are a BOM, blank and
    comment-only lines (what the scanner skips before the first sequence), else None. Long
    preambles are not trusted at all."""
    if n > (1 << 20):
        return None
    with open(path, "rb") as f:
        head = f.read(n)
    if head.startswith(_UTF8_BOM):
        head = head[len(_UTF8_BOM):]
    if not _blank_or_comments(head):
        return None
    return head.count(b"\n") if b"\n" in head else head.count(b"\r")


def _blank_or_comments(data: bytes) -> bool:
    """Whether ``data`` holds only blank and comment-only lines (no sequence data)."""
    return all(not line.strip() or line.strip().startswith(b"|#") for line in data.splitlines())
