"""Which format a path holds: by content first (magic numbers), then by extension."""
from __future__ import annotations

import os
import struct

from recordkit.formats.cbf import layout as cbf_layout

CTF_EXTENSIONS = {".ctf", ".txt", ".text"}
CBF_EXTENSIONS = {".cbf", ".bin"}


def sniff(path, storage_options=None) -> str:
    """'cbf', 'ofrecord', 'singa' or 'ctf' for an existing path (local or fsspec URL): a
    directory of part files is OFRecord (one holding shard.dat a SINGA 0.1 shard); a file:
    the CBF magic number, else a first frame that parses as an OFRecord, else a SINGA
    KVFile/BinFile layout, else its extension, else CTF.

    The extension matters for damaged files: a ``.cbf`` whose magic number is gone
    should be reported as a broken CBF file, not parsed as text.
    """
    from recordkit.storage import location
    from recordkit.storage.source import open_source
    location.ensure_regular(path, storage_options)  # a FIFO or device: "not a regular file", not "no such file"
    bridge = sniff_bridge(path, storage_options)
    if bridge is not None:
        return bridge
    if location.isdir(path, storage_options):
        shard = location.join(path, "shard.dat")
        return "singa" if location.isfile(shard, storage_options) else "ofrecord"
    if not location.isfile(path, storage_options):
        raise FileNotFoundError(f"{path}: no such file")
    src = open_source(path, storage_options=storage_options, verify=False)
    try:
        head = src.pread(0, 8, cache=False)
        if len(head) == 8 and struct.unpack("<Q", head)[0] == cbf_layout.MAGIC:
            return "cbf"
        if len(head) == 8 and _looks_like_ofrecord(src, struct.unpack("<q", head)[0]):
            return "ofrecord"
    finally:
        src.close()
    from recordkit.formats.singa.sniff import sniff as sniff_singa
    if sniff_singa(path, storage_options) in ("kvfile", "binfile"):  # text is CTF unless --store textfile says otherwise
        return "singa"
    return by_extension(path, "ctf")


BRIDGE_FORMATS = ("webdataset", "tfrecord", "mds")


def sniff_bridge(path, storage_options=None) -> str | None:
    """'mds', 'tfrecord' or 'webdataset' for a shard directory of those formats (an MDS
    ``index.json``, ``*.tfrecord`` files, ``*.tar`` shards) or a single ``.tfrecord``/``.tar``
    file; None otherwise. Their readers live in ``formats/<name>/`` (imported lazily)."""
    from recordkit.storage import location
    if location.isdir(path, storage_options):
        names = location.listdir(path, storage_options)
        if "index.json" in names:
            return "mds"
        if any(n.endswith((".tfrecord", ".tfrecords")) for n in names):
            return "tfrecord"
        if any(n.endswith(".tar") for n in names):
            return "webdataset"
        return None
    name = str(path).lower()
    if name.endswith((".tfrecord", ".tfrecords")):
        return "tfrecord"
    if name.endswith(".tar"):
        return "webdataset"
    return None


def by_extension(path, default: str | None = None) -> str | None:
    """'cbf'/'ctf' from a file name (for outputs, which do not exist yet)."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext in CBF_EXTENSIONS:
        return "cbf"
    if ext in CTF_EXTENSIONS:
        return "ctf"
    return default


def _looks_like_ofrecord(src, length: int) -> bool:
    if not 0 < length <= min(src.size - 8, 64 << 20):
        return False
    from recordkit.formats.ofrecord import schema
    msg = schema.OFRecord()
    try:
        msg.ParseFromString(src.pread(8, length, cache=False))
    except Exception:
        return False
    return len(msg.feature) > 0
