"""Which SINGA store a path holds, from its content: ``"kvfile"``, ``"binfile"``, ``"textfile"`` or None.

None of the formats has a file header, so the first tuple is tried under each framing:
a BinFile starts with ``73 67`` + a 0/1 key flag + ``00`` and lengths that fit in the
file; a KVFile starts with key and value lengths that fit in the file. Lengths are 8-byte
integers, so a KVFile (small lengths: zero high bytes) and a BinFile (byte 3 is 0) always
contain NUL bytes early, while a text file has none. A file matching no framing or more
than one - or an empty file, which every store reads as zero tuples - gives None, and the
caller must say which store it is.
"""
from __future__ import annotations

import struct

from recordkit.formats.singa.location import StoreLocation
from recordkit.storage.location import file_size

HEAD = 1 << 16
_Q = struct.Struct("<Q")


def _kvfile_first_tuple_fits(head: bytes, size: int) -> bool:
    if len(head) < 16:
        return False
    klen = _Q.unpack_from(head, 0)[0]
    if klen > size - 16 or 8 + klen + 8 > len(head):
        return False
    vlen = _Q.unpack_from(head, 8 + klen)[0]
    return 0 < vlen <= size - 16 - klen


def _binfile_first_tuple_fits(head: bytes, size: int) -> bool:
    if len(head) < 12 or head[:2] != b"sg" or head[2] not in (0, 1) or head[3] != 0:
        return False
    at = 4
    if head[2] == 1:
        klen = _Q.unpack_from(head, at)[0]
        if klen > size - at - 8 or at + 8 + klen + 8 > len(head):
            return False
        at += 8 + klen
    vlen = _Q.unpack_from(head, at)[0]
    return vlen <= size - at - 8


def sniff_bytes(head: bytes, size: int) -> str | None:
    """The store kind of a file of ``size`` bytes that starts with ``head`` (None: unknown/ambiguous)."""
    if size == 0:
        return None
    kinds = []
    if _kvfile_first_tuple_fits(head, size):
        kinds.append("kvfile")
    if _binfile_first_tuple_fits(head, size):
        kinds.append("binfile")
    if b"\x00" not in head:
        kinds.append("textfile")
    return kinds[0] if len(kinds) == 1 else None


def sniff_store(path, storage_options=None) -> str | None:
    """``"kvfile"``, ``"binfile"``, ``"textfile"`` or None for an existing path (local or fsspec URL).

    A directory holding ``shard.dat`` is a SINGA 0.1 shard folder (a KVFile).
    """
    loc = StoreLocation(path, storage_options)
    if not loc.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if loc.isdir():
        shard = loc.child("shard.dat")
        if not shard.exists():
            return None
        loc = shard
    with loc.open_read() as f:
        size = file_size(f)
        head = f.read(HEAD)
    return sniff_bytes(head, size)
