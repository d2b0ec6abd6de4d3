"""A data set directory written aside and put in place whole.

Writers of directory outputs (Parquet parts, a Hugging Face ``save_to_disk`` directory) write
every file into a hidden staging directory beside the target (``.NAME.*.staging``) and
``commit()`` puts the whole directory under the target's name at the end: a rename for a new
target, an atomic exchange (Linux ``renameat2(RENAME_EXCHANGE)``) with an existing directory,
whose old content is then removed. Nothing appears under the target until the data set is
complete, and a reader never sees old and new files mixed. Where the filesystem cannot
exchange, the old directory is renamed aside first (a short moment without the target, never
a mix). A killed writer leaves its staging directory behind; the next writer of the same
target removes it (``atomic.remove_stale_temporaries``).

URLs (object stores have no directories to rename) are written file by file, each file atomic
(``AtomicFile``), and files of an earlier data set that this one did not write are removed at
the end.
"""
from __future__ import annotations

import os
import shutil
import tempfile

from recordkit.atomic import _umask, exchange, fsync_directory, note_discarded, remove_stale_temporaries
from recordkit.storage import location


class StagedDirectory:
    def __init__(self, target, *, storage_options=None, owned=None):
        """``owned(name)``: whether an existing file in a remote target belongs to a data set of this
        kind (removed at commit when this data set did not write it); local targets are replaced whole."""
        self.target = target if isinstance(target, str) else os.fspath(target)
        self.storage_options = storage_options
        self.remote = location.is_url(self.target)
        self.staging = None
        self.owned = owned or (lambda name: False)
        self.written: list[str] = []
        if self.remote:
            location.makedirs(self.target, storage_options)
            return
        if os.path.exists(self.target) and not os.path.isdir(self.target):
            raise NotADirectoryError(f"{self.target}: exists and is not a directory")
        parent, name = os.path.split(os.path.abspath(self.target))
        os.makedirs(parent, exist_ok=True)
        remove_stale_temporaries(self.target, (".staging",))
        self.staging = tempfile.mkdtemp(prefix=f".{name}.", suffix=".staging", dir=parent)
        from recordkit.atomic import _hold
        try:  # held while we write: a concurrent writer must not take it for a killed writer's
            self._lock = os.open(self.staging, os.O_RDONLY)
            _hold(self._lock)
        except OSError:
            self._lock = None

    def path(self, name: str) -> str:
        """Where the data set's file ``name`` is written now."""
        self.written.append(name)
        return location.join(self.staging or self.target, name)

    def commit(self) -> None:
        if self.remote:
            self._remove_unwritten()
            return
        if self.staging is None:
            return
        staging, target = self.staging, self.target
        parent = os.path.dirname(os.path.abspath(target))
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp made it private
        try:
            if not os.path.lexists(target):
                os.rename(staging, target)
            elif os.path.isdir(target) and not os.path.islink(target) and exchange(staging, target):
                shutil.rmtree(staging, ignore_errors=True)  # now the old data set
            else:
                old = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(target))}.", suffix=".staging",
                                       dir=parent)
                os.rmdir(old)
                os.rename(target, old)
                os.rename(staging, target)
                shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            self.abort()
            raise
        self._release()
        self.staging = None
        fsync_directory(parent)

    def _remove_unwritten(self) -> None:
        keep = set(self.written)
        from recordkit.storage.checksum import sidecar_path
        for name in location.listdir(self.target, self.storage_options):
            if name not in keep and self.owned(name) and \
                    not any(name == os.path.basename(sidecar_path(k)) for k in keep):
                location.remove(location.join(self.target, name), self.storage_options)

    def abort(self) -> None:
        if self.staging is not None:
            shutil.rmtree(self.staging, ignore_errors=True)
            note_discarded(self.target, instead_of=self.staging)
            self.staging = None
        self._release()

    def _release(self) -> None:
        lock = getattr(self, "_lock", None)
        if lock is not None:
            os.close(lock)
            self._lock = None
