"""The one CBF output both writers use: ``CBFWriter`` (chunks it encodes) and the CTF -> CBF fast path
(``from_ctf.py``, chunks the CTF kernel emits in pieces).

A chunk's place is known when it is added (``add_chunk`` returns its start), so its bytes can be
written from several buffers and even before the chunk is complete; writes run on one writer
thread, at most ``MAX_IN_FLIGHT`` batches queued (which bounds memory), each range fallocated
first (buffered writes into allocated blocks are much cheaper on ext4) and handed to writeback
right away (``sync_file_range``), so the fsync before the rename has little left to flush. The
file is an ``AtomicFile``: nothing appears under the name until ``close``; ``abort`` leaves the
target as it was.
"""
from __future__ import annotations

import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from recordkit.engine.streams import StreamSpec
from recordkit.formats.cbf import _kernel, layout
from recordkit.storage.atomic import AtomicFile

MAX_IN_FLIGHT = 2
_IOV_MAX = 512  # buffers per writev call (Linux allows 1024)
WRITE_STEP = 2 << 20  # bytes per write call, each followed by a writeback request


class OrderedWorker:
    """Jobs run in submission order on one thread, at most ``MAX_IN_FLIGHT`` queued: ``submit`` waits
    for the oldest beyond that, which bounds the memory of the buffers handed over (the encoder of
    ``CBFWriter``, the writer of ``CBFOutput``)."""

    def __init__(self, name: str):
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._jobs: deque = deque()

    def submit(self, fn, *args) -> None:
        while len(self._jobs) >= MAX_IN_FLIGHT:
            self._jobs.popleft().result()
        self._jobs.append(self._pool.submit(fn, *args))

    def finish(self) -> None:
        """Wait for every job (the first failure raises), then stop the thread."""
        try:
            while self._jobs:
                self._jobs.popleft().result()
        finally:
            self._pool.shutdown(wait=True)

    def cancel(self) -> None:
        """Drop the jobs not started, wait for the running one, stop the thread."""
        for job in self._jobs:
            job.cancel()
        self._pool.shutdown(wait=True)
        self._jobs.clear()


class CBFOutput:
    """The CBF file being written: chunks placed at positions (``add_chunk`` says where), written
    by positioned writes on one writer thread (fallocated ahead, handed to writeback at once), then
    the header and offset table, fsync and rename (``close``), or nothing left (``abort``)."""

    def __init__(self, path, streams, dtype, *, storage_options=None, checksums: bool = False):
        self._out = AtomicFile(path, storage_options=storage_options, checksums=checksums)
        self._out.write(layout.PREFIX.pack(layout.MAGIC, layout.VERSION))
        self._out.file.flush()
        self._fd = self._out.file.fileno()
        self.pos = layout.PREFIX.size  # where the next chunk starts
        self._table = []
        self._header_streams = [StreamSpec(s.name, s.format, s.dim, dtype=dtype) for s in streams]
        self._io = OrderedWorker("recordkit-cbf-writer")
        self.sequences_written = 0
        self._allocated = self.pos  # the file's blocks are allocated up to here (or allocation failed: -1)

    def add_chunk(self, meta_parts, nbytes: int) -> int:
        """Record the next chunk (its sequences' meta parts, its size); return where it starts."""
        start = self.pos
        nseq = sum(len(m) for m in meta_parts)
        samples = sum(int(m.sum(dtype=np.int64)) for m in meta_parts)
        self._table.append((start, nseq, samples))
        self.pos += nbytes
        self.sequences_written += nseq
        return start

    def write_at(self, buffers, pos: int) -> None:
        """Queue writing the buffers one after another from file offset pos (in submission order)."""
        iov = [b for b in buffers if len(b)]
        if not iov:
            return
        self._io.submit(self._write, iov, pos)

    def _write(self, iov, pos: int) -> None:
        # writer thread
        end = pos + sum(len(b) for b in iov)
        if 0 <= self._allocated < end:
            # allocate before writing (cheaper buffered writes); the file is cut to size at the end
            self._allocated = end if _kernel.preallocate(self._fd, self._allocated, end - self._allocated) else -1
        while iov:
            # WRITE_STEP bytes at a time, each handed to writeback at once (without waiting), so
            # the disk works while the next part is copied and the fsync before the rename finds
            # little left to do
            batch, size = [], 0
            while iov and len(batch) < _IOV_MAX and size < WRITE_STEP:
                b = iov[0]
                take = min(len(b), WRITE_STEP - size)
                if take < len(b):
                    batch.append(b[:take])
                    iov[0] = b[take:]
                else:
                    batch.append(b)
                    iov.pop(0)
                size += take
            done = pos
            while batch:
                n = os.pwritev(self._fd, batch, done)
                if n <= 0:
                    raise OSError(f"CBF output: pwritev wrote {n} bytes at offset {done}")
                done += n
                # drop what was written (a short write leaves part of a buffer)
                while batch and n >= len(batch[0]):
                    n -= len(batch[0])
                    batch.pop(0)
                if n:
                    batch[0] = batch[0][n:]
            _kernel.start_writeback(self._fd, pos, done - pos)
            pos = done

    def close(self) -> None:
        self._io.finish()
        header = layout.encode_header(self._header_streams, self._table, self.pos)
        n = os.pwrite(self._fd, header, self.pos)
        if n != len(header):
            raise OSError(f"CBF output: short write of the header ({n} of {len(header)} bytes)")
        # a speculative write (see _Chunker) may have gone past the real end
        os.ftruncate(self._fd, self.pos + len(header))
        self._out.commit()

    def abort(self) -> None:
        self._io.cancel()
        self._out.discard()
