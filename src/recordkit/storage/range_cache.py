"""A local cache directory for ranges of remote files (``cache_dir=``), optionally bounded and offline.

Readers fetch a remote file by the ranges its index names (a CBF chunk, a CTF chunk, an
OFRecord block), and read the same ranges again every sweep, so the cache stores exactly
those ranges: one file per ``(offset, length)`` under a directory named after the URL and
the object's version. A new version of the object gets a new directory; stale ones are
never read (and can be deleted at will). The source stores a range only once it is known
to be of that version (``versions.RemotePin``), so a directory never holds another's bytes.
Entries are written to a temporary file and renamed, and an entry of the wrong length is
ignored, so an interrupted run cannot leave a cache that returns bad bytes.

Beside the version directories, one small ``<url key>.rkver`` file per URL records the
version last opened from the store (its size and ``info()`` answer, and its checksum sidecar
if it has one). It is what makes two things possible:

* ``offline``: a source opened offline takes its size and version from that record and
  serves every range from the cache, without a single request to the store; a range that is
  not cached is ``OfflineMissError`` naming the URL and the range. The version read is the
  one recorded, whatever the store holds now.
* ``limit``: the cache stays within ``limit`` bytes of ranges (least recently used ranges go
  first; a hit counts as a use). Only ranges of a version some record names as the one the
  store served last are evicted: those can be fetched again. Ranges of older versions (the
  only copy left of them), the records and anything else in the directory (indexes, other
  files) are never deleted; when they alone fill the limit, new ranges are simply not cached.

``CacheDir`` carries the directory with its limit and mode through every reader's
``cache_dir=`` argument (it is path-like, so code that only needs the directory keeps
working with ``os.fspath``).
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import threading

from recordkit.errors import RecordkitError, UsageError
from recordkit.storage.atomic import AtomicFile
from recordkit.storage.location import open_local

_ENTRY = re.compile(r"^[0-9a-f]{16}-[0-9a-f]+$")
_RECORD_SUFFIX = ".rkver"
_JSON_TYPES = (str, int, float, bool, type(None))


class OfflineMissError(RecordkitError):
    """Offline, a range (or a whole object) is not in the cache, and the store may not be asked."""


class CacheDir(os.PathLike):
    """A range cache directory with its bound (``limit``, bytes or a size such as ``"2GB"``; None:
    unbounded) and mode (``offline``: serve from the cache only). Accepted wherever ``cache_dir=``
    is."""

    def __init__(self, path, *, limit=None, offline: bool = False):
        if isinstance(path, CacheDir):
            limit = path.limit if limit is None else limit
            offline = path.offline or offline
            path = path.path
        self.path = os.fspath(path)
        self.limit = None if limit is None else _parse_limit(limit)
        self.offline = bool(offline)

    def __fspath__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"CacheDir({self.path!r}, limit={self.limit}, offline={self.offline})"


def cache_dir_of(cache_dir=None, *, cache_limit=None, offline: bool = False):
    """``cache_dir`` as given, or a ``CacheDir`` when a limit or offline mode is asked for;
    either without a directory is a ``UsageError``."""
    if cache_limit is None and not offline:
        return cache_dir
    if cache_dir is None:
        what = "offline reading" if offline else "a cache limit"
        raise UsageError(f"{what} needs a cache directory (cache_dir= / --cache-dir)")
    return CacheDir(cache_dir, limit=cache_limit, offline=offline)


def settings(cache_dir) -> tuple[int | None, bool]:
    """(limit, offline) of any ``cache_dir`` argument."""
    if isinstance(cache_dir, CacheDir):
        return cache_dir.limit, cache_dir.offline
    return None, False


def _parse_limit(limit) -> int:
    from recordkit.sizes import parse_size
    try:
        value = parse_size(limit)
    except ValueError as e:
        raise UsageError(f"cache limit: {e}") from None
    if value <= 0:
        raise UsageError(f"cache limit must be positive, not {limit!r}")
    return int(value)


def _url_key(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()[:24]


class RangeCache:
    def __init__(self, cache_dir, url: str, fingerprint: tuple):
        self.root = os.fspath(cache_dir)
        self.limit, self.offline = settings(cache_dir)
        self.url = url
        key = hashlib.sha256(f"{url}\0{fingerprint[0]}\0{fingerprint[1]}".encode()).hexdigest()[:24]
        self.key = key
        self.directory = os.path.join(self.root, key)
        if not self.offline:
            os.makedirs(self.directory, exist_ok=True)

    def _path(self, offset: int, n: int) -> str:
        return os.path.join(self.directory, f"{offset:016x}-{n:x}")

    def get(self, offset: int, n: int) -> bytes | None:
        path = self._path(offset, n)
        try:
            with open_local(path) as f:  # a FIFO in the cache is a miss, never a hang
                data = f.read(n + 1)
        except OSError:
            return None
        if len(data) != n:
            return None
        if self.limit is not None:
            _touch(path)  # least recently *used*: a hit keeps the range
        return data

    def put(self, offset: int, data: bytes) -> None:
        """Best effort: a full or read-only disk (or a limit only unfetchable entries fill) means
        no caching, not a failed read."""
        if self.offline:
            return
        if self.limit is None:
            self._write(offset, data)
            return
        with _lock:  # room made and filled at once: another thread's count must see this range
            if make_room(self.root, len(data), self.limit):
                self._write(offset, data)

    def _write(self, offset: int, data: bytes) -> None:
        try:
            with AtomicFile(self._path(offset, len(data)), durable=False, keep_sidecar=True) as f:
                f.write(data)
        except OSError:
            pass

    # -- the record of the version last opened ------------------------------------------------------
    def record(self, size: int, fingerprint: tuple, info: dict, sidecar: bytes | None,
               sidecar_version: str | None = None) -> None:
        """Note this version as the one the store serves now (what offline opens read), with its
        sidecar and, where known, the sidecar's ETag (``probe.look`` reuses the bytes while the
        store lists that ETag)."""
        write_record(self.root, self.url, {
            "url": self.url, "size": int(size), "fingerprint": [int(fingerprint[0]), int(fingerprint[1])],
            "directory": self.key, "info": {k: v for k, v in info.items() if isinstance(v, _JSON_TYPES)},
            "sidecar": None if sidecar is None else base64.b64encode(sidecar).decode(),
            "sidecar_version": sidecar_version})


def write_record(root: str, url: str, doc: dict) -> None:
    try:
        with AtomicFile(os.path.join(root, _url_key(url) + _RECORD_SUFFIX), durable=False, keep_sidecar=True) as f:
            f.write(json.dumps(doc).encode())
    except OSError:
        pass


def read_record(cache_dir, url: str) -> dict:
    """The version of ``url`` last opened through ``cache_dir`` (offline opens); ``OfflineMissError``
    when there is none."""
    root = os.fspath(cache_dir)
    path = os.path.join(root, _url_key(url) + _RECORD_SUFFIX)
    try:
        with open_local(path) as f:  # a FIFO is refused, never a hang
            doc = json.loads(f.read())
    except FileNotFoundError:
        raise OfflineMissError(f"{url}: not in the cache {root} (offline: the store is not asked; read it "
                               f"once online with this cache directory)") from None
    except (OSError, ValueError) as e:
        raise OfflineMissError(f"{url}: the cache record {path} is unreadable ({e})") from None
    if doc.get("url") != url:
        raise OfflineMissError(f"{url}: the cache record {path} is of another URL ({doc.get('url')!r})")
    return doc


def sidecar_of(doc: dict) -> bytes | None:
    raw = doc.get("sidecar")
    return None if raw is None else base64.b64decode(raw)


# -- the bound ----------------------------------------------------------------------------------------------
_lock = threading.Lock()
_totals: dict = {}  # cache root -> bytes of ranges as last counted plus what this process added since


def _touch(path: str) -> None:
    try:
        os.utime(path)
    except OSError:
        pass


def _records(root: str):
    """Every readable record of ``root`` (the version of each URL opened through it)."""
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        if name.endswith(_RECORD_SUFFIX):
            try:
                with open_local(os.path.join(root, name)) as f:  # a FIFO is skipped, never a hang
                    doc = json.loads(f.read())
            except (OSError, ValueError):
                continue
            if isinstance(doc, dict):
                yield doc


def current_directories(root: str) -> set[str]:
    """Version directories a record names as the version the store served last: their ranges can
    be fetched again, so they are the only ones the bound may evict."""
    return {str(doc.get("directory")) for doc in _records(root)}


def recorded_files(cache_dir, directory: str) -> dict[str, int]:
    """``{name: size}`` of the files directly in the remote ``directory`` that the cache holds a
    record of: offline, the directory's listing as far as it was read online."""
    base = directory.rstrip("/") + "/"
    out = {}
    for doc in _records(os.fspath(cache_dir)):
        url, size = doc.get("url"), doc.get("size")
        if isinstance(url, str) and url.startswith(base) and "/" not in url[len(base):] and isinstance(size, int):
            out[url[len(base):]] = size
    return out


