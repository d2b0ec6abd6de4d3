"""The POSIX ustar layout, written and scanned directly (no ``tarfile``).

``tarfile`` builds one ``TarInfo`` object and one header through Python string formatting
per member, which is most of the cost when a shard holds hundreds of thousands of small
``.npy`` members; here a whole run of members gets its 512-byte headers in a few NumPy
operations (names, octal sizes and checksums computed column-wise), and the scan of a
shard reads each header once, checking its checksum and that its data lies inside the file.

Written headers are plain ustar (``ustar\\0`` + ``00``, mode 0644, uid/gid 0, one mtime), what
``tarfile``, GNU tar and WebDataset read. The scanner also accepts GNU headers
(``ustar  \\0``), pax extended headers (``x``: a ``path=`` record renames the next member;
``g`` is skipped) and GNU long names (``L``), which ``tarfile``-based writers produce.
"""
from __future__ import annotations

import time

import numpy as np

from recordkit.errors import FormatError

BLOCK = 512
NAME_MAX = 100
END = bytes(2 * BLOCK)
_ZERO = bytes(BLOCK)


def _template(mtime: int) -> np.ndarray:
    h = bytearray(BLOCK)
    h[100:108] = b"0000644\0"
    h[108:116] = b"0000000\0"
    h[116:124] = b"0000000\0"
    h[136:148] = b"%011o\0" % (mtime & 0o77777777777)
    h[148:156] = b" " * 8  # checksum field counts as spaces
    h[156:157] = b"0"
    h[257:263] = b"ustar\0"
    h[263:265] = b"00"
    return np.frombuffer(bytes(h), dtype=np.uint8)


class HeaderBuilder:
    def __init__(self, mtime: int | None = None):
        self.template = _template(int(time.time()) if mtime is None else int(mtime))

    def build(self, names: list[bytes], sizes: np.ndarray) -> np.ndarray:
        """(n, 512) uint8 ustar headers for members ``names`` of ``sizes`` bytes."""
        n = len(names)
        hdr = np.empty((n, BLOCK), dtype=np.uint8)
        hdr[:] = self.template
        if n == 0:
            return hdr
        fixed = np.array(names, dtype=f"S{NAME_MAX}")
        if max(map(len, names)) > NAME_MAX:
            long = next(x for x in names if len(x) > NAME_MAX)
            raise ValueError(f"tar member name {long.decode(errors='replace')!r} is longer than {NAME_MAX} bytes")
        hdr[:, :NAME_MAX] = fixed.view(np.uint8).reshape(n, NAME_MAX)
        sizes = np.asarray(sizes, dtype=np.int64)
        if len(sizes) and sizes.max() >= 8 ** 11:
            raise ValueError("a tar member of 8 GiB or more needs a GNU/pax size field")
        shifts = np.arange(10, -1, -1, dtype=np.int64) * 3
        hdr[:, 124:135] = ((sizes[:, None] >> shifts) & 7) + 48
        hdr[:, 135] = 0
        chk = hdr.sum(axis=1, dtype=np.int64)
        shifts6 = np.arange(5, -1, -1, dtype=np.int64) * 3
        hdr[:, 148:154] = ((chk[:, None] >> shifts6) & 7) + 48
        hdr[:, 154] = 0
        hdr[:, 155] = 32
        return hdr


def padded(sizes: np.ndarray) -> np.ndarray:
    """Bytes a member's data occupies: its size rounded up to whole blocks."""
    return (np.asarray(sizes, dtype=np.int64) + (BLOCK - 1)) // BLOCK * BLOCK


def _octal(field: bytes, path, offset, what) -> int:
    text = field.split(b"\0", 1)[0].strip(b" ")
    if field[:1] and field[0] & 0x80:  # GNU base-256 for large values
        raw = bytes([field[0] & 0x7F]) + field[1:]
        return int.from_bytes(raw, "big")
    try:
        return int(text, 8) if text else 0
    except ValueError:
        raise FormatError(path, f"tar header: {what} field {field!r} is not an octal number", offset=offset) from None


def _pax_path(data: bytes) -> bytes | None:
    """The ``path`` of a pax extended header (records ``LEN key=value\\n``)."""
    pos, found = 0, None
    while pos < len(data):
        sp = data.find(b" ", pos)
        if sp < 0:
            break
        try:
            n = int(data[pos:sp])
        except ValueError:
            break
        if n <= 0:
            break
        rec = data[sp + 1:pos + n - 1]
        key, _, value = rec.partition(b"=")
        if key == b"path":
            found = value
        pos += n
    return found


