"""The chunks a MinibatchSource holds: loaded ones, and loads under way on background threads.

What to keep and what to load next is the source's policy (it knows the sweep and the cursor);
this only holds chunks and runs the loads. A chunk the caller waits for is loaded with every
thread the reader can use (``load_chunk(cid, threads=...)`` where the reader takes it); chunks
wanted ahead are loaded on the pool while the caller trains (parsing releases the GIL).
"""
from __future__ import annotations

import weakref
from concurrent.futures import ThreadPoolExecutor

from recordkit.engine.chunk import ChunkData
from recordkit.engine.deserializer import load_chunk, retaining_buffers, splits_chunks, takes_threads


class ChunkCache:
    """Loaded chunks with their position lookups. ``on_load(cid)`` is called after each load."""

    def __init__(self, deserializer, described: dict, *, prefetch: bool, threads: int, on_load=None):
        self.deserializer = deserializer
        self.described = described  # chunk id -> sequences the index describes
        self.threads = max(1, int(threads))
        self.loaded: dict[int, ChunkData] = {}
        self.lookups: dict = {}
        self.futures: dict = {}
        # a bound method is held weakly: the source that owns this cache is what it calls back, and
        # a strong reference made the pair a cycle, so a source dropped without ``close`` kept its
        # deserializer (read buffers, open file) and held chunks until the garbage collector ran
        self._on_load = weakref.WeakMethod(on_load) if hasattr(on_load, "__self__") else on_load
        self._weak_on_load = hasattr(on_load, "__self__")
        self._takes_threads = None  # asked of the deserializer on the first load
        self._splits = splits_chunks(deserializer)  # how ensure() loads several awaited chunks
        # bumped whenever the held chunks or the loads under way change: the source skips its
        # per-minibatch eviction and prefetch passes while nothing they look at has changed
        self.version = 0
        self.pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="recordkit-prefetch") \
            if prefetch else None

    def __contains__(self, cid) -> bool:
        return cid in self.loaded

    def ids(self) -> list:
        return list(self.loaded)

    def get(self, cid: int) -> ChunkData:
        """The chunk, loaded now (or its background load awaited) if it is not held."""
        data = self.loaded.get(cid)
        if data is None:
            fut = self.futures.pop(cid, None)
            data = fut.result() if fut is not None else self._load_now(cid)
            self.loaded[cid] = data
            self.version += 1
            self.lookups[cid] = data.position_lookup(self.described[cid])
            on_load = self._on_load() if self._weak_on_load else self._on_load
            if on_load is not None:
                on_load(cid)
        return data

    def _load_now(self, cid: int) -> ChunkData:
        """A chunk the caller is waiting for: let the reader use every thread on it if it can."""
        if self._takes_threads is None:
            self._takes_threads = takes_threads(self.deserializer)
        return load_chunk(self.deserializer, cid, self.threads, self._takes_threads)

    def start(self, cids) -> None:
        """Begin loading these chunks on the background threads (those neither held nor under way)."""
        if self.pool is None:
            return
        for cid in cids:
            if cid not in self.loaded and cid not in self.futures:
                self.futures[cid] = self.pool.submit(self.deserializer.load_chunk, cid)
                self.version += 1

    def ensure(self, cids: list, ahead=()) -> None:
        """Load these chunks (the caller waits for all of them). Several at once go to the
        background threads, a chunk each, unless the reader splits a chunk over threads: then
        one after another, each with every thread, so unequal chunks keep both threads busy.
        A reader that takes ``threads=`` but does not split all of its work (CBF: one thread
        checks a chunk's layout) gets a chunk per thread, and the chunks left over when they do
        not divide evenly among the threads load afterwards with every thread (three awaited
        chunks on two threads: the third no longer loads beside an idle thread).

        ``ahead``: chunks wanted next (the prefetch's list). Where the reader does not split
        chunks, up to ``threads - len(cids)`` of them start on the pool now, beside the awaited
        loads, instead of after the minibatch (a CBF chunk's gather is bound by memory, not by
        its two threads: in file order the next chunk's load then overlaps the first one's,
        sparse 100 MB sweep 55 -> 41 ms); never more loads at once than ``threads``, what
        ``recordkit plan`` counts. A splitting reader's awaited chunk has every thread already."""
        if not self._splits and ahead:
            waited = set(cids)
            room = self.threads - len(cids)
            early = [c for c in ahead if c not in waited and c not in self.loaded and c not in self.futures]
            if room > 0 and early:
                self.start(early[:room])
        if len(cids) > 1 and not self._splits:
            if self._takes_threads is None:
                self._takes_threads = takes_threads(self.deserializer)
            left = len(cids) % self.threads if self._takes_threads else 0
            self.start(cids[:len(cids) - left])
        if len(cids) == 1:
            self.get(cids[0])
            return
        with retaining_buffers(self.deserializer):  # one burst: each load reuses the last one's text buffers
            for cid in cids:
                self.get(cid)

    def drop(self, cid: int) -> None:
        del self.loaded[cid]
        del self.lookups[cid]
        self.version += 1

    def cancel(self) -> None:
        """Forget the loads under way (a new sweep or a restore wants others)."""
        for fut in self.futures.values():
            fut.cancel()
        self.futures.clear()
        self.version += 1

    def clear(self) -> None:
        self.cancel()
        self.loaded.clear()
        self.lookups.clear()
        self.version += 1

    def close(self) -> None:
        if self.pool is not None:
            self.cancel()
            self.pool.shutdown(wait=True)
            self.pool = None
