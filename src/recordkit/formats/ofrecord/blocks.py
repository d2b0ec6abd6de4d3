"""Runs of OFRecord frames straight from the blocks read, the next block read on a thread.

A part is read in blocks of about ``READ_BLOCK`` bytes with pread; a ``Run`` is the frames of one
block as two arrays (payload offsets within the block, lengths), never one Python object per
record. Batches are cut from runs (``cut``) and decoded from the blocks themselves by the
compiled decoder (``batch.decode_runs``), without copying the payloads together.

Where the frames come from:

* a part read whole whose index is not known yet (no current sidecar, not opened before in this
  process) is scanned while it is read (``dataset.scan_blocks``): one pass over the bytes, and the
  index so found is kept for the next open (and written as the sidecar when asked);
* otherwise the index plans the blocks (a share of a part that starts or ends inside it needs
  it), and each block's length prefixes are checked against it: an index that disagrees with
  the bytes is an error naming the part, offset and record, never a read of other memory.

``read_ahead`` runs the block reads (pread and the scan release the GIL) on a second thread one
block ahead of the decoding (which releases it too). Errors stay in stream order: a framing
problem is handed on as an item where the part's intact frames end, and is charged by the
consumer; an exception of the reading thread is raised where the consumer reaches it.
"""
from __future__ import annotations

import queue
import threading
from typing import Iterator

import numpy as np

from recordkit.errors import FormatError
from recordkit.formats.ofrecord import _kernel
from recordkit.formats.ofrecord.buffers import Buffers  # noqa: F401  (re-exported: the readers take it from here)
from recordkit.formats.ofrecord.dataset import BlockScan, keep_index, save_index, scan_blocks
from recordkit.storage import open_source

READ_BLOCK = 8 << 20


class Run:
    """Consecutive intact frames of one part inside one read block.

    ``data``: the block (bytes); ``offsets``/``lengths``: int64 payload offsets within it and
    payload lengths; ``path``; ``first``: the part's record index of the first frame; ``base``:
    the file offset of ``data[0]``."""
    __slots__ = ("data", "offsets", "lengths", "path", "first", "base")

    def __init__(self, data, offsets, lengths, path, first, base):
        self.data, self.offsets, self.lengths = data, offsets, lengths
        self.path, self.first, self.base = path, first, base

    def __len__(self) -> int:
        return len(self.offsets)

    def split(self, k: int) -> tuple["Run", "Run"]:
        """The first k frames and the rest (views of the same block)."""
        return (Run(self.data, self.offsets[:k], self.lengths[:k], self.path, self.first, self.base),
                Run(self.data, self.offsets[k:], self.lengths[k:], self.path, self.first + k, self.base))

    def frames(self) -> list:
        """``(payload view, (path, record index, frame offset))`` per frame, for the record-by-record
        paths (a shuffle buffer, protobuf decoding, located errors)."""
        view = memoryview(self.data)
        return [(view[o:o + n], (self.path, self.first + k, self.base + o - 8))
                for k, (o, n) in enumerate(zip(self.offsets.tolist(), self.lengths.tolist()))]


def frames_of(runs) -> list:
    return [f for run in runs for f in run.frames()]


def cut(runs, size: int, keep_last: bool) -> Iterator[list]:
    """Lists of runs of ``size`` frames each (runs split where a batch ends); the last, shorter
    list only when ``keep_last``. A full batch is handed on before the next run is asked for, so
    that errors found further on come after it, as in frame-by-frame batching."""
    pieces, have = [], 0
    for run in runs:
        while len(run):
            take = min(size - have, len(run))
            if take == len(run):
                piece, run = run, None
            else:
                piece, run = run.split(take)
            pieces.append(piece)
            have += take
            if have == size:
                yield pieces
                pieces, have = [], 0
            if run is None:
                break
    if pieces and keep_last:
        yield pieces


