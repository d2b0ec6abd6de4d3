"""Random access to single sequences: Grain's ``RandomAccessDataSource`` protocol over any reader.

Grain (``grain.MapDataset.source``), a map-style torch ``Dataset`` and any sampler-driven loader
want ``len(source)`` and ``source[i]`` -> one record. Every recordkit reader with an index (CBF's
chunk table, CTF's index, OFRecord's sidecar index, SINGA stores, the Parquet and MDS data sets of
the bridge) already describes its chunks without loading them (``ChunkInfo.num_sequences``), so a
global index maps to (chunk, index in chunk) by a binary search of the cumulative sequence counts;
the chunk is decoded once and kept in a small LRU cache, so sequential access decodes each chunk
once and shuffled access decodes at most one chunk per item (fewer when the cache holds the data
set's hot chunks). A reader that reads single rows (``take_sequences(rows)``: Lance's ``take``) is
asked for the items themselves when the data set has more chunks than the cache holds: no chunk is
decoded for an item, and ``__getitems__`` reads a batch in one call. The source works against the
Deserializer protocol only, never a file layout.

A record is a dict of NumPy arrays: ``"key"`` (uint64 scalar array), per dense stream ``NAME``
its (samples, dim) values, per sparse stream ``NAME + "_indices"``, ``NAME + "_values"`` (the
sequence's entries, sample after sample) and ``NAME + "_indptr"`` (samples + 1,) int64, the entry
range of each sample (CSR over samples), per bytes stream ``NAME`` its one ``bytes`` value.

Processes. Readers are not picklable, so the source keeps what opens its reader (a path plus
options, or a zero-argument factory) and reopens it lazily in each process it is sent to (Grain's
and torch's DataLoader workers); the chunk table travels with it, so a worker does not re-scan.
"""
from __future__ import annotations

import bisect
import operator
import os
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

__all__ = ["RandomAccessDataSource", "sequence_record"]


def sequence_record(chunk, i: int) -> dict:
    """Sequence ``i`` of a ChunkData as a dict of NumPy arrays (the layout is in the module docstring).

    The arrays are copies, so a record does not keep its whole decoded chunk alive (a cache
    eviction frees the chunk even while the records taken from it live on)."""
    rec: dict[str, Any] = {"key": np.asarray(chunk.keys[i], dtype=np.uint64)}
    for name, col in chunk.columns.items():
        if col.is_bytes:  # the sequence's one value (immutable: no copy needed)
            rec[name] = col.values[i]
            continue
        a, b = int(col.seq_offsets[i]), int(col.seq_offsets[i + 1])
        if col.is_sparse:
            lo, hi = int(col.indptr[a]), int(col.indptr[b])
            rec[f"{name}_indices"] = np.array(col.indices[lo:hi])
            rec[f"{name}_values"] = np.array(col.values[lo:hi])
            rec[f"{name}_indptr"] = np.asarray(col.indptr[a:b + 1], dtype=np.int64) - lo
        else:
            rec[name] = np.array(col.values[a:b])
    return rec


