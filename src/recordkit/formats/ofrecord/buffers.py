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
