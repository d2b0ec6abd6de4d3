"""The optional checksummed index: a ``NAME.rkcrc`` sidecar with a CRC-32 per block of NAME.

CTF, CBF, OFRecord parts and SINGA stores carry no checksums, so a flipped bit reads as
a plausible wrong value. The sidecar adds them without changing the format (the original
frameworks still read the files): the file is cut into fixed blocks (1 MiB by default)
and the sidecar lists each block's CRC-32. It is format-agnostic on purpose: every reader
reads through a byte source (``storage.source``), so one verifying source covers every
format, local and remote, and needs no per-format index code.

Layout (little-endian): ``RKCRC\\0`` + version (u16 = 1), block size (u64), file size
(u64), block count (u64), one u32 CRC per block, then a u32 CRC of everything before it.

Verification is on whenever the sidecar exists: each range a reader asks for is widened
to whole blocks, and every block is checked before any of its bytes are returned. A
mismatch is a ``FormatError`` naming the file, the block and its byte range. A sidecar
made for another size of file is an error too (the file changed after the sidecar was
written); a damaged sidecar is an error naming the sidecar.

Writers (``checksums=True``, ``recordkit convert --checksum``) create it after the data
file is complete, and any recordkit writer replacing a file removes its old sidecar
*before* the new data appears, so a crash leaves at worst a file without a sidecar,
never new data beside old checksums.
"""
from __future__ import annotations

import os
import struct
import zlib

import numpy as np

from recordkit.errors import FormatError
from recordkit.storage.location import SIDECAR_SUFFIX, is_url, sidecar_path

SUFFIX = SIDECAR_SUFFIX  # the old name
MAGIC = b"RKCRC\0"
VERSION = 1
DEFAULT_BLOCK_SIZE = 1 << 20
_HEAD = struct.Struct("<6sHQQQ")


