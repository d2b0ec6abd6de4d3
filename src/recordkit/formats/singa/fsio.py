"""Where a store's bytes live: a local path or any fsspec URL (memory://, s3://, ...).

Local paths use the builtin ``open`` and ``recordkit.atomic.AtomicFile``; URLs go through
fsspec, imported only when a URL is given (fsspec is an optional dependency). Output is
always published atomically: a temporary sibling object is written and renamed (moved)
over the target only when the store is closed, so readers never see half a store and a
crash leaves the previous content in place (a stray ``*.part`` temporary may remain).
"""
from __future__ import annotations

import os
import uuid

from recordkit.atomic import AtomicFile

_COPY_CHUNK = 1 << 20


def is_url(path) -> bool:
    return isinstance(path, str) and "://" in path and not path.startswith("file://")


def local_path(path) -> str:
    path = os.fspath(path)
    return path[len("file://"):] if path.startswith("file://") else path


def filesystem(path, storage_options=None):
    """(fs, path-within-fs) for a URL."""
    try:
        from fsspec.core import url_to_fs
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(f"{path}: URLs need fsspec (pip install fsspec)") from e
    return url_to_fs(path, **(storage_options or {}))


class Location:
    """One store path, resolved once: knows how to test, size, open and publish it."""

    def __init__(self, path, storage_options=None):
        self.display = os.fspath(path) if not isinstance(path, str) else path
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

    def child(self, name: str) -> "Location":
        """``<dir>/name`` (SINGA 0.1 shard folders hold ``shard.dat``)."""
        loc = Location.__new__(Location)
        loc.fs = self.fs
        loc.path = (self.path.rstrip("/") + "/" + name) if self.fs else os.path.join(self.path, name)
        loc.display = self.display.rstrip("/") + "/" + name
        return loc

    def open_read(self):
        if self.fs:
            return self.fs.open(self.path, "rb")
        return open(self.path, "rb")

    def atomic_output(self) -> "AtomicOutput":
        return AtomicOutput(self)


class AtomicOutput:
    """A binary output that replaces ``location`` only on ``commit()``.

    Local: ``AtomicFile`` (temp file in the same directory, fsync, rename). fsspec: a
    ``<name>.<random>.part`` sibling, then ``fs.mv`` over the target; on object stores
    (S3) the object appears only once its upload completes, so the target is never partial.
    """

    def __init__(self, location: Location):
        self.location = location
        if location.fs is None:
            self._local = AtomicFile(location.path)
            self._file = self._local.file
        else:
            self._local = None
            self.tmp_path = f"{location.path}.{uuid.uuid4().hex[:12]}.part"
            self._file = location.fs.open(self.tmp_path, "wb")
        self._done = False

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
        if self._local is not None:
            self._local.sync_data()
        else:
            self._file.flush()

    def commit(self) -> None:
        if self._done:
            return
        self._done = True
        if self._local is not None:
            self._local.commit()
            return
        self._file.close()
        fs = self.location.fs
        fs.mv(self.tmp_path, self.location.path)

    def discard(self) -> None:
        if self._done:
            return
        self._done = True
        if self._local is not None:
            self._local.discard()
            return
        try:
            self._file.close()
        finally:
            try:
                self.location.fs.rm(self.tmp_path)
            except (FileNotFoundError, OSError):
                pass


def file_size(f) -> int:
    """Size of an open seekable binary file, leaving it at offset 0."""
    f.seek(0, 2)
    size = f.tell()
    f.seek(0)
    return size


__all__ = ["Location", "AtomicOutput", "file_size", "is_url"]