def part_runs(path: str, first: int, end, index, *, write_index: bool, storage: dict,
              block_size: int = READ_BLOCK, opened=None, buffers: Buffers | None = None) -> Iterator[tuple]:
    """``("run", Run)`` items for the frames ``first:end`` of a part (``end`` None: to its end),
    then ``("error", FormatError)`` when the run reaches the part's end and its framing is broken.

    ``index``: the part's PartIndex, or None to scan the part while reading it (whole parts only:
    as it was when the reader opened it, ``opened`` = its (size, version) then; grown since, the
    part is read to that size, and the index found is not kept)."""
    source = open_source(path, **storage)
    read = (buffers or Buffers()).pread
    try:
        if index is None:
            yield from _scanned_runs(source, path, write_index, storage.get("cache_dir"), block_size,
                                     opened or source.fingerprint, read)
        else:
            yield from _indexed_runs(source, path, first, end, index, block_size, read)
    finally:
        source.close()


def _scanned_runs(source, path, write_index, cache_dir, block_size, opened, read) -> Iterator[tuple]:
    fingerprint = source.fingerprint
    scan = BlockScan(scan_blocks(source, block_size, size=opened[0], read=read))
    count = 0
    for block, base, o, n in scan:
        yield "run", Run(block, o - base, n, path, count, base)
        count += len(o)
    index = scan.index(source.name)
    if scan.size == fingerprint[0] and tuple(fingerprint) == tuple(opened):  # the whole part, unchanged since open
        keep_index(index, fingerprint)
        if write_index or (source.remote and cache_dir is not None):
            save_index(source, index, cache_dir)
    err = index.error()
    if err is not None:
        yield "error", err


def _indexed_runs(source, path, first, end, index, block_size, read) -> Iterator[tuple]:
    n = len(index) if end is None else min(int(end), len(index))
    offsets, lengths = index.offsets, index.lengths
    ends = offsets + lengths
    i = int(first)
    while i < n:
        start = int(offsets[i]) - 8
        j = int(np.searchsorted(ends, start + block_size, side="right"))
        j = min(max(j, i + 1), n)
        stop = int(ends[j - 1])
        block = read(source, start, stop - start)
        if len(block) != stop - start:
            raise FormatError(path, f"file shrank while being read: expected {stop - start} bytes at "
                                    f"offset {start}, got {len(block)}", offset=start, record=f"record {i}")
        o, ln, problem = _kernel.scan_frames(block, start)
        if problem is not None or not (np.array_equal(o, offsets[i:j]) and np.array_equal(ln, lengths[i:j])):
            k = _first_difference(o, ln, offsets[i:j], lengths[i:j])
            raise FormatError(path, "the part's index disagrees with its length prefixes (the file changed "
                                    "under the same size and modification time?)",
                              offset=int(offsets[i + k]) - 8, record=f"record {i + k}")
        yield "run", Run(block, o - start, ln, path, i, start)
        i = j
    err = index.error()
    if err is not None and n == len(index):
        yield "error", err


def _first_difference(o, ln, want_o, want_ln) -> int:
    m = min(len(o), len(want_o))
    bad = np.flatnonzero((o[:m] != want_o[:m]) | (ln[:m] != want_ln[:m]))
    return int(bad[0]) if len(bad) else m if m < len(want_o) else 0


_END = object()


def read_ahead(items: Iterator, depth: int = 1) -> Iterator:
    """The items of ``items`` (a generator doing the reads), produced on a second thread at most
    ``depth`` items ahead of the consumer. An exception of the producer is raised to the consumer
    where it happened in the stream; a consumer that stops early stops the producer (which then
    closes its generator, and with it its open files)."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce():
        try:
            for item in items:
                if not put((True, item)):
                    return
            put((True, _END))
        except BaseException as e:  # handed to the consumer, raised there
            put((False, e))
        finally:
            items.close()

    thread = threading.Thread(target=produce, name="recordkit-ofrecord-read", daemon=True)
    thread.start()
    try:
        while True:
            ok, item = q.get()
            if not ok:
                raise item
            if item is _END:
                return
            yield item
    finally:
        stop.set()
