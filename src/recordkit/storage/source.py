"""Byte sources: where a reader's bytes come from (a local file or an fsspec URL).

Readers of the binary and text formats only ever need two things from a file: its size
and the bytes of a range (``pread``). Keeping that the whole interface lets one reader
serve local disks and object stores alike, and gives a single place for what remote
storage needs on top: retries (``retry.RetryPolicy``), a local cache of the ranges
already fetched (``range_cache.RangeCache``), and checksum verification when a
``.rkcrc`` sidecar is present (``checksum.VerifiedSource``).

``pread`` follows ``os.pread``: it returns fewer bytes only at the end of the file, so
readers detect a file truncated under them the same way for every source. Every range is
of the version the source was opened on (``versions.py``): a file or object replaced
mid-sweep is ``SourceChangedError``, never a mix of two versions.
"""
from __future__ import annotations

import hashlib
import io
import os

from recordkit.storage.location import (DEFAULT_IN_FLIGHT, ensure_regular, filesystem, is_url, local_path,
                                       open_regular, requests_in_flight)
from recordkit.storage.retry import RetryPolicy, ShortRead
from recordkit.storage.versions import RemotePin, check_local


class LocalSource:
    """A local file read with ``os.pread`` (thread safe, no shared file position).

    The descriptor pins the file opened (a replacement renamed over it is not seen); a
    rewrite in place or a truncation is caught by one ``fstat`` after each whole read
    (``versions.py``). A short read is left to the reader, which reports the file shrinking."""

    remote = False

    def __init__(self, path):
        self.name = os.fspath(path)
        self.local_path = local_path(self.name)
        self._fd = open_regular(self.name)  # a FIFO is refused, never opened blocking
        st = os.fstat(self._fd)
        self.size = st.st_size
        self.fingerprint = (st.st_size, st.st_mtime_ns)
        self._opened = st
        self.stats = {"fetches": 0, "bytes": 0}

    def pread(self, offset: int, n: int, *, cache: bool = True) -> bytes:
        data = os.pread(self._fd, n, offset)
        if len(data) == n:
            check_local(self.name, self._fd, self._opened, offset, offset + n)
        return data

    def pread_many(self, ranges) -> list[bytes]:
        """``pread`` of each ``(offset, n)``, the file checked once after all of them (a reader's
        per-chunk tables are hundreds of small reads: an ``fstat`` each cost as much as the read)."""
        out = [os.pread(self._fd, n, offset) for offset, n in ranges]
        full = [(offset, offset + n) for (offset, n), data in zip(ranges, out) if len(data) == n]
        if full:
            check_local(self.name, self._fd, self._opened, min(a for a, _ in full), max(b for _, b in full))
        return out

    def pread_into(self, offset: int, view) -> int:
        """Read ``len(view)`` bytes at ``offset`` into the writable buffer ``view``; the count read
        (fewer only at the end of the file). Lets a reader reuse one buffer for many reads: a fresh
        33 MB bytes object per chunk costs as much in page faults as the read itself."""
        view = memoryview(view).cast("B")
        total, n = 0, len(view)
        while total < n:
            got = os.preadv(self._fd, [view[total:]], offset + total)
            if got == 0:
                break
            total += got
        if total == n:
            check_local(self.name, self._fd, self._opened, offset, offset + n)
        return total

    def current_size(self) -> int:
        return os.fstat(self._fd).st_size

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class RemoteSource:
    """An object behind an fsspec URL, read by byte ranges with retries and an optional cache.

    Size and version (ETag, version id, else modification time) are read once at open:
    every later range is asked of that size and of that version (``versions.RemotePin``),
    so a sweep never mixes two versions of the object, and the cache, keyed by that
    version, only ever stores ranges of it.
    """

    remote = True
    local_path = None

    def __init__(self, url: str, *, storage_options=None, cache_dir=None, retry: RetryPolicy | None = None,
                 info: dict | None = None, blocks=()):
        from recordkit.storage import range_cache
        self.name = url
        # ranges of this version already fetched (``probe.look``'s first and last block): served
        # from memory, each into the cache when first read through it
        self._held = list(blocks)
        self.retry = retry or RetryPolicy.default()
        self.stats = {"fetches": 0, "bytes": 0, "retries": 0, "cache_hits": 0}
        self.offline = range_cache.settings(cache_dir)[1]
        self.recorded = None  # offline: the cache's record of the version read
        if self.offline:  # not a single request: size and version are the cache's record
            self.fs = self._path = None
            self.recorded = range_cache.read_record(cache_dir, url)
            info = dict(self.recorded["info"], size=self.recorded["size"])
        else:
            self.fs, self._path = filesystem(url, storage_options)
        if info is None:  # else the caller's listing already said (``SourcePool``)
            try:
                info = self.retry.call(lambda: self.fs.info(self._path), what=url, stats=self.stats)
            except FileNotFoundError:  # fsspec's message is the bare path: say it as local files do
                raise FileNotFoundError(f"{url}: no such file") from None
        if info.get("type") == "directory":
            raise IsADirectoryError(f"{url}: is a directory")
        self.info = info
        self.size = int(info["size"])
        version = str(info.get("ETag") or info.get("etag") or info.get("LastModified") or info.get("mtime")
                      or info.get("created") or "")
        self.fingerprint = (self.size, int.from_bytes(hashlib.sha256(version.encode()).digest()[:7], "little"))
        if self.recorded is not None:  # the version as recorded (the record keeps only JSON-able fields)
            self.fingerprint = tuple(self.recorded["fingerprint"])
        self._pin = None if self.offline else RemotePin(url, self._path, info, self.fs)
        self.in_flight = DEFAULT_IN_FLIGHT if self.fs is None else requests_in_flight(self.fs)
        self._cache = None
        if cache_dir is not None:
            self._cache = range_cache.RangeCache(cache_dir, url, self.fingerprint)

    def note_opened(self, sidecar: bytes | None, sidecar_version: str | None = None) -> None:
        """Record in the cache that this version (with this checksum sidecar) is what the store
        serves now: offline opens read that, and the bound may evict its ranges (they can be
        fetched again)."""
        if self._cache is not None and not self.offline:
            self._cache.record(self.size, self.fingerprint, self.info, sidecar, sidecar_version)

    def pread(self, offset: int, n: int, *, cache: bool = True) -> bytes:
        want = max(0, min(int(n), self.size - int(offset)))
        if want == 0:
            return b""
        use_cache = cache and self._cache is not None
        if use_cache:
            hit = self._cache.get(offset, want)
            if hit is not None:
                self.stats["cache_hits"] += 1
                return hit
        held = self._from_held(offset, want)
        if held is not None:
            if use_cache:
                self._cache.put(offset, held)
            return held
        if self.offline:
            from recordkit.storage.range_cache import OfflineMissError
            where = "" if self._cache is None else f" {self._cache.root}"
            raise OfflineMissError(f"{self.name}: bytes {offset}..{offset + want} are not in the cache{where} "
                                   f"(offline: the store is not asked)")

        def fetch() -> bytes:
            data = self._pin.read(self.fs, offset, offset + want)
            if len(data) != want:
                raise ShortRead(f"got {len(data)} of {want} bytes")
            return data

        data = self.retry.call(fetch, what=f"{self.name}: bytes {offset}..{offset + want}", stats=self.stats)
        self.stats["fetches"] += 1
        self.stats["bytes"] += len(data)
        if use_cache:
            self._cache.put(offset, data)
        return data

    def _from_held(self, offset: int, n: int) -> bytes | None:
        """``offset..offset+n`` from the held ranges (several together when they overlap or meet:
        a file of 64-128 KiB is its first and last block), None unless they cover all of it."""
        parts, at, end = [], offset, offset + n
        for start, data in sorted(self._held, key=lambda b: b[0]):
            if start <= at < start + len(data):
                parts.append(data[at - start:min(end, start + len(data)) - start])
                at = start + len(data)
                if at >= end:
                    return b"".join(parts)
        return None

    def pread_ranges(self, ranges: list, *, threads: int | None = None, merge: bool = True) -> list:
        """The bytes of every ``(offset, n)`` of ``ranges``, in order, in as few requests as
        ``merge_ranges`` allows (``merge=False``: a request each), up to ``threads`` (default
        ``in_flight``) at once. A request spanning several ranges reads the bytes between them too,
        but caches only the ranges asked (what a warm open asks again), not the bytes between (the
        chunks, cached when read)."""
        out: list = [None] * len(ranges)
        missing = []
        for i, (offset, n) in enumerate(ranges):
            want = max(0, min(int(n), self.size - int(offset)))
            hit = self._cache.get(offset, want) if self._cache is not None and want else None
            if hit is None and want:
                hit = self._from_held(offset, want)
                if hit is not None and self._cache is not None:
                    self._cache.put(offset, hit)
            if want == 0:
                out[i] = b""
            elif hit is not None:
                self.stats["cache_hits"] += 1
                out[i] = hit
            else:
                missing.append(i)
        if self.offline or not merge:  # every range as its own (offline: a miss is an error naming it)
            groups = [[i] for i in missing]
        else:
            groups = [[missing[k] for k in g] for g in merge_ranges([ranges[i] for i in missing])]

        def fetch(group):
            if len(group) == 1:
                return [self.pread(*ranges[group[0]])]
            lo = min(ranges[i][0] for i in group)
            hi = min(self.size, max(ranges[i][0] + ranges[i][1] for i in group))
            data = self.pread(lo, hi - lo, cache=False)
            parts = [data[ranges[i][0] - lo:ranges[i][0] - lo + ranges[i][1]] for i in group]
            if self._cache is not None:
                for i, part in zip(group, parts):
                    self._cache.put(ranges[i][0], part)
            return parts
        for group, parts in zip(groups, concurrently(fetch, groups, threads or self.in_flight)):
            for i, part in zip(group, parts):
                out[i] = part
        return out

    def current_size(self) -> int:
        return self.size

    def close(self) -> None:
        pass


