"""What a read holds in memory, computed from the index alone (``MinibatchSource(max_memory=...)``).

CNTK's randomized reader surprised its users: without a randomization window every chunk is
pulled in (an 8.5 GB text file became 52 GB of memory), and nobody could tell sweeps, epochs
and windows apart. Everything here is a pure function of what a deserializer knows before
loading anything (chunk descriptions, index sequence lengths, a decoded size estimate per
chunk), so the answer is there before the first byte of data is parsed:

* ``chunk_bytes``: the decoded size of every chunk (the deserializer's own
  ``estimated_chunk_bytes()`` where it has one, else an estimate from streams and samples).
* ``held_peak``: the most bytes of chunks ``MinibatchSource`` holds at once for a sweep order,
  following its policy exactly (a chunk is loaded at its first use or when the prefetch
  reaches it, dropped after the minibatch of its last use).
* ``choose_window``: the largest randomization window (and prefetch) whose held chunks fit a
  memory bound; this is what ``MinibatchSource(max_memory=...)`` applies.

``recordkit plan`` (``compose/plan.py``'s ``make_plan``) builds its whole report on these.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from recordkit.sizes import format_size, parse_size  # noqa: F401  (the bound in and out of words: the source asks here)

DEFAULT_MEMORY_FRACTION = 0.25   # the default bound: this fraction of the memory available now
ENGINE_BYTES_PER_SEQUENCE = 96   # MinibatchSource's per-sequence arrays (order, positions, lookups)


def available_memory() -> int:
    """Bytes of memory available now (Linux MemAvailable; else physical memory)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 40


def machine_memory_bound() -> int:
    """The default bound: ``DEFAULT_MEMORY_FRACTION`` of the memory available now, rounded down to
    a multiple of 256 MiB (from 512 MiB on), so that the small changes of available memory
    between runs on one machine do not change the window (and so the order) it allows."""
    bound = max(1, int(available_memory() * DEFAULT_MEMORY_FRACTION))
    step = 256 << 20
    return bound // step * step if bound >= 2 * step else bound


