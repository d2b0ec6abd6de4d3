"""CTF -> CBF without intermediate columns: the converter's fast path.

``CTFReader`` + ``CBFWriter`` parse each chunk into columns, then encode those into CBF
chunk bytes (a second copy) and write them (a third). Here the CTF kernel parses each
piece of a chunk straight into CBF's per-stream records (``ChunkParser.parse_cbf``): a
CBF chunk is the sample counts of its sequences followed, stream by stream, by those
sequences' records, so every output chunk is written with ``os.writev`` from slices of
the parsed buffers. The file is the same, byte for byte, as ``CBFWriter`` writes from
the same reader: sequences go into chunks by the same rule (a chunk closes after the
sequence that brings it to ``chunk_size`` bytes), the meta count is the maximum over
streams, and the header is the same.

Pieces are parsed by ``threads`` threads (GIL released) with ``prefetch`` chunks ahead;
chunks are written on one writer thread, each followed by an asynchronous writeback
request so that the fsync before the rename has little left to flush. Errors and
warnings are charged to the reader's budget chunk by chunk, as ``iter_chunks`` does.
"""
from __future__ import annotations

import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from recordkit.atomic import AtomicFile
from recordkit.engine.streams import StreamSpec, check_streams
from recordkit.formats.cbf import _kernel, layout

DEFAULT_CHUNK_SIZE = 32 << 20
MAX_IN_FLIGHT = 2
_IOV_MAX = 512  # buffers per writev call (Linux allows 1024)


def supports(reader, dtype) -> bool:
    """Whether ``convert`` can take this reader: a CTFReader parsing in the output's element type."""
    from recordkit.formats.ctf.reader import CTFReader
    return (isinstance(reader, CTFReader) and np.dtype(reader.dtype) == np.dtype(dtype)
            and hasattr(reader._parser, "parse_cbf"))


class _Output:
    """The CBF file being written: chunks in order on one writer thread, then header, fsync, rename."""

    def __init__(self, path, streams, dtype):
        self._out = AtomicFile(path)
        self._out.write(layout.PREFIX.pack(layout.MAGIC, layout.VERSION))
        self._out.file.flush()
        self._fd = self._out.file.fileno()
        self._pos = layout.PREFIX.size
        self._table = []
        self._header_streams = [StreamSpec(s.name, s.format, s.dim, dtype=dtype) for s in streams]
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="recordkit-cbf-writer")
        self._in_flight: deque = deque()
        self.sequences_written = 0

    def add_chunk(self, meta_parts, buffers, nbytes: int) -> None:
        """Queue one chunk: meta parts (uint32 arrays) then the streams' record slices (buffers)."""
        nseq = sum(len(m) for m in meta_parts)
        samples = sum(int(m.sum(dtype=np.int64)) for m in meta_parts)
        self._table.append((self._pos, nseq, samples))
        iov = [memoryview(m).cast("B") for m in meta_parts if len(m)] + [b for b in buffers if len(b)]
        while len(self._in_flight) >= MAX_IN_FLIGHT:
            self._in_flight.popleft().result()
        self._in_flight.append(self._io.submit(self._write, iov, self._pos, nbytes))
        self._pos += nbytes
        self.sequences_written += nseq

    def _write(self, iov, pos: int, nbytes: int) -> None:
        # writer thread; chunks are appended in submission order
        written = 0
        while iov:
            batch = iov[:_IOV_MAX]
            n = os.writev(self._fd, batch)
            written += n
            # drop what was written (a short write leaves part of a buffer)
            while batch and n >= len(batch[0]):
                n -= len(batch[0])
                batch.pop(0)
                iov.pop(0)
            if n:
                iov[0] = iov[0][n:]
        if written != nbytes:
            raise OSError(f"CBF chunk: wrote {written} bytes, expected {nbytes}")
        # start writing this chunk back now, without waiting: the fsync before the rename
        # then finds little left to do
        _kernel.start_writeback(self._fd, pos, nbytes)

    def close(self) -> None:
        try:
            while self._in_flight:
                self._in_flight.popleft().result()
        finally:
            self._io.shutdown(wait=True)
        self._out.write(layout.encode_header(self._header_streams, self._table, self._pos))
        self._out.commit()

    def abort(self) -> None:
        for fut in self._in_flight:
            fut.cancel()
        self._io.shutdown(wait=True)
        self._in_flight.clear()
        self._out.discard()