class SourceFile(io.RawIOBase):
    """A read-only, seekable file object over a byte source, for readers that stream
    (SINGA stores): they get retries, the range cache and checksum verification too.
    Wrap it in ``io.BufferedReader`` (``open_file``) for small reads. ``owns=False``: closing the
    file leaves the source open (a source shared by several files, ``storage.pool``). ``cache``:
    keep the ranges read in the source's range cache, for readers whose reads fall on the same
    ranges every time (Parquet's footer and column chunks), not for streaming ones."""

    def __init__(self, source, *, owns: bool = True, cache: bool = False):
        super().__init__()
        self.source = source
        self.owns = owns
        self.cache = cache
        self.name = source.name
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self.source.size}[whence]
        if base + offset < 0:
            raise ValueError(f"{self.name}: negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def readinto(self, b) -> int:
        data = self.source.pread(self._pos, len(b), cache=self.cache)
        n = len(data)
        memoryview(b).cast("B")[:n] = data
        self._pos += n
        return n

    def close(self) -> None:
        if not self.closed and self.owns:
            self.source.close()
        super().close()


def plain_local_path(path) -> str | None:
    """The local path of ``path`` when nothing stands between a library and the file (a local file
    without a checksum sidecar: Arrow may open or map it itself), else None (a URL, or a sidecar to
    verify against: read through ``open_source``). The file and its sidecar both pass the
    regular-file check first, so whatever opens the path next never blocks on a FIFO."""
    if is_url(path):
        return None
    from recordkit.storage.location import has_file, sidecar_path
    ensure_regular(path)
    return None if has_file(sidecar_path(path)) else local_path(path)


def open_file(path, *, storage_options=None, buffer_size: int = 1 << 20):
    """``open(path, "rb")`` for local paths and URLs alike, through ``open_source``.

    A local file without a checksum sidecar is a plain file object (nothing to add); otherwise
    reads go through the source in ``buffer_size`` ranges (one request each for a URL, whole
    checksum blocks when verifying)."""
    plain = plain_local_path(path)
    if plain is not None:
        return os.fdopen(open_regular(path), "rb")
    return io.BufferedReader(SourceFile(open_source(path, storage_options=storage_options)), buffer_size=buffer_size)


def open_source(path, *, storage_options=None, cache_dir=None, retry: RetryPolicy | None = None,
                verify: bool = True, known: dict | None = None):
    """A byte source for ``path`` (local path or fsspec URL), checksum-verified when a sidecar exists.

    ``cache_dir`` keeps the ranges fetched from a remote file on the local disk (ignored for
    local files; a ``range_cache.CacheDir`` bounds it or reads offline); ``verify=False`` skips
    the sidecar lookup (for tools that rebuild it). ``known``: what a directory listing already
    said of a remote file (``{"info": ..., "sidecar": bool}``, and optionally the sidecar's bytes
    ``"sidecar_data"`` and ranges of the file ``"blocks"``): no request is made for any of it. By
    default it is what the look of the open under way found (``storage/probe.py``).
    """
    from recordkit.storage import checksum, range_cache
    probe = None  # a remote file's sidecar, asked while its size and version are (one round trip for both)
    if is_url(path):
        offline = range_cache.settings(cache_dir)[1]
        if known is None and not offline:
            from recordkit.storage.looked import current
            looked = current(path)
            known = None if looked is None else looked.known_file()
        if verify and known is None and not offline:
            probe = _in_background(checksum.sidecar_bytes_of, path, storage_options=storage_options)
        source = RemoteSource(path, storage_options=storage_options, cache_dir=cache_dir, retry=retry,
                              info=None if known is None else known["info"],
                              blocks=() if known is None else known.get("blocks", ()))
    else:
        source = LocalSource(path)
    if not verify:
        return source
    try:
        if getattr(source, "recorded", None) is not None:  # offline: the sidecar the cache recorded
            data = range_cache.sidecar_of(source.recorded)
        elif known is not None and not known.get("sidecar", True):
            data = None
        elif known is not None and known.get("sidecar_data") is not None:
            data = known["sidecar_data"]
        elif probe is not None:
            data = probe.result()
        else:
            data = checksum.sidecar_bytes(source, storage_options=storage_options)
        if source.remote:
            source.note_opened(data, None if known is None else known.get("sidecar_version"))
        table = checksum.table_from(source, data)
    except BaseException:
        source.close()
        raise
    return source if table is None else checksum.VerifiedSource(source, table)


def _in_background(fn, *args, **kw):
    """A future of ``fn(*args, **kw)``, run on a thread of its own."""
    from concurrent.futures import ThreadPoolExecutor
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="recordkit-sidecar")
    try:
        return pool.submit(fn, *args, **kw)
    finally:
        pool.shutdown(wait=False)


