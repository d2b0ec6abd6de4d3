"""Atomic output files: write to a temporary file beside the target, then rename.

An interrupted conversion must never leave a half-written file under the final name:
either the previous content or the complete new content is there.

URLs (fsspec: ``s3://``, ``memory://``, ...) are written to a local temporary file and
uploaded on ``commit()`` to a ``.part`` sibling that is then moved over the target; on
object stores an object appears only once its upload completed, so the target is never
partial there either.

A ``NAME.rkcrc`` checksum sidecar (``recordkit.storage.checksum``) describes one version
of NAME, so ``commit()`` removes an existing sidecar *before* the new data replaces the
old, and writes a fresh one after it when ``checksums=True``: a crash in between leaves a
file without a sidecar (unverified), never new data beside old checksums.
"""
from __future__ import annotations

import os
import tempfile
import time
import uuid

from recordkit.storage.location import filesystem, is_url, remove, sidecar_path
from recordkit.storage.retry import RetryPolicy

# Targets whose output was discarded after an error, newest last: the CLI names them when an
# OSError (disk full, quota, read-only file system, I/O error) ends a command.
_discarded: list[str] = []
_PROCESS_START = time.time()


class Transaction:
    """``with x:`` commits ``x`` when the block ends normally and discards it when it raises: the
    protocol of everything written aside and published whole (``AtomicFile``, ``StagedDirectory``)."""

    def commit(self) -> None:  # pragma: no cover - each transaction has its own
        raise NotImplementedError

    def discard(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.commit()
        else:
            self.discard()


class AtomicFile(Transaction):
    """A binary file that appears under ``path`` only when ``commit()`` is called.

    Used as a context manager it commits on success and discards on an exception.
    ``checksums=True`` also writes the ``.rkcrc`` sidecar; ``keep_sidecar`` is for files that
    have none (the sidecar itself, caches). ``durable=False`` skips the fsync: for caches,
    which a crash may lose but never leave half-written.
    """

    def __init__(self, path, *, storage_options=None, checksums: bool = False, keep_sidecar: bool = False,
                 durable: bool = True):
        self.path = path if isinstance(path, str) else os.fspath(path)
        self.storage_options = storage_options
        self.checksums = bool(checksums)
        self.keep_sidecar = bool(keep_sidecar)
        self.durable = bool(durable)
        self.remote = is_url(self.path)
        if self.remote:
            fd, self.tmp_path = tempfile.mkstemp(prefix="recordkit-upload.", suffix=".part")
        else:
            remove_stale_temporaries(self.path)
            directory = os.path.dirname(os.path.abspath(self.path))
            try:
                fd, self.tmp_path = tempfile.mkstemp(prefix="." + os.path.basename(self.path) + ".",
                                                     suffix=".part", dir=directory)
            except FileNotFoundError:  # the temporary's name would be all the error says: name the directory
                if os.path.isdir(directory):
                    raise
                raise FileNotFoundError(f"{os.path.dirname(self.path) or directory}: no such directory (the output "
                                        f"{self.path} would be written there)") from None
            _hold(fd)
        self.file = os.fdopen(fd, "wb")
        self._done = False

    def write(self, data) -> int:
        return self.file.write(data)

    def sync_data(self) -> None:
        """Flush what was written so far to the disk (fdatasync); safe to call from a writer thread."""
        self.file.flush()
        if not self.remote:
            os.fdatasync(self.file.fileno())

    def commit(self) -> None:
        if self._done:
            return
        try:
            self._commit()
        except BaseException:
            self.discard()  # disk full while flushing, an upload that failed...: nothing is left behind
            raise

    def _commit(self) -> None:
        self.file.flush()
        if not self.remote and self.durable:
            os.fsync(self.file.fileno())
        self.file.close()
        table = None
        if self.checksums:
            from recordkit.storage import checksum  # lazily: NumPy only for writers that ask for checksums
            table = checksum.compute_local(self.tmp_path)
        if self.remote:
            self._publish_remote()
        else:
            os.chmod(self.tmp_path, 0o666 & ~_umask())
            if not self.keep_sidecar:
                _remove_sidecar(self.path, None)
            os.replace(self.tmp_path, self.path)
        self._done = True
        if table is not None:
            write_sidecar(self.path, table, storage_options=self.storage_options)

    def _publish_remote(self) -> None:
        fs, target = filesystem(self.path, self.storage_options)
        part = f"{target}.{uuid.uuid4().hex[:12]}.part"
        retry = RetryPolicy.default()
        try:
            retry.call(lambda: fs.put_file(self.tmp_path, part), what=f"{self.path}: upload")
            if not self.keep_sidecar:
                _remove_sidecar(self.path, self.storage_options)
            retry.call(lambda: fs.mv(part, target), what=f"{self.path}: publish")
        except BaseException:
            try:
                fs.rm(part)
            except Exception:  # noqa: BLE001 - best effort cleanup of our own temporary
                pass
            raise
        finally:
            _unlink(self.tmp_path)

    def discard(self) -> None:
        """Remove the temporary file; never raises for the close (a full disk makes closing a
        buffered file fail, and the temporary must go all the same)."""
        if self._done:
            return
        self._done = True
        try:
            self.file.close()
        except OSError:
            pass
        _unlink(self.tmp_path)
        _discarded.append(self.path)


def write_sidecar(path, table, *, storage_options=None) -> str:
    """Write ``path``'s checksum sidecar (a ``storage.checksum.ChecksumTable``) atomically; returns its path."""
    side = sidecar_path(path)
    with AtomicFile(side, storage_options=storage_options, keep_sidecar=True) as f:
        f.write(table.to_bytes())
    return side


def discarded_targets() -> list[str]:
    """The targets discarded since the last call (and forget them): what an error message
    should name as left intact."""
    out = list(dict.fromkeys(_discarded))
    _discarded.clear()
    return out


def note_discarded(target: str, *, instead_of: str | None = None) -> None:
    """Record that the output ``target`` was discarded; entries under ``instead_of`` (a staging
    directory whose files were discarded one by one) are replaced by the target itself."""
    if instead_of is not None:
        inside = os.path.join(instead_of, "")
        _discarded[:] = [p for p in _discarded if not p.startswith(inside)]
    _discarded.append(target)


def _hold(fd: int) -> None:
    """Lock our own temporary: a later writer removes a temporary only if nobody holds it (its
    writer was killed), so concurrent writers never remove each other's files."""
    import fcntl
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        pass


def is_abandoned(path: str) -> bool:
    """Whether the temporary ``path`` (file or staging directory) was left by a writer that is
    gone: older than this process and locked by nobody. Opened without following links or
    blocking (a FIFO named like a temporary is not ours)."""
    import fcntl
    import stat
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)) or st.st_mtime >= _PROCESS_START:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # a live writer holds it
        return True
    finally:
        os.close(fd)