class _Chunker:
    """Groups parsed sequences into CBF chunks by CBFWriter's rule and queues them for writing."""

    def __init__(self, out: _Output, nstreams: int, chunk_size: int):
        self.out = out
        self.ns = nstreams
        self.chunk_size = chunk_size
        self._pending = []  # (meta, streams, a, b): sequences [a, b) of a parsed piece
        self._pending_bytes = 0

    def add(self, meta, streams) -> None:
        n = len(meta)
        if n == 0:
            return
        sizes = np.full(n, 4, dtype=np.int64)
        for _buf, offs in streams:
            sizes += np.diff(offs)
        cum = np.cumsum(sizes)
        start = 0
        while start < n:
            room = self.chunk_size - self._pending_bytes
            base = int(cum[start - 1]) if start else 0
            # the chunk closes after the first sequence that brings it to chunk_size or more
            end = int(np.searchsorted(cum, base + room, side="left")) + 1
            end = min(max(end, start + 1), n)
            self._pending.append((meta, streams, start, end))
            self._pending_bytes += int(cum[end - 1]) - base
            if self._pending_bytes >= self.chunk_size:
                self.flush()
            start = end

    def flush(self) -> None:
        if not self._pending:
            return
        metas = [meta[a:b] for meta, _streams, a, b in self._pending]
        buffers = []
        for s in range(self.ns):
            for _meta, streams, a, b in self._pending:
                buf, offs = streams[s]
                lo, hi = int(offs[a]), int(offs[b])
                if hi > lo:
                    buffers.append(memoryview(buf)[lo:hi])
        self.out.add_chunk(metas, buffers, self._pending_bytes)
        self._pending = []
        self._pending_bytes = 0


def convert(reader, path, *, streams=None, chunk_size: int = DEFAULT_CHUNK_SIZE, threads: int = 2,
            prefetch: int = 1, progress=None) -> int:
    """Write every sequence ``reader`` (a CTFReader) reads into a CBF file at ``path``.

    ``streams`` name the output streams (default: the reader's); the element type is the
    reader's precision. ``progress(nbytes)`` is called with the input bytes of each parsed
    piece. Returns the number of sequences written. The file appears under ``path`` only
    when complete (temporary file, fsync, rename); on an error nothing is left behind.
    """
    streams = check_streams(streams if streams is not None else reader.streams)
    if int(chunk_size) <= 0:
        raise ValueError(f"chunk_size must be positive, not {chunk_size}")
    out = _Output(path, streams, reader.dtype)
    chunker = _Chunker(out, len(streams), int(chunk_size))
    try:
        for chunk_id, pieces in _parsed_chunks(reader, max(int(threads), 1), max(int(prefetch), 0)):
            reader._charge_pieces(chunk_id, pieces)
            for _lo, _buf, parsed in pieces:
                meta, recs = parsed[1]
                chunker.add(meta, recs)
            if progress is not None:
                progress(reader.chunks[chunk_id].size)
        chunker.flush()
    except BaseException:
        out.abort()
        raise
    try:
        out.close()
    except BaseException:
        out.abort()
        raise
    return out.sequences_written


def _parsed_chunks(reader, threads: int, prefetch: int):
    """(chunk id, [(lo, buf, parsed), ...]) in file order, pieces parsed into CBF records."""
    n = len(reader.chunks)
    if threads <= 1:
        for i in range(n):
            yield i, [reader._parse_piece(i, lo, hi, reader._stop_after(i), cbf=True)
                      for lo, hi in reader._pieces(i, 1)]
        return
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="recordkit-ctf") as pool:
        pending: dict[int, list] = {}
        nxt = 0
        try:
            for i in range(n):
                while nxt < n and nxt <= i + prefetch:
                    stop = reader._stop_after(nxt)
                    pending[nxt] = [pool.submit(reader._parse_piece, nxt, lo, hi, stop, True)
                                    for lo, hi in reader._pieces(nxt, threads)]
                    nxt += 1
                yield i, [f.result() for f in pending.pop(i)]
        finally:
            for futures in pending.values():
                for f in futures:
                    f.cancel()
