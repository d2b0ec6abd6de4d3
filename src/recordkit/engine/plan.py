"""Memory and timeline of a read, computed from the index alone (``recordkit plan``, ``max_memory``).

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
* ``make_plan``: everything ``recordkit plan`` prints: chunks, window, estimated peak memory,
  how sweeps, epochs and minibatches line up, what each partition reads.
"""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from recordkit.engine.deserializer import splits_chunks
from recordkit.engine.sweep import share_bounds  # the source's split of a sweep among workers

DEFAULT_MEMORY_FRACTION = 0.25   # the default bound: this fraction of the memory available now
ENGINE_BYTES_PER_SEQUENCE = 96   # MinibatchSource's per-sequence arrays (order, positions, lookups)

_UNITS = {"": 1, "b": 1, "k": 10 ** 3, "kb": 10 ** 3, "kib": 1 << 10, "m": 10 ** 6, "mb": 10 ** 6,
          "mib": 1 << 20, "g": 10 ** 9, "gb": 10 ** 9, "gib": 1 << 30, "t": 10 ** 12, "tb": 10 ** 12,
          "tib": 1 << 40}


def parse_size(text) -> int:
    """Bytes from ``512MB``, ``1.5GiB``, ``4096`` (decimal units KB/MB/GB/TB, binary KiB/MiB/GiB/TiB)."""
    if isinstance(text, (int, np.integer)):
        value = int(text)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(text))
        unit = m.group(2).lower() if m else None
        if m is None or unit not in _UNITS:
            raise ValueError(f"not a memory size: {text!r} (examples: 512MB, 2GiB, 1000000)")
        value = int(float(m.group(1)) * _UNITS[unit])
    if value <= 0:
        raise ValueError(f"a memory size must be positive, not {text!r}")
    return value


