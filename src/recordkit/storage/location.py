"""Where bytes live: a local path or any fsspec URL (memory://, s3://, gs://, ...).

Local paths use the builtin ``open``/``os`` calls; URLs go through fsspec, imported only
when a URL is given. Output is always published atomically (``recordkit.atomic``): a
temporary is written and renamed (moved) over the target only when it is complete, so
readers never see half a file and a crash leaves the previous content in place (a stray
``*.part`` temporary may remain).

The directory helpers (``listdir``, ``makedirs``, ``remove``, ``join``) are what the
multi-file formats (OFRecord part directories) need to work on either kind of path.
"""
from __future__ import annotations

import os

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

    def child(self, name: str) -> "Location":
        """``<dir>/name`` (SINGA 0.1 shard folders hold ``shard.dat``)."""
        loc = Location.__new__(Location)
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
    """A binary output that replaces ``location`` only on ``commit()`` (``recordkit.atomic.AtomicFile``,
    which uploads URLs on commit)."""

    def __init__(self, location: Location, *, checksums: bool = False):
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


def join(directory: str, name: str) -> str:
    return directory.rstrip("/") + "/" + name if is_url(directory) else os.path.join(directory, name)


def ensure_regular(path, storage_options=None) -> None:
    """Refuse a local FIFO, device or socket up front with "not a regular file" (``stat`` never
    blocks; ``open`` on a FIFO does). Missing paths raise ``FileNotFoundError`` naming them;
    directories and URLs are left to the caller."""
    import stat
    from recordkit.errors import NotRegularFileError
    if is_url(path):
        return
    name = os.fspath(path)
    try:
        mode = os.stat(local_path(name)).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"{name}: no such file") from None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return
    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "special")
    raise NotRegularFileError(f"{name}: not a regular file ({kind})")


def isfile(path, storage_options=None) -> bool:
    if is_url(path):
        fs, p = filesystem(path, storage_options)
        return fs.isfile(p)
    return os.path.isfile(local_path(path))


def isdir(path, storage_options=None) -> bool:
    if is_url(path):
        fs, p = filesystem(path, storage_options)
        return fs.isdir(p)
    return os.path.isdir(local_path(path))


def listdir(path, storage_options=None) -> list[str]:
    """Names (not paths) of the entries of a directory."""
    if is_url(path):
        fs, p = filesystem(path, storage_options)
        return [e.rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(p, detail=False)]
    return os.listdir(local_path(path))


def makedirs(path, storage_options=None) -> None:
    if is_url(path):
        fs, p = filesystem(path, storage_options)
        fs.makedirs(p, exist_ok=True)
    else:
        os.makedirs(local_path(path), exist_ok=True)


def remove(path, storage_options=None) -> None:
    """Delete a file; a missing one is not an error."""
    if is_url(path):
        fs, p = filesystem(path, storage_options)
        try:
            fs.rm(p)
        except FileNotFoundError:
            pass
    else:
        try:
            os.unlink(local_path(path))
        except FileNotFoundError:
            pass


def file_size(f) -> int:
    """Size of an open seekable binary file, leaving it at offset 0."""
    f.seek(0, 2)
    size = f.tell()
    f.seek(0)
    return size


__all__ = ["Location", "AtomicOutput", "file_size", "is_url", "join", "isfile", "isdir", "listdir", "makedirs", "remove"]
