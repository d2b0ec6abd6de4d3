"""Where a SINGA record store lives: one path (local or URL), resolved once, and its atomic output.

SINGA's stores are single files (a 0.1 shard directory holds one ``shard.dat``) read sequentially
and rewritten whole (``append`` copies the old tuples into the new file first), so a store needs
less than the multi-file formats: test, size, open for reading, publish one output.
"""
from __future__ import annotations

import os

from recordkit.storage.atomic import AtomicFile
from recordkit.storage.location import filesystem, is_url, local_path

_COPY_CHUNK = 1 << 20


class StoreLocation:
    """One store path, resolved once: knows how to test, size, open and publish it."""

    def __init__(self, path, storage_options=None):
        self.display = os.fspath(path) if not isinstance(path, str) else path
        self.storage_options = storage_options
        if is_url(self.display):
            self.fs, self.path = filesystem(self.display, storage_options)
        else:
            self.fs, self.path = None, local_path(self.display)

    def __str__(self) -> str:
        return self.display

    def exists(self) -> bool:
        return self.fs.exists(self.path) if self.fs else os.path.exists(self.path)

    def isdir(self) -> bool:
        return self.fs.isdir(self.path) if self.fs else os.path.isdir(self.path)

    def child(self, name: str) -> "StoreLocation":
        """``<dir>/name`` (SINGA 0.1 shard folders hold ``shard.dat``)."""
        loc = StoreLocation.__new__(StoreLocation)
        loc.fs = self.fs
        loc.storage_options = self.storage_options
        loc.path = (self.path.rstrip("/") + "/" + name) if self.fs else os.path.join(self.path, name)
        loc.display = self.display.rstrip("/") + "/" + name
        return loc

    def open_read(self):
        """A buffered binary file (retried ranged reads for URLs; checksum-verified when a
        ``.rkcrc`` sidecar exists)."""
        from recordkit.storage.source import open_file
        return open_file(self.display, storage_options=self.storage_options)

    def atomic_output(self, *, checksums: bool = False) -> "AtomicOutput":
        return AtomicOutput(self, checksums=checksums)


class AtomicOutput:
    """A binary output that replaces ``location`` only on ``commit()`` (``storage.atomic.AtomicFile``,
    which uploads URLs on commit)."""

    def __init__(self, location: StoreLocation, *, checksums: bool = False):
        self.location = location
        self._atomic = AtomicFile(location.display, storage_options=location.storage_options, checksums=checksums)
        self._file = self._atomic.file

    def write(self, data) -> int:
        return self._file.write(data)

    def copy_from(self, src, nbytes: int) -> None:
        """Copy the first ``nbytes`` of the readable binary file ``src`` (from its start)."""
        src.seek(0)
        left = nbytes
        while left > 0:
            block = src.read(min(_COPY_CHUNK, left))
            if not block:
                raise EOFError(f"{self.location}: the file shrank while it was being copied")
            self._file.write(block)
            left -= len(block)

    def flush(self) -> None:
        self._atomic.sync_data()

    def commit(self) -> None:
        self._atomic.commit()

    def discard(self) -> None:
        self._atomic.discard()