# ranges at most this far apart are asked in one request, the bytes between them read and dropped:
# a round trip to an object store (20-100 ms) costs as much as 1-10 MB of transfer
MERGE_GAP = 1 << 20
# ... but no request longer than this (unless one range is): what a reader's open holds per request
MAX_SPAN = 4 << 20


def merge_ranges(ranges, *, gap: int | None = None, span: int | None = None) -> list[list[int]]:
    """The indexes of ``ranges`` (``(offset, n)`` pairs) grouped into runs to fetch in one request
    each: sorted by offset, a range joins the run before it when it starts at most ``gap`` bytes
    after the run's end and the run stays within ``span`` bytes (``MERGE_GAP``, ``MAX_SPAN``)."""
    gap = MERGE_GAP if gap is None else gap
    span = MAX_SPAN if span is None else span
    groups: list[list[int]] = []
    lo = hi = 0
    for i in sorted(range(len(ranges)), key=lambda k: ranges[k][0]):
        offset, n = int(ranges[i][0]), int(ranges[i][1])
        if groups and offset <= hi + gap and max(hi, offset + n) - lo <= span:
            groups[-1].append(i)
            hi = max(hi, offset + n)
        else:
            groups.append([i])
            lo, hi = offset, offset + n
    return groups


def concurrently(fn, items, threads: int) -> list:
    """``[fn(item) for item in items]``, up to ``threads`` at once (the calls wait for a store)."""
    items = list(items)
    if len(items) <= 1 or threads <= 1:
        return [fn(item) for item in items]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=min(threads, len(items)), thread_name_prefix="recordkit-ranges") as pool:
        return list(pool.map(fn, items))


