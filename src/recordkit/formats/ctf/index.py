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

from recordkit.atomic import AtomicFile
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
    while True:
        if filled == len(buf):
            buf.extend(bytes(len(buf)))  # one line longer than the buffer: grow
        want = min(len(buf) - filled, max(0, size - pos))
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
    cpath = cache_path(path, skip_sequence_ids, cache_dir)
    try:
        if fingerprint is None:
            fingerprint = _local_fingerprint(path)
            if os.stat(cpath).st_mtime_ns < fingerprint[1]:
                return None
        size, version = fingerprint
        with np.load(cpath, allow_pickle=False) as z:
            meta = z["meta"]
            if str(z["magic"]) != CACHE_MAGIC or int(meta[0]) != CACHE_VERSION:
                return None
            if int(meta[1]) != size or int(meta[2]) != version:
                return None
            arrays = [np.asarray(z[k], dtype=np.uint64) for k in ("offsets", "sizes", "keys", "first_lines", "rows")]
            id_mode = bool(meta[3])
    except Exception:  # damaged, truncated, foreign: never trusted
        return None
    offsets, sizes = arrays[0], arrays[1]
    n = len(offsets)
    if any(len(a) != n for a in arrays) or n == 0:
        return None
    ends = offsets + sizes
    if ends.max() > size or (n > 1 and np.any(offsets[1:] < ends[:-1])) or np.any(sizes == 0):
        return None
    return CTFIndex(*arrays, id_mode=id_mode, errors=[], error_count=0, file_size=size)


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