class RandomAccessDataSource:
    """``len()`` and ``[i]`` over the sequences of any indexed recordkit data set, in storage order.

    source: a path (its format sniffed, or ``format=`` a registry name such as ``"cbf"``,
    ``"ctf"``, ``"ofrecord"``, ``"kvfile"``, ``"parquet"``, ``"mds"``, ``"lance"``) opened with ``streams``
    (needed for CTF; a selection elsewhere) and ``options`` (``precision``, ``storage_options``,
    ...), or a zero-argument callable returning a Deserializer (picklable for worker processes:
    a module-level function or a ``functools.partial``), or an open Deserializer (then the source
    stays in this process: it cannot be pickled). cache_chunks: decoded chunks kept (LRU).

    Indexes follow Python's sequence rules: ``-1`` is the last sequence; out of range raises
    ``IndexError``. Thread-safe: a lock guards the cache, and each chunk is decoded once even
    when several threads ask for it at the same time (Grain reads with a thread pool).
    """

    def __init__(self, source, streams=None, *, format: str | None = None, cache_chunks: int = 4, **options):
        if int(cache_chunks) < 1:
            raise ValueError("cache_chunks must be >= 1")
        self._cache_chunks = int(cache_chunks)
        self._path = self._factory = None
        self._reader = None
        if isinstance(source, (str, os.PathLike)):
            self._path = os.fspath(source)
            self._streams = streams
            self._format = format
            self._options = options
        elif callable(source) and not hasattr(source, "load_chunk"):
            if streams is not None or format is not None or options:
                raise TypeError("streams/format/options go with a path, not with a reader factory")
            self._factory = source
        elif hasattr(source, "load_chunk") and hasattr(source, "chunks"):
            if streams is not None or format is not None or options:
                raise TypeError("streams/format/options go with a path, not with an open reader")
            self._reader = source
        else:
            raise TypeError("source must be a path, a zero-argument callable returning a Deserializer, "
                            "or a Deserializer")
        reader = self._open()
        infos = reader.chunks
        self._chunk_ids = [int(c.id) for c in infos]
        counts = np.array([int(c.num_sequences) for c in infos], dtype=np.int64)
        self._starts = [0] + np.cumsum(counts).tolist()  # sequence index where each chunk starts
        self._names = [s.name for s in reader.streams]
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._lock = threading.Lock()
        self._cache: OrderedDict[int, Any] = OrderedDict()
        self._loading: dict[int, threading.Event] = {}
        self._owner_pid = os.getpid()

    def _open(self):
        if self._reader is None:
            if self._factory is not None:
                self._reader = self._factory()
            else:
                from recordkit.formats import registry
                from recordkit.formats.detect import sniff_format
                kind = self._format or sniff_format(self._path, self._options.get("storage_options"))
                self._reader = registry.get(kind).open_reader(self._path, self._streams, **self._options)
        return self._reader

    # -- pickling: the recipe and the chunk table travel, the reader and the cache do not ---------
    def __getstate__(self):
        if self._path is None and self._factory is None:
            raise TypeError("a RandomAccessDataSource over an open reader cannot be sent to another process: "
                            "give a path or a zero-argument reader factory instead")
        state = self.__dict__.copy()
        for k in ("_reader", "_lock", "_cache", "_loading", "_owner_pid"):
            state.pop(k, None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._reader = None
        self._init_runtime()

    # -- the protocol ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._starts[-1]

    def __repr__(self) -> str:
        what = self._path if self._path is not None else (self._factory if self._factory is not None
                                                          else type(self._reader).__name__)
        return (f"RandomAccessDataSource({what!r}, sequences={len(self)}, chunks={len(self._chunk_ids)}, "
                f"streams={self._names})")

    def locate(self, index) -> tuple[int, int]:
        """(chunk position in the chunk table, sequence index in that chunk) of a global index."""
        i = operator.index(index)  # ints and NumPy integers; a float is a TypeError
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"sequence index {index} out of range for {n} sequences")
        c = bisect.bisect_right(self._starts, i) - 1
        return c, i - self._starts[c]

    def __getitem__(self, index) -> dict:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if self._takes():
            return self.__getitems__([index])[0]
        c, j = self.locate(index)
        chunk = self._chunk(c)
        return sequence_record(chunk, j)

    def __getitems__(self, indexes) -> list[dict]:
        """Several records at once (torch's fetcher calls this for a batch): one ``take_sequences``
        call where the reader reads single rows (Lance's ``take``), else item by item."""
        if not self._takes():
            return [self[i] for i in indexes]
        rows = [self._row(i) for i in indexes]
        chunk = self._open().take_sequences(rows)
        return [sequence_record(chunk, k) for k in range(len(rows))]

    def _row(self, index) -> int:
        c, j = self.locate(index)
        return self._starts[c] + j

    def _takes(self) -> bool:
        """Whether items are read one by one: the reader decodes single sequences (``take_sequences(rows)``,
        rows in storage order) and the data set has more chunks than the cache holds (where they all fit,
        decoded chunks serve shuffled items faster: 37,000 against 600 items/s on 5 Lance fragments)."""
        self._here()
        from recordkit.engine.deserializer import takes_rows
        return len(self._chunk_ids) > self._cache_chunks and takes_rows(self._open())

    # -- the chunk cache ---------------------------------------------------------------------------
    def _here(self) -> None:
        if os.getpid() != self._owner_pid:  # forked after use: the parent's reader, lock and cache are not ours
            if self._path is not None or self._factory is not None:
                self._reader = None  # reopen: a file position shared with the parent would race
            self._init_runtime()

    def _chunk(self, c: int):
        self._here()
        while True:
            with self._lock:
                chunk = self._cache.get(c)
                if chunk is not None:
                    self._cache.move_to_end(c)
                    return chunk
                event = self._loading.get(c)
                if event is None:
                    event = self._loading[c] = threading.Event()
                    break
            event.wait()  # another thread is decoding it; then look again
        try:
            chunk = self._load(c)
            with self._lock:
                self._cache[c] = chunk
                while len(self._cache) > self._cache_chunks:
                    self._cache.popitem(last=False)
            return chunk
        finally:
            with self._lock:
                self._loading.pop(c, None)
            event.set()

    def _load(self, c: int):
        chunk = self._open().load_chunk(self._chunk_ids[c])
        expected = self._starts[c + 1] - self._starts[c]
        if len(chunk) != expected:
            from recordkit.errors import FormatError
            raise FormatError(self._path or repr(self._reader),
                              f"chunk {self._chunk_ids[c]} decoded {len(chunk)} sequences but its index "
                              f"describes {expected} (sequences dropped under an error budget cannot be "
                              f"addressed by index)", record=f"chunk {self._chunk_ids[c]}")
        return chunk

    def close(self) -> None:
        """Close the reader (it reopens on the next access) and drop the cache."""
        with self._lock:
            self._cache.clear()
        reader, self._reader = self._reader, None
        if reader is not None and (self._path is not None or self._factory is not None):
            close = getattr(reader, "close", None)
            if close is not None:
                close()
        elif reader is not None:
            self._reader = reader  # an open reader given by the caller stays theirs

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
