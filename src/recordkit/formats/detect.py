"""Which format a path holds: by content first (magic numbers), then by extension."""
from __future__ import annotations

import os
import struct

from recordkit.formats.cbf import layout as cbf_layout

CTF_EXTENSIONS = {".ctf", ".txt", ".text"}
CBF_EXTENSIONS = {".cbf", ".bin"}


def sniff(path) -> str:
    """'cbf', 'ofrecord', 'singa' or 'ctf' for an existing path: a directory of part files is
    OFRecord (one holding shard.dat a SINGA 0.1 shard); a file: the CBF magic number, else a
    first frame that parses as an OFRecord, else a SINGA KVFile/BinFile layout, else its
    extension, else CTF.

    The extension matters for damaged files: a ``.cbf`` whose magic number is gone
    should be reported as a broken CBF file, not parsed as text.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    if os.path.isdir(path):
        return "singa" if os.path.exists(os.path.join(path, "shard.dat")) else "ofrecord"
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) == 8 and struct.unpack("<Q", head)[0] == cbf_layout.MAGIC:
            return "cbf"
        if len(head) == 8 and _looks_like_ofrecord(f, struct.unpack("<q", head)[0], os.fstat(f.fileno()).st_size):
            return "ofrecord"
    from recordkit.formats.singa.sniff import sniff as sniff_singa
    if sniff_singa(path) in ("kvfile", "binfile"):  # text is CTF unless --store textfile says otherwise
        return "singa"
    return by_extension(path, "ctf")


def by_extension(path, default: str | None = None) -> str | None:
    """'cbf'/'ctf' from a file name (for outputs, which do not exist yet)."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext in CBF_EXTENSIONS:
        return "cbf"
    if ext in CTF_EXTENSIONS:
        return "ctf"
    return default


def _looks_like_ofrecord(f, length: int, size: int) -> bool:
    if not 0 < length <= min(size - 8, 64 << 20):
        return False
    from recordkit.formats.ofrecord import schema
    msg = schema.OFRecord()
    try:
        msg.ParseFromString(f.read(length))
    except Exception:
        return False
    return len(msg.feature) > 0
