"""A data set directory written aside and published in one step: all new or all old, never a mix.

Every writer of a directory output (OFRecord parts, Parquet parts, a Hugging Face
``save_to_disk`` directory, WebDataset/TFRecord/MDS shards, SINGA's prepared train/test/mean
stores) writes its files into a hidden staging directory beside the target
(``.NAME.<random>.staging``, flock-held while its writer lives) and ``commit()`` publishes them:

* a new target: one ``rename``;
* an existing target: Linux ``renameat2(RENAME_EXCHANGE)`` swaps the staging directory with it
  in one step, then the old content is removed.

``owns(name)`` says which entries of an existing target belong to the data set (they are
replaced; those the new set does not write disappear). What happens to the other entries is
the caller's choice (``foreign``):

* ``"refuse"`` (the default; the shard formats, Parquet, HF): an existing target holding other
  entries, or that is a symlink, a mount point or the working directory, is refused up front
  (converting into ``~/`` by mistake must not replace the home directory). Where the
  filesystem cannot exchange, the old directory is renamed aside first (a reader may briefly
  find no directory, never a mix).
* ``"keep"`` (OFRecord data sets, SINGA's prepared stores): other entries are carried over by
  hard links (subdirectories are moved across right after the swap). Where the target cannot
  be swapped (no exchange, a symlink, a mount point, the working directory), files are
  published one by one: each whole, the set not atomic.

URLs (object stores have no directories to swap) are written file by file, each file whole
(``AtomicFile``); at ``commit()`` owned files the new set did not write are removed.

The staging directories of killed writers (older than this process, locked by nobody) are
removed by the next writer of the same target (``atomic.remove_stale_temporaries``).
"""
from __future__ import annotations

import os
import shutil
import stat
import tempfile
from typing import Callable

from recordkit.storage.atomic import (AtomicFile, Transaction, _hold, _umask, exchange, fsync_directory,
                                      note_discarded, remove_stale_temporaries)
from recordkit.errors import UsageError
from recordkit.storage import location

__all__ = ["StagedDirectory", "TargetRefused"]


class TargetRefused(UsageError, FileExistsError):
    """An existing target the data set would replace holds other things (or is a symlink, a mount
    point, the working directory): refused before anything is written (the CLI's exit 2)."""


