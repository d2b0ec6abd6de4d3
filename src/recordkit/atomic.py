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
import uuid


class AtomicFile:
    """A binary file that appears under ``path`` only when ``commit()`` is called.

    Used as a context manager it commits on success and discards on an exception.
    ``checksums=True`` also writes the ``.rkcrc`` sidecar; ``keep_sidecar`` is for files that
    have none (the sidecar itself, caches). ``durable=False`` skips the fsync: for caches,
    which a crash may lose but never leave half-written.
    """

    def __init__(self, path, *, storage_options=None, checksums: bool = False, keep_sidecar: bool = False,
                 durable: bool = True):
        from recordkit.storage.location import is_url
        self.path = path if isinstance(path, str) else os.fspath(path)
        self.storage_options = storage_options
        self.checksums = bool(checksums)
        self.keep_sidecar = bool(keep_sidecar)
        self.durable = bool(durable)
        self.remote = is_url(self.path)
        if self.remote:
            fd, self.tmp_path = tempfile.mkstemp(prefix="recordkit-upload.", suffix=".part")
        else:
            directory = os.path.dirname(os.path.abspath(self.path))
            fd, self.tmp_path = tempfile.mkstemp(prefix="." + os.path.basename(self.path) + ".",
                                                 suffix=".part", dir=directory)
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
        self.file.flush()
        if not self.remote and self.durable:
            os.fsync(self.file.fileno())
        self.file.close()
        table = None
        if self.checksums:
            from recordkit.storage import checksum
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
            from recordkit.storage import checksum
            checksum.write(self.path, table, storage_options=self.storage_options)

    def _publish_remote(self) -> None:
        from recordkit.storage.location import filesystem
        from recordkit.storage.retry import RetryPolicy
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
        if self._done:
            return
        self.file.close()
        _unlink(self.tmp_path)
        self._done = True

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.commit()
        else:
            self.discard()


def _remove_sidecar(path: str, storage_options) -> None:
    from recordkit.storage.checksum import sidecar_path
    from recordkit.storage.location import remove
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
