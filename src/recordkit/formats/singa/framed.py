"""Length-framed binary stores (KVFile, BinFile): shared reading, validation and append.

Both formats store ``size_t`` lengths, i.e. 8-byte little-endian unsigned integers on the
64-bit Linux builds SINGA targeted. A length is checked against the bytes left in the
file *before* anything is read, so a corrupt field is reported, never turned into a
huge allocation. Subclasses parse one tuple header (``_parse``) and encode one tuple.
"""
from __future__ import annotations

import struct

from recordkit.errors import FormatError
from recordkit.formats.singa.base import Store, report
from recordkit.storage.location import file_size

LEN = struct.Struct("<Q")
DEFAULT_CAPACITY = 10 * 1024 * 1024  # KVFile / BinFile default buffer (10 MiB)


class FramedStore(Store):
    collect_keys = False  # remember the keys of the existing tuples on append

    def __init__(self, path, mode="read", *, tolerant: bool = False, storage_options=None,
                 capacity: int = DEFAULT_CAPACITY, checksums: bool | None = None):
        self.capacity = int(capacity)
        self.existing = 0            # complete tuples found in the file when appending
        self._existing_keys = set()
        super().__init__(path, mode, tolerant=tolerant, storage_options=storage_options, checksums=checksums)

    # -- field readers used by _parse --------------------------------------------------------------
    def _length(self, f, start: int, index: int, at: int, size: int, what: str) -> int:
        """Read the 8-byte length at offset ``at``; it must fit in the rest of the file."""
        raw = f.read(8)
        if len(raw) < 8:
            raise self.broken(start, index, f"tuple cut short: {what} length field at byte {at} has "
                                            f"{len(raw)} of 8 bytes")
        n = LEN.unpack(raw)[0]
        left = size - at - 8
        if n > left:
            raise self.broken(start, index, f"{what} length {n} at byte {at} exceeds the {left} bytes "
                                            f"left in the file (truncated or corrupt tuple)")
        return n

    def _take(self, f, n: int, skip: bool, start: int, index: int) -> bytes:
        """n bytes of the tuple at ``start`` (skipped when scanning); a short read means the file
        shrank after it was opened: an error, never a truncated key or value."""
        if skip:
            f.seek(n, 1)
            return b""
        data = f.read(n)
        if len(data) < n:
            raise self.broken(start, index, f"tuple cut short: {len(data)} of {n} bytes (the file shrank "
                                            f"while being read)")
        return data

    def _parse(self, f, start: int, index: int, size: int, scan: bool):  # pragma: no cover
        """(key, value, end offset) of the tuple at ``start``; None at a clean end of file."""
        raise NotImplementedError

    # -- Store hooks -----------------------------------------------------------------------------------
    def _next(self):
        item = self._parse(self._file, self._pos, self._index, self._size, scan=False)
        if item is None:
            return None
        key, value, self._pos = item
        self._index += 1
        return key, value

    def _frame(self, key: bytes, value: bytes) -> bytes:  # pragma: no cover
        raise NotImplementedError

    def _encode(self, key: bytes, value: bytes) -> bytes:
        data = self._frame(key, value)
        if len(data) > self.capacity:
            # SINGA's writer aborts (CHECK) here and its reader would see the tuple as end of file.
            raise ValueError(f"{self.path}: a {len(data)}-byte tuple exceeds the {self.capacity}-byte buffer "
                             f"SINGA reads with (pass capacity= to allow it)")
        return data

    def _refuse(self, key: bytes, value: bytes):
        if not value:
            return "empty value (SINGA's Write refuses it)"
        if self.collect_keys and key in self._existing_keys:
            return f"key {key!r} already exists in the file (SINGA's append mode rejects it)"
        return None

    def _prepare_append(self) -> None:
        """Copy every complete tuple of the existing file into the new version.

        A broken tail (what a crash during SINGA's own append leaves) is reported and
        dropped, so the appended tuples follow the last complete one - SINGA resumes at
        the same place but overwrites in place, leaving stale bytes or a zero hole.
        """
        with self.location.open_read() as old:
            size = file_size(old)
            pos = index = 0
            while True:
                try:
                    item = self._parse(old, pos, index, size, scan=True)
                except FormatError as e:
                    self.errors += 1
                    report(f"{e} [append: the broken tail, {size - pos} byte(s), is dropped]", stacklevel=4)
                    break
                if item is None:
                    break
                key, _, pos = item
                index += 1
                if self.collect_keys:
                    self._existing_keys.add(key)
            self._out.copy_from(old, pos)
        self.existing = index