class StagedDirectory(Transaction):
    """Files written with ``open(name)`` / ``write_file`` / at ``path(name)``; ``commit()``
    publishes them all, ``discard()`` (``abort()``) none. See the module docstring."""

    def __init__(self, target, owns: Callable[[str], bool] | None = None, *, storage_options=None,
                 checksums: bool = False, foreign: str = "refuse", what: str = "data set"):
        if foreign not in ("refuse", "keep"):
            raise ValueError("foreign must be 'refuse' or 'keep'")
        self.target = target if isinstance(target, str) else os.fspath(target)
        self.storage_options = storage_options
        self.checksums = bool(checksums)
        self.owns = owns or (lambda name: False)
        self.foreign = foreign
        self.remote = location.is_url(self.target)
        self.written: list[str] = []
        self.staging: str | None = None
        self._files: list[AtomicFile] = []
        self._lock = None
        self._done = False
        self._check_target(what)
        if self.remote:
            location.makedirs(self.target, storage_options)
            return
        parent, name = os.path.split(os.path.abspath(self.target))
        os.makedirs(parent, exist_ok=True)
        remove_stale_temporaries(os.path.join(parent, name), suffixes=(".staging",))
        self.staging = tempfile.mkdtemp(prefix=f".{name}.", suffix=".staging", dir=parent)
        try:  # held while we write: a concurrent writer must not take it for a killed writer's
            self._lock = os.open(self.staging, os.O_RDONLY)
            _hold(self._lock)
        except OSError:
            self._lock = None

    # -- what the target may be ------------------------------------------------------------------
    def _owned(self, name: str) -> bool:
        return self.owns(name) or (name.endswith(".rkcrc") and self.owns(name[:-len(".rkcrc")]))

    def _check_target(self, what: str) -> None:
        if location.isfile(self.target, self.storage_options):
            raise NotADirectoryError(f"{self.target}: exists and is not a directory (a {what} is a directory)")
        if self.foreign == "keep" or not location.isdir(self.target, self.storage_options):
            return
        if not self.remote and not _swappable(self.target):
            raise TargetRefused(f"{self.target}: is a symlink, a mount point or the working directory; a "
                                  f"{what} replaces its directory as a whole: choose a new directory")
        others = [n for n in location.listdir(self.target, self.storage_options) if not self._owned(n)]
        if others:
            shown = ", ".join(sorted(others)[:3]) + (" ..." if len(others) > 3 else "")
            raise TargetRefused(f"{self.target}: the directory holds files that are not part of a {what} "
                                  f"({shown}); refusing to replace it: choose a new or empty directory")

    # -- writing -----------------------------------------------------------------------------------
    def path(self, name: str) -> str:
        """Where the new set's file ``name`` is written now (the caller writes it whole)."""
        if self._done:
            raise ValueError("the staged directory was already published or discarded")
        if name not in self.written:
            self.written.append(name)
        return location.join(self.staging or self.target, name)

    def open(self, name: str) -> AtomicFile:
        """A new file ``name`` of the set (``AtomicFile``; committed with the set)."""
        f = AtomicFile(self.path(name), storage_options=self.storage_options, checksums=self.checksums)
        self._files.append(f)
        return f

    def write_file(self, name: str, data: bytes) -> None:
        f = self.open(name)
        f.write(data)
        f.commit()

    # -- publishing --------------------------------------------------------------------------------
    def commit(self) -> None:
        """Publish the staged files; on failure discard them (the target is left as it was)."""
        if self._done:
            return
        try:
            for f in self._files:
                f.commit()
            if self.staging is None:
                self._remove_unwritten_remote()
            else:
                self._publish()
        except BaseException:
            self.discard()
            raise
        self._done = True
        self._release()

    def discard(self) -> None:
        """Remove the staging directory and everything in it; the target is untouched."""
        if self._done:
            return
        self._done = True
        for f in self._files:
            f.discard()
        if self.staging is not None:
            shutil.rmtree(self.staging, ignore_errors=True)
            note_discarded(self.target, instead_of=self.staging)
            self.staging = None
        else:
            note_discarded(self.target)
        self._release()

    abort = discard

    def _release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def _publish(self) -> None:
        staging, target = self.staging, os.path.abspath(self.target)
        parent = os.path.dirname(target)
        if not os.path.exists(target):
            os.chmod(staging, 0o777 & ~_umask())  # mkdtemp made it private
            os.rename(staging, target)
            self.staging = None
            fsync_directory(parent)
            return
        if self.foreign == "keep":
            self._publish_keeping_others(staging, target, parent)
            return
        os.chmod(staging, 0o777 & ~_umask())
        if exchange(staging, target):
            shutil.rmtree(staging, ignore_errors=True)  # now the old content
        else:
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.", suffix=".staging", dir=parent)
            os.rmdir(old)
            os.rename(target, old)
            os.rename(staging, target)
            shutil.rmtree(old, ignore_errors=True)
        self.staging = None
        fsync_directory(parent)

    def _publish_keeping_others(self, staging: str, target: str, parent: str) -> None:
        if not _swappable(target):
            self._publish_one_by_one()
            return
        os.chmod(staging, stat.S_IMODE(os.stat(target).st_mode))
        moved_later = []
        for entry in os.scandir(target):  # keep what is not the data set's (hard links: no copy, no gap)
            if self._owned(entry.name) or os.path.lexists(os.path.join(staging, entry.name)):
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
        self.staging = None

    def _publish_one_by_one(self) -> None:
        """The weaker publication: each staged file renamed into the target (whole), owned entries
        the new set lacks removed; the set as a whole is not atomic."""
        staging, target = self.staging, self.target
        new = set(os.listdir(staging))
        for name in sorted(new):
            os.replace(os.path.join(staging, name), os.path.join(target, name))
        fsync_directory(target)
        for name in os.listdir(target):
            if self._owned(name) and name not in new:
                path = os.path.join(target, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
        shutil.rmtree(staging, ignore_errors=True)
        self.staging = None

    def _remove_unwritten_remote(self) -> None:
        keep = set(self.written) | {n + ".rkcrc" for n in self.written}
        for name in location.listdir(self.target, self.storage_options):
            if name not in keep and self._owned(name):
                location.remove(location.join(self.target, name), self.storage_options)


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