def read_ranges(source, ranges, *, threads: int | None = None, merge: bool = True) -> list:
    """The bytes of every ``(offset, n)`` of ``ranges``, in order. A remote source is asked for
    them at once, nearby ranges in one request (``RemoteSource.pread_ranges``), up to as many
    requests in flight as its filesystem holds connections (``threads``: how many instead): a reader
    that needs many small ranges at open (CBF's per-chunk length tables) waits a round trip or
    two, not one per range. ``merge=False`` asks for each range alone: chunk data, where the bytes
    between (another partition's chunks) would be fetched for nothing. A local source reads them in
    turn (a ``pread`` costs no round trip)."""
    ranges = list(ranges)
    if not getattr(source, "remote", False) or len(ranges) <= 1:
        many = getattr(source, "pread_many", None)
        if many is not None and len(ranges) > 1:
            return many(ranges)
        return [source.pread(o, n) for o, n in ranges]
    many = getattr(source, "pread_ranges", None)
    if many is not None:
        return many(ranges, threads=threads, merge=merge)
    threads = getattr(source, "in_flight", DEFAULT_IN_FLIGHT) if threads is None else threads
    return concurrently(lambda r: source.pread(r[0], r[1]), ranges, threads)


class Prefetched:
    """A source with a few of its ranges already fetched (at once: ``read_ranges``), for a
    reader's open: what falls inside them is answered from memory, the rest from the source.
    A CBF open fetches its first and last block this way, one round trip for its prefix, header
    and offset table instead of one each."""

    def __init__(self, source, ranges):
        self.source = source
        self.name, self.size, self.remote = source.name, source.size, source.remote
        self.in_flight = getattr(source, "in_flight", DEFAULT_IN_FLIGHT)
        ranges = [(int(o), int(n)) for o, n in ranges]
        # each its own request (not merged with the bytes between: those are read when needed)
        fetched = concurrently(lambda r: source.pread(r[0], r[1]), ranges, len(ranges))
        self.blocks = [(o, data) for (o, _), data in zip(ranges, fetched)]

    def _held(self, offset: int, n: int):
        for start, data in self.blocks:
            if start <= offset and offset + n <= start + len(data):
                return data[offset - start:offset - start + n]
        return None

    def pread(self, offset: int, n: int, **kw) -> bytes:
        held = self._held(offset, n)
        return held if held is not None else self.source.pread(offset, n, **kw)

    def pread_ranges(self, ranges: list, *, threads: int | None = None, merge: bool = True) -> list:
        out = [self._held(o, n) for o, n in ranges]
        rest = [i for i, data in enumerate(out) if data is None]
        for i, data in zip(rest, read_ranges(self.source, [ranges[i] for i in rest], threads=threads, merge=merge)):
            out[i] = data
        return out
