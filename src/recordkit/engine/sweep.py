"""Sweep planning, as pure functions: a sweep's order with sample positions, a worker's share.

Every worker computes the same positions before loading anything: a sequence's place in the
sweep is counted with the deserializer's *index* estimate of its length (``estimate_lengths``),
not with the loaded data. From the randomizer's order (``randomizer.py``) and those estimates
come the sample each position starts at (``order_positions``), the worker's contiguous share
(``share_bounds``) and the bookkeeping the chunk cache and the picker need about that share
(``build_sweep``: which chunks it uses, first and last, and where). Nothing here loads data or
keeps state: ``MinibatchSource`` (source.py) holds the current ``Sweep`` and its cursor.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Sweep:
    """One sweep's order with its positions, and this worker's share of it.

    Per chunk id (arrays as long as the largest id in the order + 1): where the share first and
    last uses it (-1: not at all), and its share-relative positions as the run
    ``grouped[group_lo[cid]:group_hi[cid]]``, so that what happens to many chunks at once (loaded,
    dropped) is a few array operations, not a dictionary look-up per chunk."""
    index: int
    chunk: np.ndarray      # original chunk id per position
    seq: np.ndarray        # index in the chunk description per position
    cum: np.ndarray        # estimated samples before each position (len + 1)
    lo: int                # this worker's positions [lo, hi)
    hi: int
    last_use: np.ndarray   # chunk id -> last position in [lo, hi) that needs it (-1: none)
    first_at: np.ndarray   # chunk id -> first position in [lo, hi) that needs it (-1: none)
    first_use: np.ndarray  # chunks in order of first use within [lo, hi)
    first_pos: np.ndarray  # ... and that first position
    grouped: np.ndarray    # share-relative positions grouped by chunk, each group in position order
    group_lo: np.ndarray   # chunk id -> where its group starts in ``grouped``
    group_hi: np.ndarray   # chunk id -> where it ends
    pos_j: np.ndarray      # share-relative: index in the loaded chunk (-1 dropped, -2 not loaded yet)
    pos_len: np.ndarray    # share-relative: real length once loaded (0 for dropped)
    orig: np.ndarray | None = None  # elastic resume: the sweep positions of this run (None: all of [lo, hi))

    def per_chunk(self, table: np.ndarray, cids: np.ndarray) -> np.ndarray:
        """``table[cids]`` for one of the per-chunk arrays, -1 for ids past its end."""
        inside = cids < len(table)
        if inside.all():
            return table[cids]
        return np.where(inside, table[np.where(inside, cids, 0)], -1)

    def positions_of(self, cids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The share-relative positions that use chunks ``cids`` (each chunk's in position order,
        chunk after chunk), and for each the index in ``cids`` of its chunk."""
        cids = np.asarray(cids, dtype=np.int64)
        a = self.per_chunk(self.group_lo, cids)
        b = self.per_chunk(self.group_hi, cids)
        a, b = np.maximum(a, 0), np.maximum(b, 0)
        counts = b - a
        ends = np.cumsum(counts)
        total = int(ends[-1]) if len(ends) else 0
        if total == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        at = np.arange(total, dtype=np.int64) - np.repeat(ends - counts - a, counts)
        return self.grouped[at], np.repeat(np.arange(len(cids), dtype=np.int64), counts)


def estimate_lengths(deserializer, chunks) -> dict:
    """Chunk id -> the index's estimate of each sequence's samples (what positions are counted in)."""
    from recordkit.engine.deserializer import sequence_lengths
    out = {}
    for c in chunks:
        known = sequence_lengths(deserializer, c.id)
        if known is not None:
            out[c.id] = np.asarray(known, dtype=np.int64)
        else:  # spread the chunk's samples evenly over its sequences
            base, extra = divmod(c.num_samples, max(c.num_sequences, 1))
            est = np.full(c.num_sequences, base, dtype=np.int64)
            est[:extra] += 1
            out[c.id] = est
    return out


def index_length_table(deserializer, chunks) -> "LengthTable":
    """``LengthTable(estimate_lengths(deserializer, chunks))``, from one ``all_sequence_lengths()``
    call where the deserializer has it and ``chunks`` are all of its chunks in id order (a reader
    of thousands of small chunks: no array per chunk)."""
    from recordkit.engine.deserializer import all_sequence_lengths
    ids = np.fromiter((c.id for c in chunks), dtype=np.int64, count=len(chunks))
    known = all_sequence_lengths(deserializer) if np.array_equal(ids, np.arange(len(ids))) else None
    if known is not None:
        flat, counts = known
        if len(counts) == len(ids) and len(flat) == int(counts.sum()):
            return LengthTable.of_flat(np.asarray(flat, dtype=np.int64), counts)
    return LengthTable(estimate_lengths(deserializer, chunks))


