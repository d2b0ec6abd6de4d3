"""Writing OFRecord data sets: records spread over ``part-N`` files, each written atomically.

Frames are an 8-byte little-endian signed length then the serialized record, exactly as
OneFlow's tools write them (``struct.pack("q", len)`` + ``SerializeToString``).
``OFRecordWriter`` shards over ``num_parts`` files either round robin (record i goes to
part i mod N) or contiguously (``sharding="contiguous"`` with ``total`` known: balanced
runs, as OneFlow splits parts among readers). Parts that would stay empty are never
written (OneFlow's reader mishandles empty parts); every part appears only when complete.
"""
from __future__ import annotations

import os
import struct

from recordkit.atomic import AtomicFile
from recordkit.storage import location
from recordkit.formats.closing import AtomicWriter
from recordkit.formats.ofrecord import codec
from recordkit.formats.ofrecord.dataset import part_name

_LEN = struct.Struct("<q")


def frame(payload: bytes) -> bytes:
    return _LEN.pack(len(payload)) + payload


class OFRecordWriter(AtomicWriter):
    def __init__(self, directory, num_parts: int = 1, *, sharding: str = "round_robin", total: int | None = None,
                 part_name_prefix: str = "part-", part_name_suffix_length: int = 5, storage_options=None,
                 checksums: bool = False):
        if num_parts < 1:
            raise ValueError("num_parts must be >= 1")
        if sharding not in ("round_robin", "contiguous"):
            raise ValueError("sharding must be 'round_robin' or 'contiguous'")
        if sharding == "contiguous" and total is None:
            raise ValueError("contiguous sharding needs the total number of records")
        self.directory = directory if isinstance(directory, str) else os.fspath(directory)
        self.storage_options = storage_options
        self.checksums = bool(checksums)
        location.makedirs(self.directory, storage_options)
        self.num_parts = int(num_parts)
        self.sharding = sharding
        self.total = total
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
        return i // (base + 1) if i < cut else extra + (i - cut) // max(base, 1)

    def write(self, record) -> None:
        """Add one record: a dict of features (or of plain values), or already serialized bytes."""
        if self.total is not None and self.records_written >= self.total:
            raise ValueError(f"more records than the declared total {self.total}")
        payload = record if isinstance(record, (bytes, bytearray)) else codec.encode(record)
        if len(payload) == 0:
            raise ValueError("an empty record cannot be framed (OneFlow requires length > 0)")
        part = self._part_of(self.records_written)
        f = self._files.get(part)
        if f is None:
            f = self._files[part] = AtomicFile(location.join(self.directory,
                                                             part_name(self.prefix, part, self.suffix_length)),
                                               storage_options=self.storage_options, checksums=self.checksums)
        f.write(frame(payload))
        self.records_written += 1

    def close(self) -> None:
        if self.total is not None and self.records_written != self.total:
            self.abort()
            raise ValueError(f"wrote {self.records_written} records, declared {self.total}")
        # parts are numbered 0..k-1 with no gaps: round robin fills the first min(N, n) parts
        for part in sorted(self._files):
            self._files[part].commit()
            self.paths.append(self._files[part].path)
        written = len(self._files)
        self._files.clear()
        self._remove_stale_parts(written)

    def _remove_stale_parts(self, written: int) -> None:
        """Parts beyond the ones just written belong to an older data set: remove them, so that
        re-writing a directory with fewer parts does not leave records of the old one behind.
        (Each part is published atomically; the set as a whole is not: see the README.)"""
        import re
        pattern = re.compile(re.escape(self.prefix) + r"(\d+)$")
        from recordkit.storage.checksum import sidecar_path
        for name in location.listdir(self.directory, self.storage_options):
            m = pattern.match(name)
            if m and int(m.group(1)) >= written:
                stale = location.join(self.directory, name)
                location.remove(sidecar_path(stale), self.storage_options)
                location.remove(stale, self.storage_options)

    def abort(self) -> None:
        for f in self._files.values():
            f.discard()
        self._files.clear()
