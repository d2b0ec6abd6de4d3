"""``Buffers``: the OFRecord readers' reused read buffers (the part index scan and the block
readers take one each)."""
from __future__ import annotations

import sys
import threading


class Buffers:
    """Read buffers reused once nothing refers to them any more: a fresh 8 MB bytes object per
    block costs about as much in page faults as the read itself. A buffer that a batch, a frame or
    a record still refers to (a memoryview or array over it) is never reused, so reuse cannot
    change what anyone holds. Sources without ``pread_into`` (remote, checksum-verified) read into
    fresh bytes."""
    KEEP = 4

    def __init__(self):
        self._bufs: list = []
        self._lock = threading.Lock()

    def _free(self, n: int):
        with self._lock:
            for b in self._bufs:
                # referenced only by the list, this loop and getrefcount's argument: nothing exported
                if len(b) >= n and sys.getrefcount(b) <= 3:
                    return b
            b = bytearray(n)
            if len(self._bufs) < self.KEEP:
                self._bufs.append(b)
            return b

    def pread(self, source, offset: int, n: int):
        """``source.pread(offset, n)`` (bytes or a memoryview: fewer only at the end of the file)."""
        into = getattr(source, "pread_into", None)
        if into is None or n <= 0:
            return source.pread(offset, n, cache=False)
        view = memoryview(self._free(n))[:n]
        return view[:into(offset, view)]


class ColumnMemory:
    """Memory for the columns a chunk is decoded into, reused once nothing refers to it any more.

    A column of a few MB allocated for every chunk loaded on a loader thread came from memory the
    allocator had just given back to the system, so every page of it faulted in again: ~4,000 page
    faults a sweep of 60,000 MNIST-like records, a tenth of its CPU time. Reuse is decided as in
    ``Buffers``: an array is handed out again only when nothing but this pool refers to it. Every
    array made from a column (its chunk, the engine's views of it, a minibatch lent from it, a
    tensor over that) refers to it, so reuse never changes what anyone holds, and nothing a caller
    writes into a delivered minibatch can reach a chunk loaded later. At most ``KEEP_BYTES`` are
    kept (in use or free); columns under ``MIN_BYTES`` come from the allocator (nothing to save)."""
    KEEP_BYTES = 64 << 20
    MIN_BYTES = 1 << 20

    def __init__(self):
        self._arrays: list = []
        self._lock = threading.Lock()

    def empty(self, shape: tuple, dtype):
        """An uninitialized C-contiguous array of ``shape`` and ``dtype`` (np.empty's)."""
        import numpy as np
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes < self.MIN_BYTES:
            return np.empty(shape, dtype)
        with self._lock:
            best = None
            for a in self._arrays:
                # referenced only by the list, this loop and getrefcount's argument: nothing uses it
                if nbytes <= a.nbytes <= 2 * nbytes and sys.getrefcount(a) <= 3 \
                        and (best is None or a.nbytes < best.nbytes):
                    best = a
            if best is None:
                best = np.empty(nbytes, np.uint8)
                kept = sum(a.nbytes for a in self._arrays)
                if kept + nbytes > self.KEEP_BYTES:  # make room by forgetting free arrays, if any
                    free = [a for a in self._arrays if sys.getrefcount(a) <= 3]
                    while free and kept + nbytes > self.KEEP_BYTES:
                        gone = free.pop()
                        kept -= gone.nbytes
                        self._arrays = [a for a in self._arrays if a is not gone]
                if kept + nbytes <= self.KEEP_BYTES:
                    self._arrays.append(best)
            return best[:nbytes].view(dtype).reshape(shape)  # made under the lock: refers to ``best`` now


COLUMNS = ColumnMemory()  # one per process: a data set is opened anew each epoch by some loops
