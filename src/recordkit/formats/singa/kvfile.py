"""KVFile / DataShard (SINGA 0.1-0.3): ``<Q keylen`` key ``<Q vallen`` value, repeated.

No header, magic, index or checksum (spec section 1). ``Insert("00000", "abc")`` is
``05 00*7 '00000' 03 00*7 'abc'``. A path that is a directory is a SINGA 0.1 shard
folder and means ``<dir>/shard.dat`` when reading or appending (create takes the path
as the file, like KVFile).

Deviations from SINGA, on purpose: a truncated or corrupt tuple is an error (or, with
``tolerant=True``, a warning and the end) instead of a silent end; a zero-length value,
where SINGA's reader silently stops, is likewise reported; ``count()`` counts readable
tuples (SINGA's Count also counts a tail whose value is cut off); tuples larger than the
buffer read fine (SINGA's reader takes them for the end of file).
"""
from __future__ import annotations

from recordkit.formats.singa.framed import LEN, FramedStore
from recordkit.formats.singa.location import StoreLocation

SHARD_FILE = "shard.dat"


def encode_tuple(key: bytes, value: bytes) -> bytes:
    return LEN.pack(len(key)) + key + LEN.pack(len(value)) + value


class KVFileStore(FramedStore):
    kind = "kvfile"
    collect_keys = True

    def _resolve(self, location: StoreLocation) -> StoreLocation:
        if self.mode != "create" and location.isdir():
            return location.child(SHARD_FILE)
        return location

    def _frame(self, key: bytes, value: bytes) -> bytes:
        return encode_tuple(key, value)

    def _parse(self, f, start: int, index: int, size: int, scan: bool):
        if start >= size:
            return None
        klen = self._length(f, start, index, start, size, "key")
        key = self._take(f, klen, False, start, index)
        at = start + 8 + klen
        vlen = self._length(f, start, index, at, size, "value")
        if vlen == 0 and not scan:
            raise self.broken(start, index, "empty value (SINGA's KVFile reader stops reading here)")
        value = self._take(f, vlen, scan, start, index)
        return key, value, at + 8 + vlen