def _check_sums(buf, positions, path) -> None:
    """Every header's checksum at once (a flipped bit in a name or a size is caught here)."""
    if not positions:
        return
    arr = np.frombuffer(buf, dtype=np.uint8)
    blocks = arr[:len(arr) // BLOCK * BLOCK].reshape(-1, BLOCK)  # headers start on block boundaries
    allpos = np.asarray(positions, dtype=np.int64)
    for first in range(0, len(allpos), 8192):  # bounded memory: 8192 headers at a time
        _check_batch(blocks, allpos[first:first + 8192], first, path)


def _check_batch(blocks, pos, first, path) -> None:
    rows = blocks[pos // BLOCK]
    computed = rows[:, :148].sum(axis=1, dtype=np.int64) + rows[:, 156:].sum(axis=1, dtype=np.int64) + 256
    field = rows[:, 148:156]
    digits = (field >= 48) & (field <= 55)
    # the stored value: its octal digits, up to the first NUL or space
    stored = np.zeros(len(pos), dtype=np.int64)
    active = np.ones(len(pos), dtype=bool)
    for k in range(8):
        d = digits[:, k] & active
        stored = np.where(d, stored * 8 + (field[:, k].astype(np.int64) - 48), stored)
        leading_space = (field[:, k] == 32) & (stored == 0)
        active &= d | leading_space
    bad = np.flatnonzero(stored != computed)
    if len(bad):
        i = int(bad[0])
        raise FormatError(path, f"tar header checksum mismatch (stored {int(stored[i])}, computed {int(computed[i])})",
                          offset=int(pos[i]), record=f"header {first + i}")


def scan(data, path) -> tuple[list[bytes], np.ndarray, np.ndarray, np.ndarray]:
    """Every regular member of the tar bytes ``data``: (names, data offsets, sizes, header offsets).

    Raises a ``FormatError`` with the byte offset for a bad checksum or magic, a member whose
    data runs past the end (truncated shard), or a missing end-of-archive marker.
    """
    data = bytes(data) if not isinstance(data, bytes) else data
    buf = memoryview(data)
    total = len(data)
    names, offs, sizes, hdr_offs = [], [], [], []
    pos = 0
    pending_name = None
    ended = False
    all_pos = []
    while pos + BLOCK <= total:
        magic = data[pos + 257:pos + 263]
        if magic not in (b"ustar\0", b"ustar "):
            if data[pos:pos + BLOCK] == _ZERO:
                ended = True
                break
            raise FormatError(path, f"not a tar header (magic {magic!r}): damaged or not a tar shard",
                              offset=pos, record=f"member {len(names)}")
        all_pos.append(pos)
        field = data[pos + 124:pos + 136]
        try:
            size = int(field.split(b"\0", 1)[0].strip(b" ") or b"0", 8) if not field[0] & 0x80 else _octal(
                field, path, pos, "size")
        except ValueError:
            raise FormatError(path, f"tar header: size field {field!r} is not an octal number", offset=pos,
                              record=f"member {len(names)}") from None
        start = pos + BLOCK
        if start + size > total:
            raise FormatError(path, f"member data runs past the end of the shard: needs {size} bytes at offset "
                                    f"{start}, the file has {total - start} (truncated shard?)",
                              offset=pos, record=f"member {len(names)}")
        kind = data[pos + 156]
        if kind in (48, 0, 55):  # '0', NUL, '7': regular files
            if pending_name is not None:
                name = pending_name
            else:
                name = data[pos:pos + 100].split(b"\0", 1)[0]
                if magic == b"ustar\0" and data[pos + 345]:
                    name = data[pos + 345:pos + 500].split(b"\0", 1)[0] + b"/" + name
            names.append(name)
            offs.append(start)
            sizes.append(size)
            hdr_offs.append(pos)
            pending_name = None
        elif kind == 120:  # 'x'
            pending_name = _pax_path(data[start:start + size])
        elif kind == 76:  # 'L'
            pending_name = data[start:start + size].split(b"\0", 1)[0]
        # directories, links, global pax headers...: no data for us
        pos = start + (size + BLOCK - 1) // BLOCK * BLOCK
    _check_sums(buf, all_pos, path)
    if not ended:
        raise FormatError(path, "no end-of-archive marker: the shard ends inside or right after a member "
                                "(truncated shard?)", offset=min(pos, total), record=f"after member {len(names)}")
    return names, np.array(offs, dtype=np.int64), np.array(sizes, dtype=np.int64), np.array(hdr_offs, dtype=np.int64)


_USTAR = np.frombuffer(b"ustar\0", dtype=np.uint8)
_OCTAL = 8 ** np.arange(10, -1, -1, dtype=np.int64)


def scan_fast(data, path):
    """``scan`` for plain shards, without a Python step per member: every block whose magic says
    ustar is taken as a header, and the result is used only if those headers chain exactly (each
    one's size leads to the next, the last to an end-of-archive block), all regular files with
    plain names, each maybe after a pax header that does not rename it. Otherwise None, and the caller uses ``scan`` (which locates problems).
    Returns (names as a NumPy bytes array, data offsets, sizes, header offsets)."""
    nblocks = len(data) // BLOCK
    if nblocks < 2:
        return None
    blocks = np.frombuffer(data, dtype=np.uint8, count=nblocks * BLOCK).reshape(nblocks, BLOCK)
    cand = np.flatnonzero((blocks[:, 257:263] == _USTAR).all(axis=1))
    if len(cand) == 0 or cand[0] != 0:
        return None
    hdr = blocks[cand]
    if not np.isin(hdr[:, 156], (48, 0, 120)).all() or hdr[:, 345].any() or np.any(hdr[:, 263:265] != 48):
        return None
    digits = hdr[:, 124:135].astype(np.int64) - 48
    if ((digits < 0) | (digits > 7)).any():
        return None
    sizes = digits @ _OCTAL
    nxt = cand + 1 + (sizes + BLOCK - 1) // BLOCK
    if not np.array_equal(nxt[:-1], cand[1:]) or nxt[-1] >= nblocks or blocks[nxt[-1]].any():
        return None
    _check_sums(memoryview(data), (cand * BLOCK).tolist(), path)
    pax = hdr[:, 156] == 120
    if pax.any():  # pax headers (``tarfile``'s, webdataset.TarWriter's: a float mtime) before members
        px = np.flatnonzero(pax)
        if px[-1] == len(cand) - 1 or pax[px + 1].any():
            return None
        for a, n in zip(((cand[px] + 1) * BLOCK).tolist(), sizes[px].tolist()):
            if b"path=" in data[a:a + n]:
                return None  # a pax path renames the member: ``scan`` applies it
        cand, hdr, sizes = cand[~pax], hdr[~pax], sizes[~pax]
    names = np.ascontiguousarray(hdr[:, :NAME_MAX]).view(f"S{NAME_MAX}").ravel()
    return names, cand * BLOCK + BLOCK, sizes, cand * BLOCK
