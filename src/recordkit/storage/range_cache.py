"""A local cache directory for ranges of remote files (``cache_dir=``).

Readers fetch a remote file by the ranges its index names (a CBF chunk, a CTF chunk, an
OFRecord block), and read the same ranges again every sweep, so the cache stores exactly
those ranges: one file per ``(offset, length)`` under a directory named after the URL and
the object's version. A new version of the object gets a new directory; stale ones are
never read (and can be deleted at will). The source stores a range only once it is known
to be of that version (``versions.RemotePin``), so a directory never holds another's bytes. Entries are written to a temporary file and
renamed, and an entry of the wrong length is ignored, so an interrupted run cannot leave
a cache that returns bad bytes.
"""
from __future__ import annotations

import hashlib
import os

from recordkit.storage.atomic import AtomicFile


class RangeCache:
    def __init__(self, cache_dir, url: str, fingerprint: tuple):
        key = hashlib.sha256(f"{url}\0{fingerprint[0]}\0{fingerprint[1]}".encode()).hexdigest()[:24]
        self.directory = os.path.join(os.fspath(cache_dir), key)
        os.makedirs(self.directory, exist_ok=True)

    def _path(self, offset: int, n: int) -> str:
        return os.path.join(self.directory, f"{offset:016x}-{n:x}")

    def get(self, offset: int, n: int) -> bytes | None:
        from recordkit.storage.location import open_local
        try:
            with open_local(self._path(offset, n)) as f:  # a FIFO in the cache is a miss, never a hang
                data = f.read(n + 1)
        except OSError:
            return None
        return data if len(data) == n else None

    def put(self, offset: int, data: bytes) -> None:
        """Best effort: a full or read-only disk means no caching, not a failed read."""
        try:
            with AtomicFile(self._path(offset, len(data)), durable=False, keep_sidecar=True) as f:
                f.write(data)
        except OSError:
            pass