def resident_memory() -> int:
    """This process's resident set now (VmRSS), 0 where /proc is missing."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


# -- what a chunk costs --------------------------------------------------------------------------
BYTES_OBJECT = 41  # a bytes value's own cost beyond its data: CPython's bytes header and the array's pointer

def generic_chunk_bytes(streams, chunks, *, itemsize: int = 4, sparse_entries_per_byte: float | None = None
                        ) -> np.ndarray:
    """Decoded bytes of each chunk from its description: dense streams as samples x dim values,
    sparse ones as one row pointer per sample plus (value, int32 index) per entry, entries
    estimated from the chunk's bytes (``sparse_entries_per_byte``; default 1/8) or, without
    bytes, 4 per sample; bytes streams as the chunk's bytes (the values are most of them: images,
    text) plus a Python object per value; plus per-sequence keys, lengths and offsets."""
    dense_dims = sum(s.dim for s in streams if not s.is_sparse and not s.is_bytes)
    n_sparse = sum(1 for s in streams if s.is_sparse)
    n_bytes = sum(1 for s in streams if s.is_bytes)
    density = 1 / 8 if sparse_entries_per_byte is None else sparse_entries_per_byte
    out = np.zeros(len(chunks), dtype=np.int64)
    for k, c in enumerate(chunks):
        rows, seqs = int(c.num_samples), int(c.num_sequences)
        b = rows * dense_dims * itemsize + seqs * (8 * (len(streams) + 1) + 24)
        if n_sparse:
            entries = density * c.size if c.size else 4 * rows * n_sparse
            b += n_sparse * (rows + 1) * 8 + int(entries) * (itemsize + 4)
        if n_bytes:
            b += int(c.size) + seqs * n_bytes * BYTES_OBJECT
        out[k] = b
    return out


def chunk_bytes(deserializer) -> np.ndarray:
    """Estimated decoded bytes of every chunk of ``deserializer``, in ``chunks`` order."""
    own = getattr(deserializer, "estimated_chunk_bytes", None)
    if own is not None:
        return np.asarray(own(), dtype=np.int64)
    item = getattr(getattr(deserializer, "dtype", None), "itemsize", 4) or 4
    return generic_chunk_bytes(deserializer.streams, deserializer.chunks, itemsize=item)


def load_bytes(deserializer, decoded: np.ndarray) -> np.ndarray:
    """Memory a chunk needs while it loads, beyond its decoded result: its raw bytes and the
    parser's output before it becomes the chunk's arrays (about the decoded size again). A
    reader that reads runs of small chunks at once (``run_bytes``: CBF) holds a whole run's
    bytes while one of them loads: a smaller chunk counts that much raw."""
    from recordkit.engine.deserializer import run_bytes
    raw = np.array([int(c.size) for c in deserializer.chunks], dtype=np.int64)
    run = run_bytes(deserializer)
    if run:
        raw = np.maximum(raw, run)
    return raw + decoded


# -- which chunks are held when --------------------------------------------------------------------
def held_peak(chunk_of_position: np.ndarray, nbytes: np.ndarray, *, prefetch: int = 2,
              steps: np.ndarray | None = None, loading: np.ndarray | None = None, threads: int = 2,
              splits: bool = False) -> tuple[int, int]:
    """(bytes, chunks) of the most chunks held at once while reading positions in this order.

    ``chunk_of_position``: the chunk of each position of a worker's share, in reading order;
    ``steps``: the end position of every minibatch (None: a minibatch per position).
    ``MinibatchSource``'s policy: a chunk is loaded during the minibatch of its first use, or
    earlier when the prefetch reaches it (after each minibatch the next ``prefetch + 1`` chunks
    in order of first use are started), and dropped after the minibatch of its last use.
    ``loading``: bytes a chunk needs beyond its decoded size while it loads; counted in the
    step its load starts, for at most ``threads`` chunks (the loads that run at once);
    ``splits``: the reader parses a chunk on every thread (``splits_chunks``), so the chunks a
    minibatch waits for load one at a time, before the prefetched ones start.
    """
    share = np.asarray(chunk_of_position, dtype=np.int64)
    if len(share) == 0:
        return 0, 0
    # first and last position of every chunk (ids are small integers: O(n), no sort of the positions)
    pos = np.arange(len(share), dtype=np.int64)
    first = np.full(int(share.max()) + 1, len(share), dtype=np.int64)
    last = np.full(len(first), -1, dtype=np.int64)
    np.minimum.at(first, share, pos)
    np.maximum.at(last, share, pos)
    uniq = np.flatnonzero(last >= 0)
    rank = np.argsort(first[uniq], kind="stable")
    uniq = uniq[rank]
    first, last = first[uniq], last[uniq]
    if steps is None:
        step_of = lambda p: np.asarray(p, dtype=np.int64)  # noqa: E731
        n_steps = len(share)
    else:
        ends = np.asarray(steps, dtype=np.int64)
        step_of = lambda p: np.searchsorted(ends, np.asarray(p), side="right")  # noqa: E731
        n_steps = len(ends) + 1
    t_need = step_of(first)
    t_load = t_need.copy()
    # prefetch P: the chunk in use and the next P + 1 in order of first use; 0: no prefetch at all,
    # chunks load when a minibatch reaches them, one at a time (the engine has no pool then)
    p = max(int(prefetch), 0) + 1 if prefetch else 0
    if not prefetch:
        threads = 1
    if p and len(uniq) > p:
        # chunk of rank r is started once the chunk of rank r - p is in use
        t_load[p:] = np.minimum(t_need[p:], step_of(first[:-p]))
    t_load[:p] = 0  # the first minibatch's prefetch starts them
    t_free = step_of(last)
    sizes = nbytes[uniq].astype(np.int64)
    # what is held changes only where a chunk is loaded or dropped: the timeline at those steps (and
    # step 0) alone, in order, rather than at every step (a sweep of many sequences has ~60,000)
    steps_at, where = np.unique(np.concatenate([[0], t_load, t_free + 1]), return_inverse=True)
    k = len(sizes)
    delta = np.zeros(len(steps_at), dtype=np.int64)
    count = np.zeros(len(steps_at), dtype=np.int64)
    np.add.at(delta, where[1:], np.concatenate([sizes, -sizes]))
    np.add.at(count, where[1:], np.concatenate([np.ones(k, np.int64), np.full(k, -1, np.int64)]))
    held = np.cumsum(delta)
    if loading is not None:
        # the loads that start in a step run ``threads`` at a time, in order of first use; while a
        # group runs, the groups before it are held and the later ones not yet allocated
        extra = np.asarray(loading, dtype=np.int64)[uniq]
        # the chunk-run accounting over every step, read at the steps the timeline keeps (every load
        # starts at one of them)
        held += _loads_in_flight(t_load, t_need, sizes, extra, max(int(threads), 1), splits, n_steps + 1)[steps_at]
    at = int(np.argmax(held))  # the first step of the peak: where it starts is where a chunk is loaded
    return int(held[at]), int(np.cumsum(count)[at])


def _loads_in_flight(t_load, t_need, sizes, extra, t: int, splits: bool, n: int) -> np.ndarray:
    """Per step, the bytes the loads starting in it need beyond their decoded sizes, at their
    worst. The loads of a step run in blocks of ``t`` in order of first use (``splits``: the
    minibatch's own chunks first, one at a time); while a block runs, the blocks before it are
    held and the later ones not yet allocated. Array operations over every load at once (a
    loop per step cost ~5 ms for 775 small chunks, each a step of its own in file order)."""
    out = np.zeros(n, dtype=np.int64)
    if len(t_load) == 0:
        return out
    own = t_need == t_load
    by = np.lexsort((~own, t_load)) if splits else np.argsort(t_load, kind="stable")
    tl, d, x = t_load[by], sizes[by], extra[by]
    k = len(tl)
    new_group = np.empty(k, dtype=bool)
    new_group[0] = True
    new_group[1:] = tl[1:] != tl[:-1]
    gstart = np.flatnonzero(new_group)
    gid = np.cumsum(new_group) - 1
    rank = np.arange(k, dtype=np.int64) - gstart[gid]
    awaited = np.add.reduceat(own[by].astype(np.int64), gstart)[gid] if splits else np.zeros(k, dtype=np.int64)
    block = np.where(rank < awaited, rank, awaited + (rank - awaited) // t)
    new_block = new_group.copy()
    new_block[1:] |= block[1:] != block[:-1]
    bstart = np.flatnonzero(new_block)
    bd, bx = np.add.reduceat(d, bstart), np.add.reduceat(x, bstart)
    bgroup = gid[bstart]
    cs = np.cumsum(bd)
    first_block = np.flatnonzero(np.diff(np.concatenate(([-1], bgroup))))  # each group's first block
    before = cs - bd - (cs - bd)[first_block][bgroup]
    best = np.maximum.reduceat(before + bd + bx, first_block)
    out[tl[gstart]] += best - np.add.reduceat(d, gstart)
    return out


@dataclass
class MemoryChoice:
    """What ``MinibatchSource`` chose to fit its memory bound (``source.memory``)."""
    max_memory: int | None        # the bound in bytes (None: unbounded)
    bound_from: str               # "argument", "machine" (a fraction of available memory) or "none"
    randomize: bool
    sample_based: bool
    window_requested: int | None  # None: the whole data set
    window: int | None            # the window used
    prefetch_requested: int
    prefetch: int
    estimated_bytes: int          # held chunks (window + prefetch) plus loads in flight, at the window used
    whole_bytes: int              # the same for every chunk of the data set at once
    capped: bool                  # the window (or prefetch) was reduced to fit
    fits: bool                    # the estimate is within the bound
    chunks: int = 0

    def window_text(self, window="chosen") -> str:
        w = self.window if window == "chosen" else window
        if not self.randomize:
            return "file order"
        if w is None or (not self.sample_based and w >= self.chunks):
            return "the whole data set" + (f" ({self.chunks} chunks)" if self.chunks else "")
        return f"{w} samples" if self.sample_based else f"{w} chunks"

    def describe(self) -> str:
        bound = "no memory bound" if self.max_memory is None else (
            f"memory bound {format_size(self.max_memory)}" + (" (25% of available memory)"
                                                              if self.bound_from == "machine" else ""))
        text = (f"randomization window {self.window_text()}, prefetch {self.prefetch} chunks: about "
                f"{format_size(self.estimated_bytes)} of chunks at once; {bound}")
        if self.capped:
            text += (f"; window reduced from {self.window_text(self.window_requested)}"
                     + (f" and prefetch from {self.prefetch_requested}" if self.prefetch != self.prefetch_requested
                        else "") + " to fit")
        if not self.fits and self.max_memory is not None:
            text += ("; even the smallest window does not fit: use smaller chunks (--chunk-size)"
                     if self.randomize else "; one chunk does not fit: use smaller chunks (--chunk-size)")
        return text

    def as_dict(self) -> dict:
        return asdict(self)


def randomizer_for(chunks, *, randomize: bool, window, sample_based: bool, seed: int, cache: dict | None = None,
                   make=None):
    """The engine's randomizer for these settings; ``cache`` keeps the last one made (with its sweep
    0) so that the source reuses it when it is the one chosen instead of shuffling again (only
    one: a sweep order of a large data set takes 16 bytes per sequence). ``make``: the
    deserializer's own ``make_randomizer`` when it has an order of its own (a mixture, whose parts'
    windows are all open at once: a block randomizer over the union would underestimate)."""
    from recordkit.engine.randomizer import BlockRandomizer, NoRandomizer
    key = (bool(randomize), window, bool(sample_based), int(seed))
    if cache is not None and key in cache:
        return cache[key]
    if make is not None:
        r = make(randomize=bool(randomize), window=window, sample_based=bool(sample_based), seed=int(seed))
    else:
        r = (BlockRandomizer(chunks, window=window, sample_based=sample_based, seed=seed) if randomize
             else NoRandomizer(chunks))
    if cache is not None:
        cache.clear()
        cache[key] = r
    return r


def estimate_held(chunks, nbytes, loading, *, randomize: bool, window, sample_based: bool, seed: int,
                  prefetch: int, threads: int, cache: dict | None = None, make=None) -> int:
    """Bytes of chunks held at once (window + prefetch) with the loads in flight, for sweep 0.

    Minibatch by minibatch the engine can hold one chunk more than position by position
    (a minibatch that spans a chunk's last use and another's first); that is counted as the
    largest chunk. Up to ``threads`` chunks load at once, each needing ``loading`` bytes more."""
    if len(chunks) == 0:
        return 0
    order = randomizer_for(chunks, randomize=randomize, window=window, sample_based=sample_based, seed=seed,
                           cache=cache, make=make).sweep(0).chunk
    held, _ = held_peak(order, by_id(chunks, nbytes), prefetch=prefetch, loading=by_id(chunks, loading),
                        threads=threads)
    return held + int(nbytes.max())


def by_id(chunks, values: np.ndarray) -> np.ndarray:
    """Per-chunk values (in ``chunks`` order) indexed by chunk id, as sweep orders name chunks."""
    ids = [c.id for c in chunks]
    if ids == list(range(len(ids))):
        return np.asarray(values, dtype=np.int64)
    out = np.zeros(max(ids) + 1 if ids else 0, dtype=np.int64)
    out[ids] = values
    return out


def in_flight(loading: np.ndarray, threads: int) -> int:
    k = min(max(int(threads), 1), len(loading))
    return int(np.sort(loading)[::-1][:k].sum()) if k else 0


def choose_window(chunks, nbytes, loading, *, max_memory: int | None, bound_from: str = "argument",
                  randomize: bool, window: int | None, sample_based: bool = False, seed: int = 0,
                  prefetch: int = 2, threads: int = 2, cache: dict | None = None, make=None) -> MemoryChoice:
    """The largest window (the requested one when it fits; the prefetch only when a one-chunk
    window does not fit) whose held chunks and loads in flight stay within ``max_memory``.

    The window is only ever reduced, never changed otherwise: when the requested window fits,
    the randomized order is exactly the one asked for (CNTK's for that window)."""
    chunks = list(chunks)
    nbytes = np.asarray(nbytes, dtype=np.int64)
    loading = np.asarray(loading, dtype=np.int64)
    C = len(chunks)
    whole = int(nbytes.sum()) + (in_flight(loading, threads) if C else 0)
    total_samples = sum(int(c.num_samples) for c in chunks)
    base: dict[str, Any] = dict(max_memory=max_memory, bound_from=bound_from, randomize=randomize,
                                sample_based=sample_based, window_requested=window,
                                prefetch_requested=int(prefetch), whole_bytes=whole, chunks=C)
    if C == 0:
        return MemoryChoice(window=window, prefetch=int(prefetch), estimated_bytes=0, capped=False, fits=True, **base)

    def est(w, p):
        if randomize and (w is None or int(w) >= (total_samples if sample_based else C)):
            return whole  # a window of the whole data set: every chunk is in use from the start to the end
        return min(whole, estimate_held(chunks, nbytes, loading, randomize=randomize, window=w,
                                        sample_based=sample_based, seed=seed, prefetch=p, threads=threads,
                                        cache=cache, make=make))

    first = est(window, prefetch)
    if max_memory is None or first <= max_memory:
        return MemoryChoice(window=window, prefetch=int(prefetch), estimated_bytes=first, capped=False,
                            fits=max_memory is None or first <= max_memory, **base)
    if randomize:
        # search in chunk units (a sample-based window in multiples of the mean chunk's samples)
        per = max(1, total_samples // max(C, 1)) if sample_based else 1
        hi_units = C if window is None else max(1, min(C, -(-int(window) // per)))
        lo, hi, best = 1, hi_units - 1, None
        while lo <= hi:
            mid = (lo + hi) // 2
            e = est(mid * per, prefetch)
            if e <= max_memory:
                best, lo = (mid, e), mid + 1
            else:
                hi = mid - 1
        if best is not None:
            return MemoryChoice(window=best[0] * per, prefetch=int(prefetch), estimated_bytes=best[1], capped=True,
                                fits=True, **base)
        w: int | None = per
    else:
        w = window
    e = first
    for p in range(int(prefetch), -1, -1):  # the smallest window does not fit: prefetch less
        e = est(w, p)
        if e <= max_memory:
            return MemoryChoice(window=w, prefetch=p, estimated_bytes=e, capped=True, fits=True, **base)
    return MemoryChoice(window=w, prefetch=0, estimated_bytes=e, capped=randomize or prefetch > 0, fits=False,
                        **base)
