"""Where bytes live: a local path or any fsspec URL (memory://, s3://, gs://, ...).

Local paths use the builtin ``open``/``os`` calls; URLs go through fsspec, imported only
when a URL is given. Output is always published atomically (``storage/atomic.py``): a
temporary is written and renamed (moved) over the target only when it is complete, so
readers never see half a file and a crash leaves the previous content in place (a stray
``*.part`` temporary may remain).

The directory helpers (``listdir``, ``makedirs``, ``remove``, ``join``) are what the
multi-file formats (OFRecord part directories) need to work on either kind of path.
"""
from __future__ import annotations

import os

# the checksum sidecar beside a file (``storage/checksum.py`` holds its format)
SIDECAR_SUFFIX = ".rkcrc"


def sidecar_path(path) -> str:
    return f"{path}{SIDECAR_SUFFIX}"


def is_url(path) -> bool:
    return isinstance(path, str) and "://" in path and not path.startswith("file://")


def local_path(path) -> str:
    path = os.fspath(path)
    return path[len("file://"):] if path.startswith("file://") else path


# S3 connections per filesystem unless the storage options say otherwise: botocore's default of
# 10 let a reader's open wait three round trips for 25 chunk tables asked at once
S3_CONNECTIONS = 32
# requests in flight at once on a filesystem that does not say how many connections it holds
DEFAULT_IN_FLIGHT = 10


def filesystem(path, storage_options=None):
    """(fs, path-within-fs) for a URL. An S3 filesystem holds ``S3_CONNECTIONS`` connections unless
    ``storage_options["config_kwargs"]["max_pool_connections"]`` says how many."""
    try:
        from fsspec.core import url_to_fs
        from fsspec.utils import get_protocol
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(f"{path}: URLs need fsspec (pip install fsspec)") from e
    options = dict(storage_options or {})
    if get_protocol(path) in ("s3", "s3a"):
        options["config_kwargs"] = {"max_pool_connections": S3_CONNECTIONS, **(options.get("config_kwargs") or {})}
    return url_to_fs(path, **options)


def requests_in_flight(fs) -> int:
    """How many requests ``fs`` serves at once: its connection pool where it says (s3fs's
    ``max_pool_connections``), else ``DEFAULT_IN_FLIGHT``; more threads would only wait for a
    connection."""
    config = getattr(fs, "config_kwargs", None)
    if isinstance(config, dict) and hasattr(fs, "call_s3"):
        return max(1, int(config.get("max_pool_connections") or DEFAULT_IN_FLIGHT))
    return DEFAULT_IN_FLIGHT


def join(directory: str, name: str) -> str:
    return directory.rstrip("/") + "/" + name if is_url(directory) else os.path.join(directory, name)


def ensure_regular(path, storage_options=None) -> None:
    """Refuse a local FIFO, device or socket up front with "not a regular file" (``stat`` never
    blocks; ``open`` on a FIFO does). Missing paths raise ``FileNotFoundError`` naming them;
    directories and URLs are left to the caller."""
    if is_url(path):
        return
    name = os.fspath(path)
    try:
        mode = os.stat(local_path(name)).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"{name}: no such file") from None
    _refuse_special(name, mode)


def _refuse_special(name: str, mode: int) -> None:
    """NotRegularFileError naming what ``name`` is, unless its ``mode`` is a file's or a directory's."""
    import stat
    from recordkit.errors import NotRegularFileError
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return
    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "special")
    raise NotRegularFileError(f"{name}: not a regular file ({kind})")


def open_regular(path) -> int:
    """A descriptor of the local regular file ``path``, open for reading, by a path that cannot
    block: ``ensure_regular`` first, then an ``O_NONBLOCK`` open (should the path have turned
    into a FIFO since, ``open`` still returns) whose ``fstat`` is checked again. Missing:
    ``FileNotFoundError``; a directory: ``IsADirectoryError``; a FIFO, device or socket:
    ``NotRegularFileError``, each naming the path. Every local file recordkit reads (data,
    checksum sidecars, index caches, descriptions) is opened here or through ``LocalSource``,
    which uses it."""
    import stat
    name = os.fspath(path)
    ensure_regular(name)
    try:
        fd = os.open(local_path(name), os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise FileNotFoundError(f"{name}: no such file") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(f"{name}: is a directory")
        _refuse_special(name, mode)
    return fd


def open_local(path):
    """``open(path, "rb")`` through ``open_regular``: never blocks on a FIFO."""
    return os.fdopen(open_regular(path), "rb")


def has_file(path, storage_options=None) -> bool:
    """Whether a file is at ``path``, for a reader about to open it (a shard its description lists,
    a checksum sidecar, a description): False when nothing (or a directory) is there, and a FIFO,
    device or socket is ``NotRegularFileError`` at once: never called missing, never opened."""
    if is_url(path):
        return isfile(path, storage_options)
    name = os.fspath(path)
    try:
        mode = os.stat(local_path(name)).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return False
    _refuse_special(name, mode)
    import stat
    return stat.S_ISREG(mode)


def _looked(path):
    """The look at ``path`` made for the open under way (``storage/probe.py``), if any."""
    from recordkit.storage.looked import current
    return current(path)


def isfile(path, storage_options=None) -> bool:
    if is_url(path):
        looked = _looked(path)
        if looked is not None:
            return looked.info is not None
        fs, p = filesystem(path, storage_options)
        return fs.isfile(p)
    return os.path.isfile(local_path(path))


def isdir(path, storage_options=None) -> bool:
    if is_url(path):
        looked = _looked(path)
        if looked is not None:
            return looked.directory
        fs, p = filesystem(path, storage_options)
        return fs.isdir(p)
    return os.path.isdir(local_path(path))


def listdir(path, storage_options=None) -> list[str]:
    """Names (not paths) of the entries of a directory."""
    if is_url(path):
        looked = _looked(path)
        if looked is not None and looked.entries is not None:
            return looked.names()
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


def move(src: str, dst: str, storage_options=None) -> None:
    """Rename a file (both paths on the same file system: local, or one fsspec store)."""
    if is_url(src) or is_url(dst):
        fs, p = filesystem(src, storage_options)
        fs.mv(p, filesystem(dst, storage_options)[1])
    else:
        os.replace(local_path(src), local_path(dst))


def remove_tree(path, storage_options=None) -> None:
    """Delete a directory and everything in it; a missing one is not an error."""
    if is_url(path):
        fs, p = filesystem(path, storage_options)
        try:
            fs.rm(p, recursive=True)
        except FileNotFoundError:
            pass
    else:
        import shutil
        shutil.rmtree(local_path(path), ignore_errors=True)


def file_size(f) -> int:
    """Size of an open seekable binary file, leaving it at offset 0."""
    f.seek(0, 2)
    size = f.tell()
    f.seek(0)
    return size


__all__ = ["file_size", "has_file", "is_url", "join", "isfile", "isdir", "listdir", "makedirs", "open_local", "open_regular",
           "remove", "sidecar_path"]
