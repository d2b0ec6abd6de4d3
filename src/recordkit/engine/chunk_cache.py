"""The chunks a MinibatchSource holds: loaded ones, and loads under way on background threads.

What to keep and what to load next is the source's policy (it knows the sweep and the cursor);
this only holds chunks and runs the loads. A chunk the caller waits for is loaded with every
thread the reader can use (``load_chunk(cid, threads=...)`` where the reader takes it); chunks
wanted ahead are loaded on the pool while the caller trains (parsing releases the GIL).

Residency is kept in arrays, so that what a minibatch does with its chunks costs no Python work
per chunk: ``slot_of[cid]`` is the chunk's slot (-1: not held) in ``columns``, the table of the
held chunks' prepared columns (``prepare(chunk)``, made as the chunk loads) that the minibatch
gather takes whole. Small chunks are loaded several to a pool task (``_groups``): a task's hand-off
costs about as much as decoding a 16 KB chunk, and one task per chunk put that cost on every chunk.
A reader with ``load_chunks`` (CBF) gets each such group, and each burst of awaited small chunks,
in one call: it reads and decodes chunks adjacent in the file together (about 60 us per 16 KB
chunk, most of it per call, was left after the grouping into tasks).

``joined`` (a reader with ``load_joined``): such a run is held as one unit, one ChunkData and one
set of prepared columns in one slot, each of its chunks a (slot, first sequence) in it
(``slot_of``, ``first_of``): a chunk's own arrays, ChunkData, columns and slot cost about as much
as its decode, a few microseconds each. The unit's memory is freed when its last chunk is dropped
(the source joins only where every chunk fits in its memory bound at once).
"""
from __future__ import annotations

import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

import numpy as np

from recordkit.engine.chunk import ChunkData
from recordkit.engine.deserializer import (load_chunk, load_chunks, loads_batches, loads_joined, retaining_buffers,
                                           splits_chunks, takes_threads)

# The bytes of small chunks one prefetch task loads together: each pool task costs a hand-off
# between threads (~50-100 us under the GIL); a 1 MB group keeps that to a few percent of its decode.
GROUP_BYTES = 1 << 20
# The least an awaited load hands to a pool thread: smaller bursts of chunks load on the caller's thread.
MIN_TASK_BYTES = 128 << 10