def entries(root: str):
    """Every cached range: (path, size, last use, evictable)."""
    current = current_directories(root)
    try:
        dirs = [e for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    out = []
    for d in dirs:
        try:
            files = list(os.scandir(d.path))
        except OSError:
            continue
        for e in files:
            if _ENTRY.match(e.name) and e.is_file(follow_symlinks=False):
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                out.append((e.path, st.st_size, st.st_mtime_ns, d.name in current))
    return out


def plan(cache_dir, sweep_bytes: int) -> dict | None:
    """What ``recordkit plan`` says of the range cache for a reader that reads ``sweep_bytes`` of
    remote files a sweep: its directory, bound and mode, what it holds now, and how much of a
    sweep can stay cached (the rest is fetched again every sweep)."""
    if cache_dir is None:
        return None
    limit, offline = settings(cache_dir)
    keep = sweep_bytes if limit is None else min(limit, sweep_bytes)
    return {"directory": os.fspath(cache_dir), "limit": limit, "offline": offline,
            "cached_bytes": cached_bytes(cache_dir), "sweep_bytes": int(sweep_bytes), "kept_bytes": int(keep),
            "refetched_bytes_per_sweep": int(sweep_bytes - keep)}


def cached_bytes(cache_dir) -> int:
    """Bytes of ranges in the cache (what ``limit`` bounds)."""
    return sum(size for _, size, _, _ in entries(os.fspath(cache_dir)))


def make_room(root: str, need: int, limit: int) -> bool:
    """Evict least recently used fetchable ranges until ``need`` more bytes fit under ``limit``;
    False when they cannot (the new range is then not cached). Called holding ``_lock``."""
    if need > limit:
        return False
    known = _totals.get(root)
    if known is not None and known + need <= limit:
        _totals[root] = known + need
        return True
    found = entries(root)  # counted again whenever the bound is reached: other processes write too
    total = sum(size for _, size, _, _ in found)
    if total + need <= limit:
        _totals[root] = total + need
        return True
    for path, size, _, evictable in sorted(found, key=lambda e: e[2]):
        if not evictable:
            continue
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:
            continue
        total -= size
        if total + need <= limit:
            _totals[root] = total + need
            return True
    _totals[root] = total
    return False
