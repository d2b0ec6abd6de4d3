"""A data set directory written aside and published in one step.

The bridge formats (WebDataset, TFRecord, MDS) are directories of shards plus, for some,
an index. A reader that lists ``shard-000003.tar`` while shard 4 is still being written, or
a crash after three of eight shards, must never see a half data set under the final name.
So every file goes into a hidden staging directory beside the target
(``.NAME.<random>.staging``, the naming ``recordkit.atomic.stale_temporaries`` knows), and
``commit()`` publishes the whole directory at once:

* a new target: one ``rename``;
* an existing target: ``renameat2(RENAME_EXCHANGE)`` swaps the staging directory with it in
  one step, then the old content is removed; where the filesystem cannot exchange, the old
  directory is first renamed aside (a reader may briefly find no directory, never a mix).

An existing target is replaced only when it is empty or holds nothing but files the format
would write (``owns(name)``): converting into ``~/`` by mistake must not delete the home
directory. URLs (object stores have no directories to swap) are written file by file, each
file whole (``AtomicFile``), and files of an older data set the new one does not rewrite are
removed at the end.
"""
from __future__ import annotations

import os
import shutil
import tempfile

from recordkit.atomic import AtomicFile, _umask, exchange, fsync_directory, note_discarded, remove_stale_temporaries
from recordkit.storage import location


class StagedDirectory:
    """Write files with ``open(name)``; ``commit()`` publishes them all, ``discard()`` none.

    ``owns(name) -> bool`` says which entries of an existing target belong to the format's
    data sets (they are replaced); any other entry makes the constructor refuse the target.
    ``checksums=True`` writes a ``.rkcrc`` sidecar beside every file.
    """

    def __init__(self, path, *, owns=None, storage_options=None, checksums: bool = False, what: str = "data set"):
        self.path = path if isinstance(path, str) else os.fspath(path)
        self.storage_options = storage_options
        self.checksums = bool(checksums)
        self._owns = owns or (lambda name: False)
        self.remote = location.is_url(self.path)
        self._open: list[AtomicFile] = []
        self.names: list[str] = []
        self._done = False
        self._check_target(what)
        if self.remote:
            self.staging = None
            location.makedirs(self.path, storage_options)
        else:
            parent, name = os.path.split(os.path.abspath(self.path))
            os.makedirs(parent, exist_ok=True)
            remove_stale_temporaries(os.path.join(parent, name), suffixes=(".staging",))
            self.staging = tempfile.mkdtemp(prefix=f".{name}.", suffix=".staging", dir=parent)

    def _check_target(self, what: str) -> None:
        if location.isfile(self.path, self.storage_options):
            raise NotADirectoryError(f"{self.path}: exists and is not a directory (a {what} is a directory)")
        if not location.isdir(self.path, self.storage_options):
            return
        if not location.is_url(self.path):
            target = os.path.abspath(self.path)
            same_as_cwd = False
            try:
                same_as_cwd = os.path.samefile(target, os.getcwd())
            except OSError:
                pass
            if os.path.islink(self.path) or os.path.ismount(target) or same_as_cwd:
                raise FileExistsError(f"{self.path}: is a symlink, a mount point or the working directory; a "
                                      f"{what} replaces its directory as a whole: choose a new directory")
        foreign = [n for n in location.listdir(self.path, self.storage_options)
                   if not self._owns(n) and not (n.endswith(".rkcrc") and self._owns(n[:-len(".rkcrc")]))]
        if foreign:
            shown = ", ".join(sorted(foreign)[:3]) + (" ..." if len(foreign) > 3 else "")
            raise FileExistsError(f"{self.path}: the directory holds files that are not part of a {what} "
                                  f"({shown}); refusing to replace it: choose a new or empty directory")

    def file_path(self, name: str) -> str:
        return location.join(self.staging or self.path, name)

    def open(self, name: str) -> AtomicFile:
        """A new file ``name`` in the data set (written aside, published by ``commit``)."""
        f = AtomicFile(self.file_path(name), storage_options=self.storage_options, checksums=self.checksums)
        self._open.append(f)
        self.names.append(name)
        return f

    def write_file(self, name: str, data: bytes) -> None:
        f = self.open(name)
        f.write(data)
        f.commit()

    def commit(self) -> None:
        if self._done:
            return
        try:
            for f in self._open:
                f.commit()
            if self.staging is not None:
                self._publish()
            else:
                self._remove_stale_remote()
        except BaseException:
            self.discard()
            raise
        self._done = True

    def _publish(self) -> None:
        target, staging = self.path, self.staging
        parent = os.path.dirname(os.path.abspath(target))
        if not os.path.exists(target):
            os.chmod(staging, 0o777 & ~_umask())  # mkdtemp made it private
            os.rename(staging, target)
        elif exchange(staging, target):
            os.chmod(target, 0o777 & ~_umask())
            shutil.rmtree(staging, ignore_errors=True)  # now the old content
        else:
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(target))}.", suffix=".staging",
                                   dir=parent)
            os.rmdir(old)
            os.rename(target, old)
            os.chmod(staging, 0o777 & ~_umask())
            os.rename(staging, target)
            shutil.rmtree(old, ignore_errors=True)
        self.staging = None
        fsync_directory(parent)

    def _remove_stale_remote(self) -> None:
        keep = set(self.names) | {n + ".rkcrc" for n in self.names}
        for name in location.listdir(self.path, self.storage_options):
            if name not in keep and (self._owns(name) or (name.endswith(".rkcrc") and self._owns(name[:-6]))):
                location.remove(location.join(self.path, name), self.storage_options)

    def discard(self) -> None:
        if self._done:
            return
        self._done = True
        for f in self._open:
            f.discard()
        if self.staging is not None:
            shutil.rmtree(self.staging, ignore_errors=True)
            note_discarded(self.path, instead_of=self.staging)
            self.staging = None
        else:
            note_discarded(self.path)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.commit()
        else:
            self.discard()