class LengthTable:
    """The estimates flattened in chunk-id order, to gather a sweep's lengths in one step."""

    def __init__(self, lengths: dict):
        ids = sorted(lengths)
        self.flat = np.concatenate([lengths[c] for c in ids]) if ids else np.zeros(0, np.int64)
        self.base = np.zeros(max(ids) + 1 if ids else 0, dtype=np.int64)
        if ids:
            sizes = np.array([len(lengths[c]) for c in ids], dtype=np.int64)
            self.base[ids] = np.cumsum(sizes) - sizes

    @classmethod
    def of_flat(cls, flat: np.ndarray, counts: np.ndarray) -> "LengthTable":
        """The table of chunks 0..n-1 whose lengths are ``flat``, ``counts[c]`` of them chunk c's."""
        table = cls.__new__(cls)
        table.flat = flat
        table.base = np.zeros(len(counts), dtype=np.int64)
        if len(counts) > 1:
            np.cumsum(counts[:-1], out=table.base[1:])
        return table

    def of(self, chunk: np.ndarray, seq: np.ndarray) -> np.ndarray:
        return self.flat[self.base[chunk] + seq] if len(chunk) else np.zeros(0, np.int64)


def cumulative(lengths: np.ndarray) -> np.ndarray:
    """The sample each position starts at, and the total last (len + 1)."""
    cum = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=cum[1:])
    return cum


def order_positions(randomizer, table: LengthTable, index: int):
    """Sweep ``index``'s order and the index estimate of the sample each position starts at."""
    order = randomizer.sweep(index)
    return order, cumulative(table.of(order.chunk, order.index))


def share_bounds(cum: np.ndarray, n: int, i: int) -> tuple[int, int]:
    """Partition i of n of a sweep whose sample positions are ``cum`` (len + 1): the contiguous
    positions whose first sample falls in [i*S/n, (i+1)*S/n) (by count when nothing has samples)."""
    count = len(cum) - 1
    total = int(cum[-1])
    if total == 0:
        return count * i // n, count * (i + 1) // n
    lo = int(np.searchsorted(cum[:-1], i * total / n, side="left")) if i else 0
    hi = int(np.searchsorted(cum[:-1], (i + 1) * total / n, side="left")) if i + 1 < n else count
    return lo, hi


def build_sweep(index: int, chunk: np.ndarray, seq: np.ndarray, cum: np.ndarray, lo: int, hi: int,
                orig: np.ndarray | None = None) -> Sweep:
    """The share [lo, hi) of an order, with where each chunk is first and last used in it; nothing
    is loaded yet (``pos_j`` -2 everywhere)."""
    share = chunk[lo:hi]
    size = int(chunk.max()) + 1 if len(chunk) else 0
    last_use = np.full(size, -1, dtype=np.int64)
    first_at = np.full(size, -1, dtype=np.int64)
    group_lo = np.zeros(size, dtype=np.int64)
    group_hi = np.zeros(size, dtype=np.int64)
    if len(share):
        # one stable sort groups the positions by chunk, each group in position order, so a
        # group's ends are the chunk's first and last use (three np.unique sorts took 23 ms of a
        # 229k-sequence sweep's start, before any chunk load began); chunk ids below 2**16 sort
        # as uint16, which NumPy radix-sorts (1.7 ms for 229k positions, 6 ms as int64)
        key = share.astype(np.uint16) if int(share.min()) >= 0 and int(share.max()) < 1 << 16 else share
        srt = np.argsort(key, kind="stable")
        grouped = share[srt]
        starts = np.flatnonzero(grouped[1:] != grouped[:-1]) + 1
        starts = np.concatenate(([0], starts))
        ends = np.append(starts[1:], len(srt))
        keys = grouped[starts]
        group_lo[keys] = starts
        group_hi[keys] = ends
        first = srt[starts]
        last_use[keys] = lo + srt[ends - 1]
        first_at[keys] = lo + first
        by_first = np.argsort(first, kind="stable")
        first_use, first_pos = keys[by_first], lo + first[by_first]
    else:
        srt = first_use = first_pos = np.zeros(0, dtype=np.int64)
    return Sweep(index, chunk, seq, cum, lo, hi, last_use, first_at, first_use, first_pos, srt, group_lo, group_hi,
                 np.full(hi - lo, -2, dtype=np.int64), np.zeros(hi - lo, dtype=np.int64), orig=orig)


def share_sweep(randomizer, table: LengthTable, index: int, n: int, i: int) -> Sweep:
    """Partition i of n of sweep ``index``: its order, sample positions and share, nothing loaded."""
    order, cum = order_positions(randomizer, table, index)
    lo, hi = share_bounds(cum, n, i)
    return build_sweep(index, order.chunk, order.index, cum, lo, hi)


def reach(sweep: Sweep, cursor: int, samples: int) -> int:
    """The end of the stretch from the cursor that ``samples`` samples cover by the index lengths
    (at least one position): what a minibatch with that much room left can still take."""
    cum = sweep.cum
    end = int(np.searchsorted(cum, cum[cursor] + max(int(samples), 1), side="right")) - 1
    return max(end, cursor + 1)


def wanted_ahead(sweep: Sweep, cursor: int, prefetch: int) -> list:
    """The chunks to hold or load now: the one in use and the next ``prefetch`` in order of first use,
    less those whose last use is behind the cursor (at the end of a sweep, or of a chunk in file
    order, the chunk just used up is not "in use": listing it made the prefetch load it again
    right after the eviction dropped it, and ``close`` wait for that load)."""
    k = int(np.searchsorted(sweep.first_pos, cursor, side="left"))
    near = sweep.first_use[max(0, k - 1):k + prefetch + 1]
    return near[sweep.last_use[near] >= cursor].tolist()
