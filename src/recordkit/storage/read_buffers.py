"""Reusable read buffers for chunk loads, shared by a reader's loader threads.

A chunk decoder that copies everything it keeps (CBF; the CTF parser, whose columns never point
into the text) reads the chunk's bytes into a scratch buffer. A fresh buffer costs its first touches: on the benchmark VM a fresh 33 MB buffer added
4-70 ms to a read that takes 6 ms into memory touched before (the hypervisor backs guest pages
lazily). Buffers kept per thread were fresh again for every new thread (a load split over a
short-lived pool, the caller's first load); a pool lets whichever thread loads next take the
buffer another released. It keeps at most ``keep`` buffers (one per loader that can run at
once) and hands out views that start at the same offset within a page as the file bytes they
will hold: the kernel's copy out of the page cache took 15.5 ms into a buffer 16 bytes into a
page (where a fresh allocation starts) and 6-7 ms when both sides line up.
"""
from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager

import numpy as np

PAGE = 4096


class ReadBuffers:
    """``take(n, offset)`` -> (buffer, view of n bytes aligned like file offset ``offset``);
    ``give(buffer)`` when done with the view.

    ``only_while_held``: buffers given back are kept only inside ``hold()`` (a burst of loads, such
    as every chunk a minibatch waits for); outside one, and when the last hold ends, they are let
    go. A reader whose chunks a memory bound counts (``MinibatchSource(max_memory=...)`` plans the
    chunks held and the loads in flight) then holds no text between bursts."""

    def __init__(self, keep: int = 4, *, only_while_held: bool = False):
        self.keep = max(1, int(keep))
        self.only_while_held = bool(only_while_held)
        self._holds = 0
        self._spare: list[np.ndarray] = []
        self._lock = threading.Lock()
        # every buffer this pool made and that is still alive (id -> buffer, weakly): which views'
        # buffers ``give_view`` may take back (not the bytes some other source lent)
        self._made: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

    def take(self, n: int, offset: int) -> tuple[np.ndarray, memoryview]:
        need = n + PAGE
        buf = None
        with self._lock:
            fits = [i for i, b in enumerate(self._spare) if len(b) >= need]
            if fits:  # the smallest that fits: big ones stay for big chunks
                buf = self._spare.pop(min(fits, key=lambda i: len(self._spare[i])))
        if buf is None:
            buf = np.empty(need, dtype=np.uint8)  # not bytearray(n): that zeroes every page first
            with self._lock:
                self._made[id(buf)] = buf
        # the address from the array interface: ``buf.ctypes`` builds a ctypes object (~30 us, a
        # quarter of a 16 KB chunk's load)
        skew = (offset - buf.__array_interface__["data"][0]) % PAGE
        return buf, memoryview(buf)[skew:skew + n]

    def give(self, buf: np.ndarray) -> None:
        with self._lock:
            if self.only_while_held and self._holds == 0:
                return  # not in a burst of loads: let it go
            if any(b is buf for b in self._spare):
                return  # given back twice: held once, or two takers would share it
            self._spare.append(buf)
            if len(self._spare) > self.keep:  # drop the smallest
                del self._spare[min(range(len(self._spare)), key=lambda i: len(self._spare[i]))]

    def give_view(self, view) -> bool:
        """Give back the buffer behind ``view`` (a view ``take`` returned) if this pool made it;
        False for anything else (a source's own bytes), which is left alone."""
        base = getattr(view, "obj", None)
        with self._lock:
            mine = base is not None and self._made.get(id(base)) is base
        if mine:
            self.give(base)
        return mine

    @contextmanager
    def hold(self):
        """Keep the buffers given back until the outermost ``hold`` ends (``only_while_held``)."""
        with self._lock:
            self._holds += 1
        try:
            yield self
        finally:
            with self._lock:
                self._holds -= 1
                if self.only_while_held and self._holds == 0:
                    self._spare.clear()

    def held_bytes(self) -> int:
        with self._lock:
            return sum(len(b) for b in self._spare)

    def clear(self) -> None:
        with self._lock:
            self._spare.clear()
