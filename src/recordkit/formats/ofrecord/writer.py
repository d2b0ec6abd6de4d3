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
import struct
from typing import TYPE_CHECKING, Iterable

from recordkit.storage.atomic import AtomicFile
from recordkit.storage.staged_directory import StagedDirectory
from recordkit.storage import location
from recordkit.formats.closing import AtomicWriter
from recordkit.formats.ofrecord import codec
from recordkit.formats.ofrecord.dataset import STREAMS_SIDECAR, part_name, streams_document

if TYPE_CHECKING:
    from recordkit.engine.streams import StreamSpec

_LEN = struct.Struct("<q")


def frame(payload: bytes) -> bytes:
    return _LEN.pack(len(payload)) + payload


class OFRecordWriter(AtomicWriter):
    def __init__(self, directory: str | os.PathLike[str], num_parts: int = 1, *, sharding: str = "round_robin",
                 total: int | None = None, exact_total: bool = True, part_name_prefix: str = "part-",
                 part_name_suffix_length: int = 5, storage_options: dict | None = None, checksums: bool = False,
                 streams: Iterable[StreamSpec] | None = None, precision: str | None = None,
                 key_feature: str | None = "key") -> None:
        if num_parts < 1:
            raise ValueError("num_parts must be >= 1")
        if sharding not in ("round_robin", "contiguous"):
            raise ValueError("sharding must be 'round_robin' or 'contiguous'")
        if sharding == "contiguous" and total is None:
            raise ValueError("contiguous sharding needs the total number of records")
        self.directory = directory if isinstance(directory, str) else os.fspath(directory)
        self.storage_options = storage_options
        self.checksums = bool(checksums)
        self.prefix = part_name_prefix
        self._dir = StagedDirectory(self.directory, self._is_data_set_entry, storage_options=storage_options,
                                    foreign="keep", what="OFRecord data set")
        self.num_parts = int(num_parts)
        self.sharding = sharding
        self.total = total
        # the declarations are rendered now: a bad one fails before any record is written
        self._streams_doc = None if streams is None else streams_document(streams, precision, key_feature=key_feature)
        self.exact_total = bool(exact_total)
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

    def write(self, record: dict | bytes | bytearray) -> None:
        """Add one record: a dict of features (or of plain values), or already serialized bytes."""
        if self.total is not None and self.exact_total and self.records_written >= self.total:
            raise ValueError(f"more records than the declared total {self.total}")
        payload = record if isinstance(record, (bytes, bytearray)) else codec.encode(record)
        if len(payload) == 0:
            raise ValueError("an empty record cannot be framed (OneFlow requires length > 0)")
        part = self._part_of(self.records_written)
        f = self._files.get(part)
        if f is None:
            f = self._files[part] = AtomicFile(self._dir.path(part_name(self.prefix, part, self.suffix_length)),
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
                with AtomicFile(self._dir.path(STREAMS_SIDECAR), storage_options=self.storage_options) as f:
                    f.write(self._streams_doc)
            self._dir.commit()  # the whole data set at once (other entries of the directory kept)
        except BaseException:
            self.abort()
            raise
        self.paths = [location.join(self.directory, n) for n in names]

    def _is_data_set_entry(self, name: str) -> bool:
        """A part of a data set in this naming, or one of its sidecars (checksums, index)."""
        digits = re.escape(self.prefix) + r"\d+"
        return (re.fullmatch(rf"(?:{digits}(?:\.rkcrc)?|\.{digits}\.rkidx)", name) is not None
                or name == STREAMS_SIDECAR)

    def abort(self) -> None:
        for f in self._files.values():
            f.discard()
        self._files.clear()
        self._dir.discard()
