"""Writing OFRecord data sets: records spread over ``part-N`` files, each written atomically.

Frames are an 8-byte little-endian signed length then the serialized record, exactly as
OneFlow's tools write them (``struct.pack("q", len)`` + ``SerializeToString``).
``OFRecordWriter`` shards over ``num_parts`` files either round robin (record i goes to
part i mod N) or contiguously (``sharding="contiguous"`` with ``total`` known: balanced
runs, as OneFlow splits parts among readers, and reading the parts in name order gives the
records in the order written). With ``exact_total=False`` the total is an upper bound (a
converter knows how many sequences its input indexes, not how many an error budget will
drop): fewer records only make the last parts shorter. Parts that would stay empty are never
written (OneFlow's reader mishandles empty parts). ``streams=`` (a converter's stream
declarations) are recorded in ``_recordkit_streams.json`` beside the parts, published with
them (see ``dataset.read_streams``); without it, a sidecar left by an earlier data set is
removed with that data set's parts.

A local data set is replaced as a whole: the parts are written into a hidden staging
directory beside the target (``.NAME.*.staging``), and ``close()`` swaps it with the target
in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``; a new target is a plain rename),
so a reader or a crash sees the complete old data set or the complete new one, never a mix.
Files in the target that are not parts (or their sidecars) are carried over by hard links
(subdirectories are moved across right after the swap). Where the filesystem cannot
exchange, where the target is a symlink, a mount point or the working directory, and for URLs (object stores have no directories to swap), parts are published
one by one: each part is whole, the set is not atomic. A killed writer may leave its
staging directory behind.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import struct
import tempfile

from recordkit.atomic import AtomicFile, _umask, exchange, fsync_directory
from recordkit.storage import location
from recordkit.formats.closing import AtomicWriter
from recordkit.formats.ofrecord import codec
from recordkit.formats.ofrecord.dataset import STREAMS_SIDECAR, part_name, streams_document

_LEN = struct.Struct("<q")


def frame(payload: bytes) -> bytes:
    return _LEN.pack(len(payload)) + payload


class OFRecordWriter(AtomicWriter):
    def __init__(self, directory, num_parts: int = 1, *, sharding: str = "round_robin", total: int | None = None,
                 exact_total: bool = True, part_name_prefix: str = "part-", part_name_suffix_length: int = 5, storage_options=None,
                 checksums: bool = False, streams=None, precision=None, key_feature: str | None = "key"):
        if num_parts < 1:
            raise ValueError("num_parts must be >= 1")
        if sharding not in ("round_robin", "contiguous"):
            raise ValueError("sharding must be 'round_robin' or 'contiguous'")
        if sharding == "contiguous" and total is None:
            raise ValueError("contiguous sharding needs the total number of records")
        self.directory = directory if isinstance(directory, str) else os.fspath(directory)
        self.storage_options = storage_options
        self.checksums = bool(checksums)
        self._staging = None
        if location.is_url(self.directory):
            location.makedirs(self.directory, storage_options)
        else:
            parent, name = os.path.split(os.path.abspath(self.directory))
            if os.path.exists(self.directory) and not os.path.isdir(self.directory):
                raise NotADirectoryError(f"{self.directory}: exists and is not a directory")
            os.makedirs(parent, exist_ok=True)
            self._staging = tempfile.mkdtemp(prefix=f".{name}.", suffix=".staging", dir=parent)
        self.num_parts = int(num_parts)
        self.sharding = sharding
        self.total = total
        # the declarations are rendered now: a bad one fails before any record is written
        self._streams_doc = None if streams is None else streams_document(streams, precision, key_feature=key_feature)
        self.exact_total = bool(exact_total)
        self.prefix = part_name_prefix
        self.suffix_length = part_name_suffix_length
        self._files: dict[int, AtomicFile] = {}
        self.records_written = 0
        self.paths: list[str] = []

    def _part_of(self, i: int) -> int:
        if self.sharding == "round_robin":
            return i % self.num_parts
        base, extra = divmod(self.total, self.num_parts)  # first `extra` parts get one more
        cut = extra * (base + 1)
        part = i // (base + 1) if i < cut else extra + (i - cut) // max(base, 1)
        return min(part, self.num_parts - 1)

    def write(self, record) -> None:
        """Add one record: a dict of features (or of plain values), or already serialized bytes."""
        if self.total is not None and self.exact_total and self.records_written >= self.total:
            raise ValueError(f"more records than the declared total {self.total}")
        payload = record if isinstance(record, (bytes, bytearray)) else codec.encode(record)
        if len(payload) == 0:
            raise ValueError("an empty record cannot be framed (OneFlow requires length > 0)")
        part = self._part_of(self.records_written)
        f = self._files.get(part)
        if f is None:
            where = self._staging or self.directory
            f = self._files[part] = AtomicFile(location.join(where, part_name(self.prefix, part, self.suffix_length)),
                                               storage_options=self.storage_options, checksums=self.checksums)
        f.write(frame(payload))
        self.records_written += 1

    def close(self) -> None:
        if self.total is not None and self.exact_total and self.records_written != self.total:
            self.abort()
            raise ValueError(f"wrote {self.records_written} records, declared {self.total}")
        try:
            # parts are numbered 0..k-1 with no gaps: round robin fills the first min(N, n) parts
            names = []
            for part in sorted(self._files):
                self._files[part].commit()
                names.append(part_name(self.prefix, part, self.suffix_length))
            self._files.clear()
            if self._streams_doc is not None:
                with AtomicFile(location.join(self._staging or self.directory, STREAMS_SIDECAR),
                                storage_options=self.storage_options) as f:
                    f.write(self._streams_doc)
            if self._staging is not None:
                self._publish_staged(len(names))
            else:
                self._remove_stale_parts(len(names))
        except BaseException:
            self.abort()
            raise
        self.paths = [location.join(self.directory, n) for n in names]

    def _is_data_set_entry(self, name: str) -> bool:
        """A part of a data set in this naming, or one of its sidecars (checksums, index)."""
        digits = re.escape(self.prefix) + r"\d+"
        return (re.fullmatch(rf"(?:{digits}(?:\.rkcrc)?|\.{digits}\.rkidx)", name) is not None
                or name == STREAMS_SIDECAR)

    def _publish_staged(self, written: int) -> None:
        target, staging = self.directory, self._staging
        parent = os.path.dirname(os.path.abspath(target))
        if not os.path.exists(target):
            os.chmod(staging, 0o777 & ~_umask())  # mkdtemp made it private
            os.rename(staging, target)
            self._staging = None
            fsync_directory(parent)
            return
        if not self._swappable(target):
            self._publish_part_by_part(written)
            return
        os.chmod(staging, stat.S_IMODE(os.stat(target).st_mode))
        moved_later = []
        for entry in os.scandir(target):  # keep what is not the data set's (hard links: no copy, no gap)
            if self._is_data_set_entry(entry.name):
                continue
            if entry.is_dir(follow_symlinks=False):
                moved_later.append(entry.name)
                continue
            try:
                os.link(entry.path, os.path.join(staging, entry.name), follow_symlinks=False)
            except OSError:
                shutil.copy2(entry.path, os.path.join(staging, entry.name), follow_symlinks=False)
        if exchange(staging, target):
            fsync_directory(parent)
            for name in moved_later:
                os.rename(os.path.join(staging, name), os.path.join(target, name))
            shutil.rmtree(staging, ignore_errors=True)
            self._staging = None
        else:  # no atomic exchange on this system
            self._publish_part_by_part(written)

    @staticmethod
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

    def _publish_part_by_part(self, written: int) -> None:
        """The weaker publication: each part renamed into the target (whole), the set not atomic."""
        staging, target = self._staging, self.directory
        for name in sorted(os.listdir(staging)):
            if self._is_data_set_entry(name):
                os.replace(os.path.join(staging, name), os.path.join(target, name))
        self._remove_stale_parts(written)
        shutil.rmtree(staging, ignore_errors=True)
        self._staging = None

    def _remove_stale_parts(self, written: int) -> None:
        """Parts beyond the ones just written belong to an older data set: remove them, so that
        re-writing a directory with fewer parts does not leave records of the old one behind.
        (Used where the data set cannot be swapped as a whole.)"""
        pattern = re.compile(re.escape(self.prefix) + r"(\d+)$")
        from recordkit.storage.checksum import sidecar_path
        if self._streams_doc is None:  # the old data set's declarations would describe the new one
            location.remove(location.join(self.directory, STREAMS_SIDECAR), self.storage_options)
        for name in location.listdir(self.directory, self.storage_options):
            m = pattern.match(name)
            if m and int(m.group(1)) >= written:
                stale = location.join(self.directory, name)
                location.remove(sidecar_path(stale), self.storage_options)
                location.remove(stale, self.storage_options)

    def abort(self) -> None:
        from recordkit.atomic import note_discarded
        for f in self._files.values():
            f.discard()
        self._files.clear()
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
            note_discarded(self.directory, instead_of=self._staging)
            self._staging = None
