"""The CBF byte layout (seeds 000/001): prefix, chunks, header with the offset table.

```
u64 magic 0x636e746b5f62696e ("cntk_bin"), u32 version 1            prefix, 12 bytes
chunk 0 .. chunk C-1                                                   data
u64 magic, u32 C, u32 S                                                header
S x { u8 storage (0 dense, 1 sparse), u32 name length, name,
      u8 element type (0 float32, 1 float64), u32 sample dim }
C x { i64 chunk offset, u32 sequences, u32 samples }                   offset table
i64 header offset                                                      last 8 bytes
```
All little-endian. This module parses and validates the prefix and header; chunk
contents are walked by the compiled kernel.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from recordkit.errors import FormatError
from recordkit.storage.probe import OPENING_BLOCK

MAGIC = 0x636E746B5F62696E
VERSION = 1
PREFIX = struct.Struct("<QI")
HEADER_HEAD = struct.Struct("<QII")
CHUNK_ENTRY = np.dtype([("offset", "<i8"), ("sequences", "<u4"), ("samples", "<u4")])
ELEMENT_TYPES = {0: np.dtype("<f4"), 1: np.dtype("<f8")}
STORAGE = {0: "dense", 1: "sparse"}


@dataclass(frozen=True)
class StreamHeader:
    name: str
    format: str       # "dense" | "sparse"
    dtype: np.dtype   # float32 | float64
    dim: int


@dataclass(frozen=True)
class FileHeader:
    version: int
    streams: list
    table: np.ndarray     # CHUNK_ENTRY records
    header_offset: int
    file_size: int

    def chunk_ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """(start, size) of every chunk, int64 arrays: a chunk ends where the next chunk (the
        last: the header) starts."""
        start = self.table["offset"].astype(np.int64)
        return start, np.append(start[1:], self.header_offset) - start


# what a remote open fetches first, at once: the first block (the prefix and chunk 0's length
# table) and the last (the header and offset table of up to ~4000 chunks); a larger header costs
# one more request
FIRST_BLOCK = OPENING_BLOCK  # what storage/probe.py fetches with its look
LAST_BLOCK = OPENING_BLOCK


def open_ranges(size: int) -> list[tuple[int, int]]:
    """The ``(offset, n)`` ranges to fetch together before ``read_header``: the first and last block,
    or the whole file when they would meet."""
    if size <= FIRST_BLOCK + LAST_BLOCK:
        return [(0, size)]
    return [(0, FIRST_BLOCK), (size - LAST_BLOCK, LAST_BLOCK)]


def read_header(path: str, source, size: int | None = None) -> FileHeader:
    """Parse and validate everything outside the chunks; errors name the byte offset.

    ``source`` is the file's bytes, or a ``pread(offset, n)`` function with ``size``: only
    the prefix and the header region are read then, never the chunks.
    """
    if callable(source):
        pread = source
    else:
        data = memoryview(source)
        size = len(data)
        pread = lambda offset, n: bytes(data[offset:offset + n])  # noqa: E731

    def fail(msg, offset, record=None):
        raise FormatError(path, msg, offset=offset, record=record)

    def read(offset, n):
        got = pread(offset, n)
        if len(got) != n:
            fail(f"file shrank while being read: expected {n} bytes at offset {offset}, got {len(got)}", offset)
        return got

    if size < PREFIX.size + 8:
        fail(f"file is {size} bytes: too short for a CBF file (truncated?)", 0)
    magic, version = PREFIX.unpack(read(0, PREFIX.size))
    if magic != MAGIC:
        fail(f"not a CNTK binary format file: magic number 0x{magic:016x}, expected 0x{MAGIC:016x}", 0)
    if version != VERSION:
        fail(f"unsupported CBF version {version}: expected {VERSION}", 8)
    (header_offset,) = struct.unpack("<q", read(size - 8, 8))
    if not PREFIX.size <= header_offset <= size - 8 - HEADER_HEAD.size:
        fail(f"header offset {header_offset} (in the last 8 bytes) is outside the file "
             f"(expected {PREFIX.size}..{size - 8 - HEADER_HEAD.size}; truncated file?)", size - 8)
    # the header region as one buffer; positions below stay absolute (minus `base` to index it)
    mm = read(header_offset, size - header_offset)
    base = header_offset
    magic, nchunks, nstreams = HEADER_HEAD.unpack_from(mm, 0)
    if magic != MAGIC:
        fail(f"no CBF header at offset {header_offset}: magic number 0x{magic:016x} (truncated or damaged file?)",
             header_offset)
    pos = header_offset + HEADER_HEAD.size
    end = size - 8
    if nstreams == 0:
        fail("the header declares no streams", header_offset + 12)
    streams = []
    for i in range(nstreams):
        if pos + 5 > end:
            fail(f"stream description {i} runs past the header end", pos, f"stream {i}")
        storage, name_len = struct.unpack_from("<BI", mm, pos - base)
        if storage not in STORAGE:
            fail(f"stream {i}: unknown storage type {storage} (expected 0 dense or 1 sparse)", pos, f"stream {i}")
        if pos + 5 + name_len + 5 > end:
            fail(f"stream {i}: name of {name_len} bytes runs past the header end", pos + 1, f"stream {i}")
        raw = bytes(mm[pos + 5 - base:pos + 5 + name_len - base])
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            fail(f"stream {i}: name is not valid UTF-8/ASCII: {raw!r}", pos + 5, f"stream {i}")
        pos += 5 + name_len
        etype, dim = struct.unpack_from("<BI", mm, pos - base)
        if etype not in ELEMENT_TYPES:
            fail(f"stream '{name}': unknown element type {etype} (expected 0 float32 or 1 float64)", pos,
                 f"stream {i}")
        if dim == 0:
            fail(f"stream '{name}': sample dim is 0", pos + 1, f"stream {i}")
        if storage == 1 and dim > 2**31 - 1:
            fail(f"stream '{name}': sparse dim {dim} does not fit a signed 32-bit index", pos + 1, f"stream {i}")
        if dim > 2**31 - 1:
            fail(f"stream '{name}': dense dim {dim} exceeds 2147483647", pos + 1, f"stream {i}")
        pos += 5
        streams.append(StreamHeader(name, STORAGE[storage], ELEMENT_TYPES[etype], dim))
    if len({s.name for s in streams}) != len(streams):
        fail("two streams have the same name", header_offset)
    table_bytes = nchunks * CHUNK_ENTRY.itemsize
    if pos + table_bytes != end:
        fail(f"offset table of {nchunks} chunks ({table_bytes} bytes at offset {pos}) does not end at the "
             f"header offset field ({end}): damaged header", pos)
    table = np.frombuffer(mm, dtype=CHUNK_ENTRY, count=nchunks, offset=pos - base).copy()
    offs = table["offset"]
    for k in range(nchunks):
        o = int(offs[k])
        nxt = int(offs[k + 1]) if k + 1 < nchunks else header_offset
        if not PREFIX.size <= o < header_offset:
            fail(f"chunk {k} offset {o} is outside the data section [{PREFIX.size}, {header_offset})",
                 pos + k * 16, f"chunk {k}")
        if nxt <= o:
            fail(f"chunk offsets must increase: chunk {k} at {o}, next at {nxt}", pos + k * 16, f"chunk {k}")
        if 4 * int(table["sequences"][k]) > nxt - o:
            fail(f"chunk {k} claims {int(table['sequences'][k])} sequences but has only {nxt - o} bytes",
                 pos + k * 16, f"chunk {k}")
    if nchunks and int(offs[0]) != PREFIX.size:
        fail(f"chunk 0 starts at {int(offs[0])}, expected {PREFIX.size} (right after the prefix)", pos, "chunk 0")
    return FileHeader(version, streams, table, header_offset, size)


def encode_header(streams, table_rows, header_offset: int) -> bytes:
    """Header + offset table + trailing header offset for the writer."""
    parts = [HEADER_HEAD.pack(MAGIC, len(table_rows), len(streams))]
    for s in streams:
        name = s.name.encode("utf-8")
        etype = 1 if np.dtype(s.dtype) == np.float64 else 0
        parts.append(struct.pack("<BI", 1 if s.format == "sparse" else 0, len(name)) + name +
                     struct.pack("<BI", etype, s.dim))
    table = np.array(table_rows, dtype=CHUNK_ENTRY) if table_rows else np.zeros(0, CHUNK_ENTRY)
    parts.append(table.tobytes())
    parts.append(struct.pack("<q", header_offset))
    return b"".join(parts)
