"""The files of one data set, each opened once per reader: metadata read once per open.

A sharded data set (MDS, WebDataset, TFRecord parts) is read one whole shard per chunk load.
Opening each shard's source at each load asked the store for the shard's size and version
(a HEAD) and probed for its checksum sidecar every time: on an object store, two metadata
requests per shard per sweep on top of the data, and the only requests left in a sweep served
from a warm cache. ``SourcePool`` lists the data set's directory once (one request gives every
object's size, version and which sidecars exist), answers "is this a file" from that listing,
and keeps every remote source it opened until the reader closes, so a shard's version is pinned
for the reader's life (``versions.py``) and a warm sweep makes no request at all.

Local files are opened per read (an open descriptor per shard of a large data set would run
into the process's file limit, and a local open costs no round trip).
"""
from __future__ import annotations

import threading

from recordkit.errors import FormatError
from recordkit.storage import location
from recordkit.storage.location import SIDECAR_SUFFIX, is_url
from recordkit.storage.range_cache import OfflineMissError, read_record, recorded_files, settings
from recordkit.storage.source import open_source


def whole(src, path: str) -> bytes:
    """Every byte of the open source ``src``; a file that shrinks while read is a located error."""
    size = src.size
    data = src.pread(0, size)
    if len(data) != size:
        raise FormatError(path, f"file shrank while being read: expected {size} bytes, got {len(data)}",
                          offset=len(data))
    return data


class SourcePool:
    def __init__(self, directory: str | None, *, storage_options=None, cache_dir=None):
        """``directory``: the data set's directory, listed once if remote (None: a single file)."""
        self.directory = directory
        self.storage_options = storage_options
        self.cache_dir = cache_dir
        self.offline = settings(cache_dir)[1]
        self._known: dict[str, dict] | None = None  # URL -> {"info", "sidecar"} from the listing
        self._open: dict[str, object] = {}
        self._lock = threading.Lock()
        if directory is not None and is_url(directory) and not self.offline:
            self._known = self._list(directory)

    def _list(self, directory: str) -> dict:
        from recordkit.storage.retry import RetryPolicy
        from recordkit.storage.looked import current_directory
        looked = current_directory(directory)  # the open's look listed it already
        if looked is not None:
            listing = looked.entries
        else:
            fs, p = location.filesystem(directory, self.storage_options)
            try:
                listing = RetryPolicy.default().call(lambda: fs.ls(p, detail=True), what=directory)
            except (FileNotFoundError, NotADirectoryError):
                return {}
        base = directory.rstrip("/")
        names = {e["name"].rstrip("/").rsplit("/", 1)[-1]: e for e in listing}
        return {f"{base}/{name}": {"info": e, "sidecar": name + SIDECAR_SUFFIX in names}
                for name, e in names.items() if e.get("type") != "directory"}

    def _listed(self, path: str) -> bool:
        return self._known is not None and path.startswith(self.directory.rstrip("/") + "/")

    def _entry(self, path: str) -> dict | None:
        return self._known.get(path) if self._listed(path) else None

    def isfile(self, path: str) -> bool:
        if path in self._open:
            return True
        if self.offline and is_url(path):
            try:
                read_record(self.cache_dir, path)
                return True
            except OfflineMissError:
                return False
        if self._listed(path):
            return path in self._known
        return location.has_file(path, self.storage_options)  # a local FIFO is refused, never called missing

    def sizes(self) -> dict[str, int] | None:
        """``{name: size}`` of the regular files in the remote directory, from the one listing
        (offline: the files the cache holds a record of), for checking a description's shard list
        against it without another request; None for a local directory (listed where checked)."""
        if self.directory is None or not is_url(self.directory):
            return None
        if self.offline:
            return recorded_files(self.cache_dir, self.directory)
        base = self.directory.rstrip("/") + "/"
        return {url[len(base):]: int(e["info"].get("size") or 0) for url, e in (self._known or {}).items()
                if e["info"].get("type") == "file"}

    def source(self, path: str):
        """The source of ``path``: a remote one opened once and kept; a local one fresh (the caller
        closes it with ``release``)."""
        if not is_url(path):
            return open_source(path, storage_options=self.storage_options, cache_dir=self.cache_dir)
        with self._lock:
            src = self._open.get(path)
            if src is None:
                src = self._open[path] = open_source(path, storage_options=self.storage_options,
                                                     cache_dir=self.cache_dir, known=self._entry(path))
        return src

    def release(self, src) -> None:
        if not getattr(src, "remote", False):
            src.close()

    def size(self, path: str) -> int:
        src = self.source(path)
        try:
            return src.size
        finally:
            self.release(src)

    def read_whole(self, path: str) -> bytes:
        """A whole file (a shard is one chunk); a file that shrinks while read is a located error."""
        src = self.source(path)
        try:
            return whole(src, path)
        finally:
            self.release(src)

    def close(self) -> None:
        with self._lock:
            opened, self._open = list(self._open.values()), {}
        for src in opened:
            src.close()
