"""``recordkit checksum``: make and check the ``.rkcrc`` sidecar of a file (local or URL).

Above the byte sources (``source.py``), the sidecar format (``checksum.py``) and the atomic writer
(``atomic.py``): it reads a file through its source and writes the sidecar through ``AtomicFile``.
"""
from __future__ import annotations

from recordkit.storage.atomic import write_sidecar
from recordkit.storage.checksum import ChecksumTable, VerifiedSource, compute, load_for, sidecar_path
from recordkit.storage.source import open_source


def create(path, *, block_size: int | None = None, storage_options=None, progress=None) -> str:
    """Compute and write the sidecar of an existing file (``recordkit checksum create``)."""
    src = open_source(path, storage_options=storage_options, verify=False)
    try:
        table = compute(src, block_size=block_size, progress=progress)
    finally:
        src.close()
    return write_sidecar(path, table, storage_options=storage_options)


def verify(path, *, storage_options=None, progress=None) -> ChecksumTable:
    """Check every block of ``path`` against its sidecar; FormatError on the first mismatch."""
    src = open_source(path, storage_options=storage_options, verify=False)
    try:
        table = load_for(src, storage_options=storage_options)
        if table is None:
            raise FileNotFoundError(f"{sidecar_path(path)}: no checksum index for {path}")
        checker = VerifiedSource(src, table)
        for b in range(len(table.crcs)):
            start, end = table.block_range(b)
            checker.pread(start, end - start)
            if progress is not None:
                progress(end - start)
        return table
    finally:
        src.close()
