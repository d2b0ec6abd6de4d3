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

from recordkit.storage.location import ensure_regular, filesystem, is_url, local_path, open_regular
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
                 info: dict | None = None):
        from recordkit.storage import range_cache
        self.name = url
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
        self._cache = None
        if cache_dir is not None:
            self._cache = range_cache.RangeCache(cache_dir, url, self.fingerprint)

    def note_opened(self, sidecar: bytes | None) -> None:
        """Record in the cache that this version (with this checksum sidecar) is what the store
        serves now: offline opens read that, and the bound may evict its ranges (they can be
        fetched again)."""
        if self._cache is not None and not self.offline:
            self._cache.record(self.size, self.fingerprint, self.info, sidecar)

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
    said of a remote file (``{"info": ..., "sidecar": bool}``): no request is made for either.
    """
    if is_url(path):
        source = RemoteSource(path, storage_options=storage_options, cache_dir=cache_dir, retry=retry,
                              info=None if known is None else known["info"])
    else:
        source = LocalSource(path)
    if not verify:
        return source
    from recordkit.storage import checksum
    try:
        if getattr(source, "recorded", None) is not None:  # offline: the sidecar the cache recorded
            from recordkit.storage.range_cache import sidecar_of
            data = sidecar_of(source.recorded)
        elif known is not None and not known.get("sidecar", True):
            data = None
        else:
            data = checksum.sidecar_bytes(source, storage_options=storage_options)
        if source.remote:
            source.note_opened(data)
        table = checksum.table_from(source, data)
    except BaseException:
        source.close()
        raise
    return source if table is None else checksum.VerifiedSource(source, table)


def read_ranges(source, ranges, *, threads: int = 10) -> list:
    """The bytes of every ``(offset, n)`` of ``ranges``, in order. A remote source is asked for
    them at once (up to ``threads`` requests in flight: s3fs's default connection pool holds 10, and
    more threads only wait for it), so a reader that needs many small ranges at open (CBF's
    per-chunk length tables) waits a few round trips, not one per range."""
    ranges = list(ranges)
    if not getattr(source, "remote", False) or len(ranges) <= 1:
        many = getattr(source, "pread_many", None)
        if many is not None and len(ranges) > 1:
            return many(ranges)
        return [source.pread(o, n) for o, n in ranges]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=min(threads, len(ranges)), thread_name_prefix="recordkit-ranges") as pool:
        return list(pool.map(lambda r: source.pread(r[0], r[1]), ranges))
