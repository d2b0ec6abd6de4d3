"""BinFile (SINGA >= 1.0 ``BinFileWriter``/``BinFileReader``; spec section 6.1).

Each tuple: magic ``'s' 'g'``, a key flag (1: a key follows, 0: the key is empty and
omitted), a reserved byte (0), then ``<Q keylen`` + key when flagged, ``<Q vallen`` +
value. ``("key1", "val1")`` is ``73 67 01 00 | 04 00*7 | key1 | 04 00*7 | val1``.

Reading a flag-0 tuple yields the key ``b""`` (SINGA leaves the previous key in place).
Bad magic or flag is an error naming the offset (SINGA: fatal "File format error"); a
cut-off tail is an error too (SINGA: usually a quiet end). Appending copies the complete
tuples and drops a broken tail instead of SINGA's plain append after it, which would
hide every appended tuple behind the broken one.
"""
from __future__ import annotations

from recordkit.formats.singa.framed import LEN, FramedStore

MAGIC = b"sg"


def encode_tuple(key: bytes, value: bytes) -> bytes:
    if key:
        return MAGIC + b"\x01\x00" + LEN.pack(len(key)) + key + LEN.pack(len(value)) + value
    return MAGIC + b"\x00\x00" + LEN.pack(len(value)) + value


class BinFileStore(FramedStore):
    kind = "binfile"

    def _frame(self, key: bytes, value: bytes) -> bytes:
        return encode_tuple(key, value)

    def _parse(self, f, start: int, index: int, size: int, scan: bool):
        if start >= size:
            return None
        head = f.read(4)
        if len(head) < 4:
            raise self.broken(start, index, f"tuple cut short: {len(head)} of the 4 magic bytes")
        if head[:2] != MAGIC:
            raise self.broken(start, index, f"bad magic {head[:2].hex(' ')} (expected 73 67 'sg')")
        if head[2] not in (0, 1):
            raise self.broken(start, index, f"bad key flag {head[2]} (expected 0 or 1)")
        at = start + 4
        key = b""
        if head[2] == 1:
            klen = self._length(f, start, index, at, size, "key")
            key = self._take(f, klen, False, start, index)
            at += 8 + klen
        vlen = self._length(f, start, index, at, size, "value")
        value = self._take(f, vlen, scan, start, index)
        return key, value, at + 8 + vlen