class ChunkCache:
    """Loaded chunks, their slots and prepared columns. ``on_load(cids)`` is called after each
    batch of loads is installed; ``prepare(chunk) -> (columns, layout)`` as each chunk loads
    (on the loading thread); ``nbytes``: the estimated decoded bytes of each chunk by id (what
    groups small chunks into one pool task; None: a chunk per task)."""

    def __init__(self, deserializer, described: dict, *, prefetch: bool, threads: int, on_load=None,
                 prepare: Callable[[ChunkData], tuple] | None = None, nbytes: np.ndarray | None = None,
                 joined: bool = False):
        self.deserializer = deserializer
        self.described = described  # chunk id -> sequences the index describes
        self.threads = max(1, int(threads))
        self.loaded: dict[int, ChunkData] = {}
        self.futures: dict[int, Future] = {}
        size = max(described) + 1 if described else 0
        self.slot_of = np.full(size, -1, dtype=np.int64)  # chunk id -> slot in ``columns`` (-1: not held)
        self.first_of = np.zeros(size, dtype=np.int64)  # chunk id -> its first sequence in the slot's unit
        self.size_of = np.zeros(size, dtype=np.int64)  # chunk id -> its sequences in the slot's unit
        self._members: list = []  # slot -> how many held chunks its unit holds (the slot is freed at 0)
        self._units: list = []  # slot -> the unit's ChunkData (a chunk's own, or a joined run's)
        self._views: dict[int, ChunkData] = {}  # chunks of joined units asked for alone (``get``)
        self._joined = bool(joined) and loads_joined(deserializer)
        self.columns: list = []  # slot -> the held chunk's prepared columns (None: a free slot)
        self._layout: list = []  # slot -> the layout ``prepare`` gave (None: a free slot)
        self._layouts: dict = {}  # layout -> how many held chunks have it
        self._free: list[int] = []
        self._lookups: dict[int, np.ndarray] = {}  # chunks whose sequences were dropped: their look-up
        self._lent: set[int] = set()  # held chunks a minibatch was handed views of (``lend``)
        self._prepare = prepare
        self._nbytes = None if nbytes is None else np.asarray(nbytes, dtype=np.int64)
        # a bound method is held weakly: the source that owns this cache is what it calls back, and
        # a strong reference made the pair a cycle, so a source dropped without ``close`` kept its
        # deserializer (read buffers, open file) and held chunks until the garbage collector ran
        self._on_load: Any = weakref.WeakMethod(on_load) if hasattr(on_load, "__self__") else on_load
        self._weak_on_load = hasattr(on_load, "__self__")
        self._takes_threads: bool | None = None  # asked of the deserializer on the first load
        self._splits = splits_chunks(deserializer)  # how ensure() loads several awaited chunks
        self._batches = loads_batches(deserializer)  # small chunks several to a load_chunks call
        # bumped whenever the held chunks or the loads under way change: the source skips its
        # per-minibatch eviction and prefetch passes while nothing they look at has changed
        self.version = 0
        # chunk id -> the error its pool task met: raised when the caller wants that chunk (loading
        # it again would charge an error budget twice, and a reader's end-of-data checks run once)
        self._failed: dict[int, BaseException] = {}
        self.pool: ThreadPoolExecutor | None = ThreadPoolExecutor(
            max_workers=self.threads, thread_name_prefix="recordkit-prefetch") if prefetch else None

    def __contains__(self, cid) -> bool:
        return cid in self.loaded

    def ids(self) -> list:
        return list(self.loaded)

    def held(self) -> np.ndarray:
        """The ids of the chunks held, as an array."""
        return np.fromiter(self.loaded, dtype=np.int64, count=len(self.loaded))

    @property
    def layout(self):
        """The one layout (``prepare``'s second value) every held chunk has, or None when they
        differ (or nothing is held): the table ``columns`` can be packed from in one call then."""
        return next(iter(self._layouts)) if len(self._layouts) == 1 else None

    def lookup(self, cid: int, seqs: np.ndarray) -> np.ndarray:
        """Where the described sequences ``seqs`` of held chunk ``cid`` are in the loaded chunk (-1: dropped)."""
        data = self.loaded[cid]
        if data.positions is None:
            return np.where(seqs < int(self.size_of[cid]), seqs, -1)
        lk = self._lookups.get(cid)
        if lk is None:
            lk = self._lookups[cid] = data.position_lookup(self.described[cid])
        return lk[seqs]

    # -- loading ---------------------------------------------------------------------------------
    def get(self, cid: int) -> ChunkData:
        """The chunk, loaded now (or its background load awaited) if it is not held. A chunk of a
        joined unit: its sequences taken out of the unit (a copy, kept while the chunk is held)."""
        data = self._hold(cid)
        if self.first_of[cid] == 0 and self.size_of[cid] == len(data):
            return data
        view = self._views.get(cid)
        if view is None:
            first = int(self.first_of[cid])
            view = self._views[cid] = data.take(np.arange(first, first + int(self.size_of[cid])))
            view.chunk_id = cid
        return view

    def unit(self, cid: int) -> ChunkData:
        """The ChunkData held chunk ``cid`` is part of (its own, or its joined run's): its sequences
        are ``first_of[cid]`` on, ``size_of[cid]`` of them."""
        return self.loaded[cid]

    def units(self, slots) -> list:
        """The ChunkData held in each of these slots."""
        return [self._units[s] for s in slots.tolist()]

    def _hold(self, cid: int) -> ChunkData:
        """The chunk's unit, loaded now (or its background load awaited) if it is not held."""
        self._raise_failed(cid)
        data = self.loaded.get(cid)
        if data is None:
            fut = self.futures.get(cid)
            if fut is not None:
                self._await(fut)
                data = self.loaded.get(cid)
            if data is None:  # not under way, or its load failed there: load here (raising its error)
                self.futures.pop(cid, None)
                self._raise_failed(cid)
                self._install([self._load_here(cid)])
                data = self.loaded[cid]
        return data

    def _raise_failed(self, cid: int) -> None:
        """The error a pool task met loading ``cid``, raised now that the caller wants the chunk."""
        failed = self._failed.pop(cid, None)
        if failed is not None:
            raise failed

    def _load_here(self, cid: int) -> tuple:
        """A chunk the caller is waiting for: let the reader use every thread on it if it can."""
        if self._takes_threads is None:
            self._takes_threads = takes_threads(self.deserializer)
        data = load_chunk(self.deserializer, cid, self.threads, self._takes_threads)
        return (cid,), data, self._prepare(data) if self._prepare is not None else None

    def _prepared(self, cids: list, datas: list) -> list:
        return [((cid,), data, self._prepare(data) if self._prepare is not None else None)
                for cid, data in zip(cids, datas)]

    def _load_many(self, cids: list) -> list:
        """Several chunks at once: as joined units where the cache joins, else a result per chunk."""
        if self._joined:
            return [(tuple(ids), data, self._prepare(data) if self._prepare is not None else None)
                    for ids, data in self.deserializer.load_joined(cids)]
        return self._prepared(cids, load_chunks(self.deserializer, cids))

    def _load_group(self, cids: list) -> list:
        """A pool task: load these chunks (in one ``load_chunks`` call where the reader has it);
        a chunk that fails is left out, its error kept for the caller, who gets it when it wants
        that chunk (not another chunk's): a failed batch is loaded again chunk by chunk, which
        tells the failing chunk from the others (a reader with ``load_chunks`` keeps no error
        budget a second load would charge twice)."""
        batch_error = None
        if self._batches and len(cids) > 1:
            try:
                return self._load_many(cids)
            except Exception as e:  # noqa: BLE001 - which chunk failed is found below, one at a time
                batch_error = e
        out = []
        for cid in cids:
            try:
                data = self.deserializer.load_chunk(cid)
                out.append(((cid,), data, self._prepare(data) if self._prepare is not None else None))
            except Exception as e:  # noqa: BLE001 - raised by get(cid), where the caller wants it
                self._failed[cid] = e
        if batch_error is not None and len(out) == len(cids):
            # every chunk loads alone: the batch's error was about all of them (a stream empty in
            # the whole file, found once the last chunk was counted, and only once): the last
            # chunk's, as its own load would have raised it
            self._failed[cids[-1]] = batch_error
            out.pop()
        return out

    def _await(self, fut: Future) -> None:
        """Wait for a pool task and hold what it loaded (those of its chunks still wanted)."""
        self._install(self._collect(fut))

    def _collect(self, fut: Future) -> list:
        """Wait for a pool task: what it loaded of its chunks still wanted, no longer under way."""
        results = fut.result()
        mine = [r for r in results if any(self.futures.get(c) is fut for c in r[0])]
        for cid in [c for c, f in self.futures.items() if f is fut]:
            del self.futures[cid]
        return mine

    def _install(self, results: list) -> None:
        """Hold loaded units ((chunk ids, ChunkData, prepared columns) each): one slot per unit, its
        chunks (those not held already) placed in it one after another."""
        fresh: list = []
        for unit_ids, data, prep in results:
            ids = [c for c in unit_ids if c not in self.loaded]
            if not ids:
                continue
            if len(unit_ids) == 1:  # a chunk's own ChunkData
                sizes, firsts = [len(data)], [0]
            else:
                sizes, firsts = self._placed(list(unit_ids), data)
                if len(ids) < len(unit_ids):  # some were held already (loaded again): those stay as they are
                    keep = np.isin(np.asarray(unit_ids, dtype=np.int64), ids)
                    sizes, firsts = sizes[keep], firsts[keep]
            slot = self._free.pop() if self._free else len(self.columns)
            if slot == len(self.columns):
                self.columns.append(None)
                self._layout.append(None)
                self._members.append(0)
                self._units.append(None)
            top = max(ids)
            if top >= len(self.slot_of):  # a chunk the description did not list (a wrapper's own ids)
                grow = top + 1 - len(self.slot_of)
                self.slot_of = np.concatenate([self.slot_of, np.full(grow, -1, dtype=np.int64)])
                self.first_of = np.concatenate([self.first_of, np.zeros(grow, dtype=np.int64)])
                self.size_of = np.concatenate([self.size_of, np.zeros(grow, dtype=np.int64)])
            for cid in ids:
                self.loaded[cid] = data
            self.slot_of[ids] = slot
            self.first_of[ids] = firsts
            self.size_of[ids] = sizes
            cols, layout = prep if prep is not None else (None, None)
            self.columns[slot] = cols
            self._layout[slot] = layout
            self._members[slot] = len(ids)
            self._units[slot] = data
            self._layouts[layout] = self._layouts.get(layout, 0) + 1
            fresh += ids
        if fresh:
            self.version += 1
            on_load = self._on_load() if self._weak_on_load else self._on_load
            if on_load is not None:
                on_load(fresh)

    def _placed(self, ids: list, data: ChunkData) -> tuple:
        """(sequences, first sequence) of each of ``ids`` in their joined unit ``data``: their
        described sequences one after another (a joined unit drops none)."""
        sizes = np.array([self.described[c] for c in ids], dtype=np.int64)
        firsts = np.zeros(len(ids), dtype=np.int64)
        np.cumsum(sizes[:-1], out=firsts[1:])
        if data.positions is not None or int(sizes.sum()) != len(data):
            raise ValueError(f"chunks {ids[0]}-{ids[-1]} loaded as one unit hold {len(data)} sequences, "
                             f"their descriptions {int(sizes.sum())}")
        return sizes, firsts

    def _groups(self, cids: list, target: int) -> list:
        """``cids`` in order, cut into runs of about ``target`` estimated bytes (at least a chunk each)."""
        if self._nbytes is None or len(cids) <= 1:
            return [[c] for c in cids]
        sizes = self._nbytes[np.asarray(cids, dtype=np.int64)].tolist()
        out: list = []
        run: list = []
        acc = 0
        for cid, n in zip(cids, sizes):
            if run and acc + n > target:
                out.append(run)
                run, acc = [], 0
            run.append(cid)
            acc += n
        if run:
            out.append(run)
        return out

    def _submit(self, group: list) -> None:
        assert self.pool is not None
        fut = self.pool.submit(self._load_group, group)
        for cid in group:
            self.futures[cid] = fut
        self.version += 1

    def start(self, cids, *, ahead: bool = False) -> None:
        """Begin loading these chunks on the background threads (those neither held nor under way),
        small ones several to a task. ``ahead``: the prefetch after a minibatch; where runs are
        joined, chunks adding up to less than ``MIN_TASK_BYTES`` are not started (they load with
        the next awaited burst, in its unit, not as a unit of their own: a 16 KB file-order sweep
        made 83 loads, 27 of them the prefetch's 2 chunks ahead)."""
        if self.pool is None:
            return
        todo = [c for c in cids if c not in self.loaded and c not in self.futures]
        if (ahead and self._joined and todo and self._nbytes is not None
                and int(self._nbytes[np.asarray(todo, dtype=np.int64)].sum()) < MIN_TASK_BYTES):
            return
        for group in self._groups(todo, GROUP_BYTES):
            self._submit(group)

    def ensure(self, cids: list, ahead=()) -> None:
        """Load these chunks (the caller waits for all of them). Several at once go to the
        background threads, a chunk each (chunks under ``GROUP_BYTES``: a run of about equal bytes
        per thread, the first loaded by the caller, or all in the caller when they are too few to
        be worth a hand-off), unless the reader splits a chunk over threads: then one after another, each
        with every thread, so unequal chunks keep both threads busy. A reader that takes
        ``threads=`` but does not split all of its work (CBF: one thread checks a chunk's layout)
        gets a chunk per thread, and the chunks left over when they do not divide evenly among the
        threads load afterwards with every thread (three awaited chunks on two threads: the third
        no longer loads beside an idle thread).

        ``ahead``: chunks wanted next (the prefetch's list). Where the reader does not split
        chunks, up to ``threads - tasks`` of them start on the pool now, beside the awaited
        loads, instead of after the minibatch (a CBF chunk's gather is bound by memory, not by
        its two threads: in file order the next chunk's load then overlaps the first one's,
        sparse 100 MB sweep 55 -> 41 ms); never more loads at once than ``threads``, what
        ``recordkit plan`` counts. A splitting reader's awaited chunk has every thread already."""
        for cid in cids:
            self._raise_failed(cid)
        missing = [c for c in cids if c not in self.loaded and c not in self.futures]
        groups = [[c] for c in missing]
        if self.pool is not None and not self._splits and len(missing) > 1 and self._nbytes is not None:
            sizes = self._nbytes[np.asarray(missing, dtype=np.int64)]
            if int(sizes.max()) < GROUP_BYTES:  # small chunks: a run of about equal bytes per thread
                total = int(sizes.sum())
                runs = max(1, min(self.threads, total // MIN_TASK_BYTES))
                cuts = np.searchsorted(np.cumsum(sizes), [total * k / runs for k in range(1, runs)], side="left") + 1
                bounds = [0, *sorted(set(min(int(c), len(missing)) for c in cuts)), len(missing)]
                groups = [missing[a:b] for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
        if not self._splits and ahead:
            waited = set(cids)
            room = self.threads - len(groups)
            early = [c for c in ahead if c not in waited and c not in self.loaded and c not in self.futures]
            if room > 0 and early:
                self.start(early[:room])
        here: list = []
        if len(groups) > 1 and not self._splits and self.pool is not None:
            if self._takes_threads is None:
                self._takes_threads = takes_threads(self.deserializer)
            if all(len(g) == 1 for g in groups):
                left = len(groups) % self.threads if self._takes_threads else 0
                for g in groups[:len(groups) - left]:
                    self._submit(g)
                here = [c for g in groups[len(groups) - left:] for c in g]
            else:  # runs of small chunks: the caller loads the first (it would wait idle), the pool the rest
                for g in groups[1:]:
                    self._submit(g)
                here = groups[0]
        else:
            here = missing
        if len(cids) == 1:
            self._hold(cids[0])
            return
        # one burst: each load reuses the last one's text buffers; the chunks loaded here and those
        # the awaited pool tasks loaded are installed together (one look-up pass over all of them)
        with retaining_buffers(self.deserializer):
            results = self._load_burst(here)
            for fut in dict.fromkeys(self.futures[c] for c in cids if c in self.futures):
                results += self._collect(fut)
            self._install(results)
            for cid in cids:
                self._hold(cid)

    def _load_burst(self, cids: list) -> list:
        """Awaited chunks loaded here: small ones in one ``load_chunks`` call where the reader has it
        (a failed batch is loaded again chunk by chunk, so the error raised is the first failing
        chunk's own), else each with every thread the reader can use."""
        if (self._batches and len(cids) > 1 and self._nbytes is not None
                and int(self._nbytes[np.asarray(cids, dtype=np.int64)].max()) < GROUP_BYTES):
            try:
                return self._load_many(cids)
            except Exception as e:  # noqa: BLE001 - loaded again, one at a time: the failing chunk's error
                for cid in cids:
                    self._load_here(cid)
                raise e  # every chunk loads alone: the batch's error was about all of them (_load_group)
        return [self._load_here(cid) for cid in cids]

    # -- lending ---------------------------------------------------------------------------------
    def lend(self, cid: int) -> None:
        """A minibatch was handed views of held chunk ``cid``'s arrays: the caller may write into
        them, so ``drop_lent`` drops the chunk before anything could deliver its sequences again."""
        self._lent.add(cid)

    def drop_lent(self) -> None:
        """Stop holding the chunks a minibatch was handed views of: within one sweep each sequence
        is delivered once, but a new sweep (a restore, another split) may deliver those
        sequences again, and must take them from a fresh load, not from memory a caller may have
        written into."""
        if self._lent:
            self.drop_many([c for c in self._lent if c in self.loaded])
            self._lent.clear()

    # -- dropping --------------------------------------------------------------------------------
    def drop(self, cid: int) -> None:
        self.drop_many([cid])

    def drop_many(self, cids) -> None:
        """Stop holding these chunks (held ones). Their slots are looked up with one array
        operation; a unit's slot is freed, and its layout counted off, once its last chunk is
        dropped (a sweep of small chunks drops hundreds at once)."""
        ids = [int(c) for c in cids]
        if ids:
            slots = self.slot_of[ids].tolist()
            self.slot_of[ids] = -1
            loaded, members = self.loaded, self._members
            for cid in ids:
                del loaded[cid]
            freed = []
            for slot in slots:
                members[slot] -= 1
                if not members[slot]:
                    freed.append(slot)
            gone: dict = {}
            columns, layout_of, units = self.columns, self._layout, self._units
            for slot in freed:
                columns[slot] = None
                units[slot] = None
                layout = layout_of[slot]
                layout_of[slot] = None
                gone[layout] = gone.get(layout, 0) + 1
            for layout, n in gone.items():
                left = self._layouts[layout] - n
                if left:
                    self._layouts[layout] = left
                else:
                    del self._layouts[layout]
            self._free.extend(freed)
            if self._lookups:
                for cid in ids:
                    self._lookups.pop(cid, None)
            if self._views:
                for cid in ids:
                    self._views.pop(cid, None)
            if self._lent:
                self._lent.difference_update(ids)
        self.version += 1

    def cancel(self) -> None:
        """Forget the loads under way (a new sweep or a restore wants others)."""
        for fut in set(self.futures.values()):
            fut.cancel()
        self.futures.clear()
        self.version += 1

    def clear(self) -> None:
        self.cancel()
        self.drop_many(list(self.loaded))

    def close(self) -> None:
        if self.pool is not None:
            self.cancel()
            self.pool.shutdown(wait=True)
            self.pool = None
