"""Atomic output files: write to a temporary file beside the target, then rename.

An interrupted conversion must never leave a half-written file under the final name:
either the previous content or the complete new content is there.
"""
from __future__ import annotations

import os
import tempfile


class AtomicFile:
    """A binary file that appears under ``path`` only when ``commit()`` is called.

    Used as a context manager it commits on success and discards on an exception.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
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
        os.fdatasync(self.file.fileno())

    def commit(self) -> None:
        if self._done:
            return
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        os.chmod(self.tmp_path, 0o666 & ~_umask())
        os.replace(self.tmp_path, self.path)
        self._done = True

    def discard(self) -> None:
        if self._done:
            return
        self.file.close()
        try:
            os.unlink(self.tmp_path)
        except FileNotFoundError:
            pass
        self._done = True

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.commit()
        else:
            self.discard()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