def stale_temporaries(path: str, suffixes=(".part",)) -> list[str]:
    """Hidden temporaries of target ``path`` (``.NAME.*.part`` files; with ``.staging`` in
    ``suffixes``, staging directories of whole data sets) that killed writers left beside it."""
    directory = os.path.dirname(os.path.abspath(path))
    prefix = "." + os.path.basename(os.path.abspath(path)) + "."
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return [os.path.join(directory, n) for n in names
            if n.startswith(prefix) and n.endswith(tuple(suffixes))
            and is_abandoned(os.path.join(directory, n))]


def remove_stale_temporaries(path: str, suffixes=(".part",)) -> list[str]:
    """Remove what ``stale_temporaries`` finds (best effort); the paths removed."""
    import shutil
    removed = []
    for tmp in stale_temporaries(path, suffixes):
        try:
            if os.path.isdir(tmp) and not os.path.islink(tmp):
                shutil.rmtree(tmp)
            else:
                os.unlink(tmp)
            removed.append(tmp)
        except OSError:
            pass
    return removed


def _remove_sidecar(path: str, storage_options) -> None:
    remove(sidecar_path(path), storage_options)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def exchange(a: str, b: str) -> bool:
    """Swap two existing paths (directories included) in one atomic step: Linux ``renameat2``
    with ``RENAME_EXCHANGE``. False where the system or filesystem cannot (the caller then
    falls back to something weaker); other failures raise ``OSError``."""
    import ctypes
    import errno
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), a)


def fsync_directory(path: str) -> None:
    """Make a rename in ``path`` durable (best effort where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
