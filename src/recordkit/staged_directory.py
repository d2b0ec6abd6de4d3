"""Publishing a set of files in a directory as a whole: all new or all old, never a mix.

A data set made of several files (OFRecord parts, SINGA's ``train_data.bin`` + ``test_data.bin``
+ ``image_mean.bin``) is written into a hidden staging directory beside the target
(``.NAME.*.staging``, flock-held while its writer lives) and published in one atomic step:
a new target is a plain rename; an existing one is swapped with Linux
``renameat2(RENAME_EXCHANGE)`` after the files of the target that are not the data set's
(``owns(name)`` is false) were hard-linked into the staging directory, so they survive the
swap (subdirectories are moved across right after it). Where the filesystem cannot exchange,
where the target is a symlink, a mount point or the working directory, files are published
one by one: each file is whole, the set is not atomic (the caller's docs say so).

The staging directories of killed writers (older than this process, locked by nobody) are
removed by the next writer of the same target.
"""
from __future__ import annotations

import os
import shutil
import stat
import tempfile
from typing import Callable

from recordkit.atomic import _hold, _umask, exchange, fsync_directory, note_discarded, remove_stale_temporaries

__all__ = ["StagedDirectory"]


class StagedDirectory:
    """A staging directory for ``target`` whose files ``commit()`` publishes as one set.

    ``owns(name)`` says which entries of the target belong to the data set: they are replaced
    (and, when absent from the new set, removed); every other entry is kept.
    """

    def __init__(self, target, owns: Callable[[str], bool]):
        self.target = os.path.abspath(os.fspath(target))
        self.owns = owns
        if os.path.exists(self.target) and not os.path.isdir(self.target):
            raise NotADirectoryError(f"{target}: exists and is not a directory")
        parent, name = os.path.split(self.target)
        os.makedirs(parent, exist_ok=True)
        remove_stale_temporaries(self.target, suffixes=(".staging",))
        self.path: str | None = tempfile.mkdtemp(prefix=f".{name}.", suffix=".staging", dir=parent)
        self._lock = os.open(self.path, os.O_RDONLY)
        _hold(self._lock)

    def join(self, name: str) -> str:
        """Where the file ``name`` of the new set is written."""
        if self.path is None:
            raise ValueError("the staging directory was already published or discarded")
        return os.path.join(self.path, name)

    def commit(self) -> None:
        """Publish the staged files (see the module docstring); on failure discard them."""
        try:
            self._publish()
        except BaseException:
            self.discard()
            raise
        self._release()

    def discard(self) -> None:
        """Remove the staging directory and everything in it; the target is untouched."""
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            note_discarded(self.target, instead_of=self.path)
            self.path = None
        self._release()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.commit()
        else:
            self.discard()

    def _release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def _publish(self) -> None:
        staging, target = self.path, self.target
        parent = os.path.dirname(target)
        if not os.path.exists(target):
            os.chmod(staging, 0o777 & ~_umask())  # mkdtemp made it private
            os.rename(staging, target)
            self.path = None
            fsync_directory(parent)
            return
        if not _swappable(target):
            self._publish_one_by_one()
            return
        os.chmod(staging, stat.S_IMODE(os.stat(target).st_mode))
        moved_later = []
        for entry in os.scandir(target):  # keep what is not the data set's (hard links: no copy, no gap)
            if self.owns(entry.name) or os.path.lexists(os.path.join(staging, entry.name)):
                continue
            if entry.is_dir(follow_symlinks=False):
                moved_later.append(entry.name)
                continue
            try:
                os.link(entry.path, os.path.join(staging, entry.name), follow_symlinks=False)
            except OSError:
                shutil.copy2(entry.path, os.path.join(staging, entry.name), follow_symlinks=False)
        if not exchange(staging, target):  # no atomic exchange on this system
            self._publish_one_by_one()
            return
        fsync_directory(parent)
        for name in moved_later:
            os.rename(os.path.join(staging, name), os.path.join(target, name))
        shutil.rmtree(staging, ignore_errors=True)
        self.path = None

    def _publish_one_by_one(self) -> None:
        """The weaker publication: each staged file renamed into the target (whole), owned entries
        the new set lacks removed; the set as a whole is not atomic."""
        staging, target = self.path, self.target
        new = set(os.listdir(staging))
        for name in sorted(new):
            os.replace(os.path.join(staging, name), os.path.join(target, name))
        fsync_directory(target)
        for name in os.listdir(target):
            if self.owns(name) and name not in new:
                path = os.path.join(target, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
        shutil.rmtree(staging, ignore_errors=True)
        self.path = None


def _swappable(target: str) -> bool:
    """Swap only a plain directory: not a symlink (the link would be replaced, not its target),
    not a mount point (hard links cannot cross it), not the working directory (the process
    would be left in the deleted old one)."""
    if os.path.islink(target) or os.path.ismount(target):
        return False
    try:
        return not os.path.samefile(target, os.getcwd())
    except OSError:
        return True
