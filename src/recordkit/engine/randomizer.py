"""The order in which a sweep delivers sequences.

``BlockRandomizer`` is CNTK 2.7's: chunks are shuffled, then every sequence is
swapped with a random one from within the randomization window of its chunk, so
only a window of chunks must be in memory at once. Seeds are ``seed + sweep``: each
sweep has a new order, the same on every run and machine, and with one worker the
same order CNTK 2.7 gives for the same seed, window and chunking.
``NoRandomizer`` is file order.

A ``SweepOrder`` lists, for every position of the sweep, the original chunk id and
the index of the sequence inside that chunk.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recordkit.engine import _randomize


@dataclass(frozen=True)
class SweepOrder:
    chunk: np.ndarray   # original chunk id of the sequence at each position (int64)
    index: np.ndarray   # its index inside that chunk (int64)

    def __len__(self) -> int:
        return len(self.chunk)


class NoRandomizer:
    """File order: chunk after chunk, sequences in storage order."""

    def __init__(self, chunks):
        self.chunks = list(chunks)
        counts = np.array([c.num_sequences for c in self.chunks], dtype=np.int64)
        starts = np.cumsum(counts) - counts
        # each chunk's 0..n-1, as one arange less each chunk's start (an arange per chunk cost ~1 ms
        # for 775 small chunks)
        self._order = SweepOrder(np.repeat(np.arange(len(counts), dtype=np.int64), counts),
                                 np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(starts, counts))

    def sweep(self, sweep_index: int) -> SweepOrder:
        return self._order

    def describe(self) -> dict:
        return {"randomize": False}


class BlockRandomizer:
    """CNTK's BlockRandomizer (spec section 5.3).

    window: in chunks (``sample_based=False``; 0 means 1) or in samples; None = the
    whole data set. ``seed``: CNTK's randomizationSeed; sweep k uses seed + k.
    """

    def __init__(self, chunks, *, window: int | None = None, sample_based: bool = False, seed: int = 0):
        self.chunks = list(chunks)
        self.window = window
        self.sample_based = bool(sample_based)
        self.seed = int(seed)
        self._cache: tuple[int, SweepOrder] | None = None

    def describe(self) -> dict:
        return {"randomize": True, "window": self.window, "sample_based": self.sample_based, "seed": self.seed}

    def chunk_permutation(self, sweep_index: int) -> np.ndarray:
        return _randomize.shuffle_chunks(len(self.chunks), _seed(self.seed + sweep_index))

    def windows(self, perm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """[begin, end) window of each randomized chunk, in randomized chunk indexes."""
        C = len(perm)
        begin = np.zeros(C, dtype=np.int64)
        end = np.zeros(C, dtype=np.int64)
        if C == 0:
            return begin, end
        if self.window is None:
            begin[:] = 0
            end[:] = C
            return begin, end
        if not self.sample_based:
            w = max(int(self.window), 1)
            for k in range(C):
                b = max(0, k - w // 2)
                e = b + w
                if e > C:
                    e = C
                    b = max(0, C - w)
                begin[k], end[k] = b, e
            return begin, end
        samples = np.array([self.chunks[i].num_samples for i in perm], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(samples)])
        half = int(self.window) // 2
        b, e = 0, 1
        for k in range(C):
            while starts[k] - starts[b] > half:
                b += 1
            b = min(b, k)
            e = max(e, k + 1)
            while e < C and starts[e + 1] - starts[k] < half:
                e += 1
            begin[k], end[k] = b, e
        return begin, end

    def sweep(self, sweep_index: int) -> SweepOrder:
        if self._cache is not None and self._cache[0] == sweep_index:
            return self._cache[1]
        perm = self.chunk_permutation(sweep_index)
        begin, end = self.windows(perm)
        counts = np.array([self.chunks[i].num_sequences for i in perm], dtype=np.int64)
        src, idx = _randomize.shuffle_sequences(counts, begin, end, _seed(self.seed + sweep_index))
        order = SweepOrder(perm[src], idx)
        self._cache = (sweep_index, order)
        return order


def _seed(value: int) -> int:
    # CNTK casts the seed to unsigned long (64 bits here)
    return int(value) % (1 << 64)