class ChecksumTable:
    def __init__(self, block_size: int, file_size: int, crcs: np.ndarray, path: str):
        self.block_size = int(block_size)
        self.file_size = int(file_size)
        self.crcs = crcs
        self.path = path

    def block_range(self, block: int) -> tuple[int, int]:
        start = block * self.block_size
        return start, min(self.file_size, start + self.block_size)

    def to_bytes(self) -> bytes:
        body = _HEAD.pack(MAGIC, VERSION, self.block_size, self.file_size, len(self.crcs))
        body += self.crcs.astype("<u4").tobytes()
        return body + struct.pack("<I", zlib.crc32(body))

    @classmethod
    def from_bytes(cls, data: bytes, path: str) -> "ChecksumTable":
        if len(data) < _HEAD.size + 4:
            raise FormatError(path, f"checksum index is {len(data)} bytes, too short for its header", offset=0)
        magic, version, block_size, file_size, count = _HEAD.unpack_from(data)
        if magic != MAGIC:
            raise FormatError(path, "not a recordkit checksum index (bad magic)", offset=0)
        if version != VERSION:
            raise FormatError(path, f"checksum index version {version} is not supported (this recordkit reads {VERSION})",
                              offset=6)
        expected = _HEAD.size + 4 * count + 4
        if len(data) != expected or block_size <= 0 or count != -(-file_size // block_size):
            raise FormatError(path, f"checksum index is damaged: {len(data)} bytes for {count} blocks of "
                                    f"{block_size} over {file_size} bytes", offset=0)
        (stored,) = struct.unpack_from("<I", data, expected - 4)
        if zlib.crc32(data[:expected - 4]) != stored:
            raise FormatError(path, "checksum index is damaged: its own CRC does not match", offset=expected - 4)
        crcs = np.frombuffer(data, dtype="<u4", count=count, offset=_HEAD.size).astype(np.uint32)
        return cls(block_size, file_size, crcs, path)


def compute(source, *, block_size: int | None = None, progress=None) -> ChecksumTable:
    """The table of ``source`` (a byte source), reading it once in blocks (``DEFAULT_BLOCK_SIZE``)."""
    block_size = DEFAULT_BLOCK_SIZE if block_size is None else int(block_size)
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, not {block_size}")
    size = source.size
    count = -(-size // block_size)
    crcs = np.empty(count, dtype=np.uint32)
    for b in range(count):
        start = b * block_size
        want = min(block_size, size - start)
        data = source.pread(start, want, cache=False)
        if len(data) != want:
            raise FormatError(source.name, f"file shrank while its checksums were computed "
                                           f"(block {b} at byte {start}: {len(data)} of {want} bytes)", offset=start)
        crcs[b] = zlib.crc32(data)
        if progress is not None:
            progress(len(data))
    return ChecksumTable(block_size, size, crcs, sidecar_path(source.name))


class _LocalFile:
    """A local file as the byte source ``compute`` reads (``pread``/``size``/``name``)."""

    def __init__(self, path: str):
        from recordkit.storage.location import open_regular
        self.name = path
        self._fd = open_regular(path)
        self.size = os.fstat(self._fd).st_size

    def pread(self, offset: int, n: int, **_) -> bytes:
        return os.pread(self._fd, n, offset)

    def close(self) -> None:
        os.close(self._fd)


def compute_local(path: str, *, block_size: int | None = None) -> ChecksumTable:
    src = _LocalFile(path)
    try:
        return compute(src, block_size=block_size)
    finally:
        src.close()


def load_for(source, *, storage_options=None) -> ChecksumTable | None:
    """The sidecar of ``source`` if it has one (checked against the file's size), else None."""
    return table_from(source, sidecar_bytes(source, storage_options=storage_options))


def sidecar_bytes(source, *, storage_options=None) -> bytes | None:
    """The bytes of ``source``'s sidecar, None when it has none."""
    return sidecar_bytes_of(source.name, storage_options=storage_options)


def sidecar_bytes_of(path: str, *, storage_options=None) -> bytes | None:
    """The bytes of the sidecar of the file at ``path``, None when it has none. A remote one is
    one request: a GET, answered by the store with the bytes or "no such key"."""
    return _read_if_exists(sidecar_path(path), storage_options)


def table_from(source, data: bytes | None) -> ChecksumTable | None:
    """The sidecar ``data`` of ``source`` parsed and checked against the file's size (None: no sidecar)."""
    if data is None:
        return None
    side = sidecar_path(source.name)
    table = ChecksumTable.from_bytes(data, side)
    if table.file_size != source.size:
        raise FormatError(source.name, f"file is {source.size} bytes but its checksum index {side} was made for "
                                       f"{table.file_size} bytes: the file changed after the index was written "
                                       f"(rebuild it with `recordkit checksum create`)")
    return table


class VerifiedSource:
    """A byte source whose every returned byte was checked against the sidecar's CRCs."""

    def __init__(self, inner, table: ChecksumTable):
        self.inner = inner
        self.table = table
        self.name = inner.name
        self.size = inner.size
        self.fingerprint = inner.fingerprint
        self.remote = inner.remote
        self.local_path = inner.local_path
        self.stats = inner.stats
        self.in_flight = getattr(inner, "in_flight", 1)

    def pread(self, offset: int, n: int, *, cache: bool = True) -> bytes:
        if n <= 0 or offset >= self.size:
            return self.inner.pread(offset, n, cache=cache)
        bs = self.table.block_size
        first = offset // bs
        last = (min(offset + n, self.size) - 1) // bs
        start = first * bs
        end = min(self.size, (last + 1) * bs)
        data = self.inner.pread(start, end - start, cache=cache)
        view = memoryview(data)
        for b in range(first, last + 1):
            lo, hi = self.table.block_range(b)
            block = view[lo - start:hi - start]
            if len(block) != hi - lo:
                break  # truncated under us: the reader reports the short read
            if zlib.crc32(block) != int(self.table.crcs[b]):
                raise FormatError(self.name, f"checksum mismatch in block {b} (bytes {lo}..{hi}): the data "
                                             f"differs from what {self.table.path} recorded", offset=lo)
        return bytes(view[offset - start:offset - start + n]) if (start != offset or len(data) > n) else data

    def current_size(self) -> int:
        return self.inner.current_size()

    def close(self) -> None:
        self.inner.close()


def _read_if_exists(path: str, storage_options) -> bytes | None:
    if is_url(path):
        from recordkit.storage.location import filesystem
        from recordkit.storage.retry import RetryPolicy
        fs, p = filesystem(path, storage_options)
        try:
            return RetryPolicy.default().call(lambda: fs.cat_file(p, **_one_request(fs)), what=path)
        except (FileNotFoundError, PermissionError):
            # S3 answers 403, not 404, for a missing key when the reader may not list the bucket:
            # that must not make every file of a read-only public bucket unreadable
            return None
    from recordkit.storage.location import has_file, open_local
    if not has_file(path):  # a sidecar that is a FIFO is refused here, not opened (which would block)
        return None
    try:
        with open_local(path) as f:
            return f.read()
    except FileNotFoundError:  # removed since
        return None


def _one_request(fs) -> dict:
    """``cat_file`` arguments that make a whole-object read one GET: s3fs otherwise asks for the
    size first (a HEAD, and for a missing key a listing too), two round trips more per open."""
    import inspect
    cat = getattr(fs, "_cat_file", None)
    if hasattr(fs, "call_s3") and cat is not None and "max_concurrency" in inspect.signature(cat).parameters:
        return {"max_concurrency": 1}
    return {}