def format_size(n) -> str:
    n = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{int(n)} bytes" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


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
def generic_chunk_bytes(streams, chunks, *, itemsize: int = 4, sparse_entries_per_byte: float | None = None
                        ) -> np.ndarray:
    """Decoded bytes of each chunk from its description: dense streams as samples x dim values,
    sparse ones as one row pointer per sample plus (value, int32 index) per entry, entries
    estimated from the chunk's bytes (``sparse_entries_per_byte``; default 1/8) or, without
    bytes, 4 per sample; plus per-sequence keys, lengths and offsets."""
    dense_dims = sum(s.dim for s in streams if not s.is_sparse)
    n_sparse = sum(1 for s in streams if s.is_sparse)
    density = 1 / 8 if sparse_entries_per_byte is None else sparse_entries_per_byte
    out = np.zeros(len(chunks), dtype=np.int64)
    for k, c in enumerate(chunks):
        rows, seqs = int(c.num_samples), int(c.num_sequences)
        b = rows * dense_dims * itemsize + seqs * (8 * (len(streams) + 1) + 24)
        if n_sparse:
            entries = density * c.size if c.size else 4 * rows * n_sparse
            b += n_sparse * (rows + 1) * 8 + int(entries) * (itemsize + 4)
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
    parser's output before it becomes the chunk's arrays (about the decoded size again)."""
    raw = np.array([int(c.size) for c in deserializer.chunks], dtype=np.int64)
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
        by = np.argsort(t_load, kind="stable")
        cuts = np.flatnonzero(np.diff(t_load[by])) + 1
        t = max(int(threads), 1)
        for group in np.split(by, cuts):
            d, x = sizes[group], extra[group]
            awaited = 0
            if splits:  # the minibatch's own chunks first, one at a time; then the prefetched ones
                own = t_need[group] == t_load[group[0]]
                order = np.argsort(~own, kind="stable")
                d, x, awaited = d[order], x[order], int(own.sum())
            best = before = g = 0
            while g < len(group):
                end = g + 1 if g < awaited else g + t
                best = max(best, before + int(d[g:end].sum() + x[g:end].sum()))
                before += int(d[g:end].sum())
                g = end
            held[int(np.searchsorted(steps_at, t_load[group[0]]))] += best - int(d.sum())  # (>= 0)
    at = int(np.argmax(held))  # the first step of the peak: where it starts is where a chunk is loaded
    return int(held[at]), int(np.cumsum(count)[at])


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


# -- the whole plan ------------------------------------------------------------------------------------
def minibatch_ends(lengths: np.ndarray, size: int, cuts=()) -> np.ndarray:
    """End position of every minibatch over positions with these lengths, never crossing a
    position in ``cuts`` (epoch ends, the end of the data): cut by the rule the source's picks
    apply (``_gather.minibatch_ends``: the first sequence always, then sequences while they fit
    in ``size`` samples)."""
    from recordkit.engine import _gather
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    n = len(lengths)
    bounds = sorted({0, n, *[int(c) for c in cuts if 0 < c < n]})
    ends = [_gather.minibatch_ends(lengths, int(size), a, b) for a, b in zip(bounds[:-1], bounds[1:])]
    return np.concatenate(ends) if ends else np.zeros(0, dtype=np.int64)


@dataclass
class PlanInput:
    """What a read is asked to do (the arguments of ``recordkit read``)."""
    randomize: bool = False
    window: int | None = None
    sample_based: bool = False
    seed: int = 0
    max_memory: object = "auto"
    prefetch: int = 2
    threads: int = 2
    minibatch_size: int = 1
    max_sweeps: int | None = 1
    max_samples: int | None = None
    epoch_size: int | None = None
    partitions: int = 1
    partition_index: int = 0
    partition_by: str = "samples"
    truncation_length: int = 0
    frame_mode: bool = False
    extra: dict = field(default_factory=dict)


MAX_LISTED_EPOCHS = 50
MAX_TIMELINE_SWEEPS = 64
MAX_TIMELINE_POSITIONS = 20_000_000


def _bound(spec) -> tuple[int | None, str]:
    if isinstance(spec, str) and spec.strip().lower() == "auto":
        return machine_memory_bound(), "machine"
    if spec is None:
        return None, "none"
    return parse_size(spec), "argument"


def _estimated_lengths(deserializer) -> np.ndarray:
    """Index lengths of every described sequence, flattened in chunk order (as the engine counts)."""
    from recordkit.engine.deserializer import sequence_lengths
    parts = []
    for c in deserializer.chunks:
        known = sequence_lengths(deserializer, c.id)
        if known is not None:
            parts.append(np.asarray(known, dtype=np.int64))
        else:
            base, extra = divmod(c.num_samples, max(c.num_sequences, 1))
            est = np.full(c.num_sequences, base, dtype=np.int64)
            est[:extra] += 1
            parts.append(est)
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def make_plan(deserializer, request: PlanInput, *, baseline_bytes: int = 0, partition_deserializers=None) -> dict:
    """Everything ``recordkit plan`` reports, from the index only (nothing is parsed).

    ``deserializer``: what the read's MinibatchSource reads (for ``partition_by="chunks"`` the
    partition being read); ``partition_deserializers``: with ``partition_by="chunks"``, every
    partition's ``ChunkPartition`` (for the per-partition table); ``baseline_bytes``: the memory
    of a process that has opened these readers (the caller's resident set), to which the plan
    adds the engine's arrays, the chunks held, loads in flight and minibatches."""
    r = request
    chunks = list(deserializer.chunks)
    C = len(chunks)
    nbytes = chunk_bytes(deserializer)
    loading = load_bytes(deserializer, nbytes)
    bound, frm = _bound(r.max_memory)
    cache: dict = {}
    make = getattr(deserializer, "make_randomizer", None)  # a mixture's own order, for the memory choice
    choice = choose_window(chunks, nbytes, loading, max_memory=bound, bound_from=frm, randomize=r.randomize,
                           window=r.window, sample_based=r.sample_based, seed=r.seed, prefetch=r.prefetch,
                           threads=r.threads, cache=cache, make=make)
    randomizer = randomizer_for(chunks, randomize=r.randomize, window=choice.window, sample_based=r.sample_based,
                                seed=r.seed, cache=None if make else cache)  # the timeline: the union's order
    est = _estimated_lengths(deserializer)
    base = np.zeros(max((c.id for c in chunks), default=-1) + 2, dtype=np.int64)
    for c in chunks:
        base[c.id + 1] = c.num_sequences
    base = np.cumsum(base)
    sweep_samples = int(est.sum())
    sweep_sequences = int(len(est))
    samples_per_chunk = np.array([c.num_samples for c in chunks], dtype=np.int64)

    # the window: in chunks, samples and bytes (the largest over sweep 0's randomized chunks)
    window = {"randomize": r.randomize, "text": choice.window_text(), "requested": r.window,
              "sample_based": r.sample_based, "chosen": choice.window, "capped": choice.capped}
    if r.randomize and C:
        perm = randomizer.chunk_permutation(0)
        b, e = randomizer.windows(perm)
        spans = e - b
        cs = np.concatenate([[0], np.cumsum(samples_per_chunk[perm])])
        cb = np.concatenate([[0], np.cumsum(nbytes[perm])])
        window.update(chunks=int(spans.max()), samples=int((cs[e] - cs[b]).max()), bytes=int((cb[e] - cb[b]).max()))
    else:
        window.update(chunks=1, samples=int(samples_per_chunk.max()) if C else 0, bytes=int(nbytes.max()) if C else 0)

    # sweeps, epochs, minibatches of the partition being read
    sweeps_needed: int | None = r.max_sweeps
    if r.max_samples is not None:
        sweeps_needed = -(-int(r.max_samples) // max(sweep_samples, 1)) if sweep_samples else 1
    finite = sweeps_needed is not None
    # sweeps walked position by position: at most MAX_TIMELINE_SWEEPS and MAX_TIMELINE_POSITIONS in all
    room = max(1, MAX_TIMELINE_POSITIONS // max(sweep_sequences, 1))
    n_sweeps = min(sweeps_needed, MAX_TIMELINE_SWEEPS, room) if sweeps_needed is not None else 1
    total_samples = None
    if sweeps_needed is not None:
        total_samples = sweeps_needed * sweep_samples if r.max_samples is None else min(
            int(r.max_samples), sweeps_needed * sweep_samples)
    n, i = (r.partitions, r.partition_index) if r.partition_by == "samples" else (1, 0)
    share_lengths, share_global, sweep_starts, share_chunks = [], [], [], None
    per_partition: list[dict[str, Any]] = [{"index": k, "sequences": 0, "samples": 0, "chunks": 0} for k in range(n)]
    offset = 0
    for s in range(n_sweeps):
        order = randomizer.sweep(s)
        lens = est[base[order.chunk] + order.index] if len(order) else np.zeros(0, np.int64)
        cum = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=cum[1:])
        if s == 0:
            for k in range(n):
                lo, hi = share_bounds(cum, n, k)
                per_partition[k].update(sequences=hi - lo, samples=int(cum[hi] - cum[lo]),
                                        chunks=int(len(np.unique(order.chunk[lo:hi]))))
        lo, hi = share_bounds(cum, n, i)
        if s == 0:
            share_chunks = order.chunk[lo:hi]
        share_lengths.append(lens[lo:hi])
        share_global.append(s * sweep_samples + cum[lo:hi])
        sweep_starts.append(offset)
        offset += hi - lo
    L = np.concatenate(share_lengths) if share_lengths else np.zeros(0, np.int64)
    G = np.concatenate(share_global) if share_global else np.zeros(0, np.int64)
    end = len(L)
    if r.max_samples is not None:
        end = int(np.searchsorted(G, int(r.max_samples), side="left"))
    epoch_ends = []  # where each epoch ends in this worker's positions
    last_sample = total_samples if total_samples is not None else n_sweeps * sweep_samples
    if r.epoch_size:
        count = -(-int(last_sample) // int(r.epoch_size))
        bounds = np.arange(1, min(count, 1_000_000) + 1, dtype=np.int64) * int(r.epoch_size)
        epoch_ends = np.searchsorted(G, bounds, side="left").tolist()
    timeline: dict[str, Any] = {"samples_per_sweep": sweep_samples, "sequences_per_sweep": sweep_sequences,
                "sweeps": sweeps_needed, "sweeps_shown": n_sweeps, "total_samples": total_samples,
                "minibatch_size": r.minibatch_size,
                "epoch_size": r.epoch_size, "partition": [i, n] if r.partition_by == "samples" else
                [r.partition_index, r.partitions]}
    ends = None
    if r.truncation_length:
        timeline["minibatches"] = None
        timeline["note"] = "truncated BPTT: minibatches hold size // truncation_length slots; not counted here"
    else:
        ends = minibatch_ends(L[:end], max(1, int(r.minibatch_size)), cuts=[c for c in epoch_ends if c < end])
        timeline["minibatches"] = int(len(ends)) if finite and n_sweeps == sweeps_needed else None
        timeline["samples_read"] = int(L[:end].sum())
        timeline["sequences_read"] = int(end)
        sweep_of_end = np.searchsorted(np.array(sweep_starts[1:] + [end + 1]), ends, side="left") if len(ends) \
            else np.zeros(0, np.int64)
        timeline["minibatches_per_sweep"] = [int(np.sum((sweep_of_end == s))) for s in range(n_sweeps)]
        timeline["crossing_sweeps"] = int(sum(1 for s in sweep_starts[1:]
                                              if s < end and not np.any(ends == s)))
        if sweeps_needed is None:
            timeline["note"] = "no end (repeats forever): one sweep shown"
        elif n_sweeps < sweeps_needed:
            timeline["note"] = (f"the first {n_sweeps} sweeps are shown (counts of sequences, samples and "
                                f"minibatches are theirs)")
        epochs: list[dict[str, Any]] = []
        prev, prev_mb = 0, 0
        for e, cut in enumerate(epoch_ends[:MAX_LISTED_EPOCHS]):
            c = min(cut, end)
            nmb = int(np.searchsorted(ends, c, side="right"))
            at = min((e + 1) * int(r.epoch_size or 0), int(last_sample))
            epochs.append({"epoch": e, "ends_at_sample": at,
                           "ends_in_sweep": (at - 1) // max(sweep_samples, 1) if at else 0,
                           "sequences": c - prev, "samples": int(L[prev:c].sum()), "minibatches": nmb - prev_mb})
            prev, prev_mb = max(prev, c), max(prev_mb, nmb)
        timeline["epochs"] = epochs
        if r.epoch_size:
            timeline["epochs_total"] = -(-int(total_samples) // r.epoch_size) if total_samples is not None else None

    # what each partition reads
    if r.partition_by == "chunks" and partition_deserializers:
        per_partition = []
        for k, d in enumerate(partition_deserializers):
            cs = d.chunks
            per_partition.append({"index": k, "sequences": sum(c.num_sequences for c in cs),
                                  "samples": sum(c.num_samples for c in cs), "chunks": len(cs),
                                  "chunk_ids": list(getattr(d, "inner_chunk_ids", []))})

    # memory: held chunks minibatch by minibatch, loads in flight, minibatches, the engine's arrays
    if share_chunks is not None and len(share_chunks):
        steps = None
        if ends is not None:
            steps = ends[ends <= len(share_chunks)]
        held, held_chunks = held_peak(share_chunks, by_id(chunks, nbytes), prefetch=choice.prefetch, steps=steps)
        with_loads, _ = held_peak(share_chunks, by_id(chunks, nbytes), prefetch=choice.prefetch, steps=steps,
                                  loading=by_id(chunks, loading),
                                  threads=r.threads, splits=splits_chunks(deserializer))
    else:
        held = held_chunks = with_loads = 0
    flight = with_loads - held
    per_sample = float(nbytes.sum()) / max(sweep_samples, 1)
    mb_bytes = int(2 * per_sample * max(1, int(r.minibatch_size)))
    engine = ENGINE_BYTES_PER_SEQUENCE * sweep_sequences
    peak = int(baseline_bytes) + engine + min(held + flight, choice.whole_bytes) + mb_bytes
    memory = choice.as_dict()
    memory.update(held_bytes=held, held_chunks=held_chunks, in_flight_bytes=flight, minibatch_bytes=mb_bytes,
                  engine_bytes=engine, baseline_bytes=int(baseline_bytes), estimated_peak_bytes=peak,
                  description=choice.describe())
    table = [{"id": c.id, "sequences": c.num_sequences, "samples": c.num_samples, "bytes": c.size,
              "decoded_bytes": int(b)} for c, b in zip(chunks, nbytes)]
    return {"chunks": {"count": C, "sequences": sweep_sequences, "samples": sweep_samples,
                       "bytes": int(sum(c.size for c in chunks)), "decoded_bytes": int(nbytes.sum()),
                       "largest_decoded_bytes": int(nbytes.max()) if C else 0, "table": table},
            "window": window, "memory": memory, "timeline": timeline, "partitions": per_partition}
