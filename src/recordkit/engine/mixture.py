"""Weighted mixing: one source over several data sets, each drawn in a set proportion.

``Mixture([a, b], weights=[0.7, 0.3])`` is a deserializer (the union of the parts' chunks), so a
``MinibatchSource`` over it has everything sources have: minibatches in samples, partitions,
checkpoints, elastic resume, torch. What makes it a mixture is its randomizer
(``MixtureRandomizer``), which the source takes from it (``make_randomizer``):

* every part is read as an endless stream of its own sweeps, each in CNTK's block-randomized
  order (or file order), with a seed of its own, so each part is randomized within itself as
  a source over it alone would be;
* mixture sweep k takes from part i the next ``count[i]`` sequences of that stream, positions
  [k * count[i], (k + 1) * count[i]): over consecutive sweeps every sequence of an undersampled part
  comes once before any comes twice, and an oversampled part is repeated whole, each repetition
  in a new order (MosaicML Streaming's ``choose`` and ``repeat``);
* the parts are interleaved evenly (the j-th of part i's ``count[i]`` draws at fractional place
  (j + 1/2) / count[i]), so every stretch of the sweep holds about the proportions, not one part
  after the other.

``count[i]`` comes from ``repeats`` (count = repeats[i] x the part's sequences; 1 = each
sequence once per sweep, 0.5 = half of them, a different half each sweep, 2 = twice) or from
``weights`` (proportions of the sweep's sequences; the sweep has as many as all parts together
unless ``sweep_sequences`` says otherwise). Everything is a pure function of the seed and the sweep
index, which is what makes it checkpointable and elastic like any source.

Sample counts: with whole repeats every sweep has the same samples, so ``max_samples`` and
``epoch_size`` work as usual; with weights or fractional repeats the sweeps differ in samples,
and the source refuses those two (``max_sweeps`` bounds the data).
"""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Iterable

import numpy as np

from recordkit.engine.chunk import ChunkData
from recordkit.engine.deserializer import (Deserializer, WrapsDeserializers, load_chunk, name_of, sequence_lengths,
                                           splits_chunks, takes_threads)
from recordkit.engine.randomizer import BlockRandomizer, NoRandomizer, SweepOrder
from recordkit.errors import UsageError


def _name(d) -> str:
    return name_of(d)


def identity(d) -> str:
    """What a checkpoint calls a data set: its file's name without the directory (data moved to
    another place still resumes), a wrapper's the names of what it wraps, else its type."""
    wrapped = getattr(d, "wrapped", None)
    if wrapped is not None:
        return "(" + " + ".join(identity(w) for w in wrapped()) + ")"
    path = getattr(d, "path", None)
    if path is None:
        return type(d).__name__
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else str(path)
    return os.path.basename(text.rstrip("/")) or text


class Mixture(WrapsDeserializers):
    """The union of ``parts`` (deserializers of the same streams, any formats), mixed by
    ``weights`` or by ``repeats`` per sweep (see the module docstring)."""

    def __init__(self, parts: Iterable[Deserializer], *, weights: Iterable[float] | None = None,
                 repeats: Iterable[float] | None = None, sweep_sequences: int | None = None) -> None:
        parts = list(parts)
        if len(parts) < 1:
            raise UsageError("a mixture needs at least one data set")
        if (weights is None) == (repeats is None):
            raise UsageError("give a mixture either weights or repeats (one per data set)")
        given = [float(v) for v in (weights if weights is not None else repeats)]  # type: ignore[union-attr]
        what = "weights" if weights is not None else "repeats"
        if len(given) != len(parts):
            raise UsageError(f"{len(given)} {what} for {len(parts)} data sets")
        if any(not math.isfinite(v) or v < 0 for v in given) or sum(given) <= 0:
            raise UsageError(f"{what} must be finite, >= 0 and not all 0: got {given}")
        self.parts = parts
        self.streams = list(parts[0].streams)
        for p in parts[1:]:
            _check_streams(parts[0], p)
        self._chunks: list = []
        self._owner: list = []
        self.offsets: list = []
        for i, p in enumerate(parts):
            self.offsets.append(len(self._chunks))
            for c in p.chunks:
                self._chunks.append(dataclasses.replace(c, id=len(self._chunks)))
                self._owner.append((i, c.id))
        sizes = [sum(c.num_sequences for c in p.chunks) for p in parts]
        if weights is not None:
            total = int(sweep_sequences) if sweep_sequences is not None else sum(sizes)
            if total <= 0:
                raise UsageError("sweep_sequences must be positive")
            self.counts = _apportion(given, total)
        else:
            if sweep_sequences is not None:
                raise UsageError("sweep_sequences goes with weights (repeats fix the sweep's size)")
            self.counts = [int(round(r * n)) for r, n in zip(given, sizes)]
        for p, n, c in zip(parts, sizes, self.counts):
            if c and not n:
                raise UsageError(f"{_name(p)}: has no sequences to draw {c} from")
        self.sizes = sizes
        self._takes_threads = [takes_threads(p) for p in parts]
        self.weights = given if weights is not None else None
        self.repeats = given if repeats is not None else None
        # whole repeats: every sweep is whole sweeps of the parts, so it has the same samples
        self.constant_sweeps = repeats is not None and all(float(r).is_integer() for r in given)
        if not any(self.counts):
            raise UsageError("the mixture draws no sequence per sweep")

    # -- the Deserializer protocol ------------------------------------------------------------------
    @property
    def chunks(self):
        return list(self._chunks)

    @property
    def splits_chunks(self) -> bool:
        return all(splits_chunks(p) for p in self.parts)

    def load_chunk(self, chunk_id: int, threads: int | None = None) -> ChunkData:
        i, local = self._owner[chunk_id]
        part = self.parts[i]
        data = load_chunk(part, local, threads, self._takes_threads[i])
        return dataclasses.replace(data, chunk_id=chunk_id)

    def sequence_lengths(self, chunk_id: int) -> np.ndarray | None:
        i, local = self._owner[chunk_id]
        return sequence_lengths(self.parts[i], local)

    def wrapped(self) -> list:
        return list(self.parts)

    @property
    def path(self) -> str:
        return " + ".join(_name(p) for p in self.parts)

    # -- what makes it a mixture -------------------------------------------------------------------
    def make_randomizer(self, *, randomize: bool, window: int | None, sample_based: bool, seed: int) -> "MixtureRandomizer":
        return MixtureRandomizer(self, randomize=randomize, window=window, sample_based=sample_based, seed=seed)

    def describe(self) -> dict:
        return {"parts": [_name(p) for p in self.parts], "sequences": self.sizes, "per_sweep": self.counts,
                "weights": self.weights, "repeats": self.repeats}

    def members(self) -> list:
        """The data sets as a checkpoint records them, in order (``engine/checkpoint.py`` compares
        them on restore): name, sequences, draws per sweep, and the weight (as a proportion, so
        [7, 3] is [0.7, 0.3]) or the repeats."""
        weights = self.weights
        total = sum(weights) if weights is not None else None
        out = []
        for k, (p, n, c) in enumerate(zip(self.parts, self.sizes, self.counts)):
            if weights is not None and total is not None:
                how = {"weight": weights[k] / total}
            else:
                assert self.repeats is not None  # a mixture has weights or repeats
                how = {"repeats": self.repeats[k]}
            out.append({"name": identity(p), "sequences": int(n), "per_sweep": int(c), **how})
        return out


class MixtureRandomizer:
    """Sweep k of a mixture: each part's next draws from its endless stream of sweeps, interleaved."""

    def __init__(self, mixture: Mixture, *, randomize: bool, window, sample_based: bool, seed: int):
        self.mixture = mixture
        self.randomize = bool(randomize)
        self.window = window
        self.sample_based = bool(sample_based)
        self.seed = int(seed)
        self.chunks = mixture.chunks
        self.constant_sweeps = mixture.constant_sweeps
        self._parts = []
        for i, part in enumerate(mixture.parts):
            chunks = [dataclasses.replace(c, id=k) for k, c in enumerate(part.chunks)]
            # each part its own seed (part 0 keeps the mixture's, so one part is just a source)
            self._parts.append(BlockRandomizer(chunks, window=window, sample_based=sample_based,
                                               seed=self.seed + 1_000_003 * i) if randomize else NoRandomizer(chunks))
        self._cache: tuple[int, SweepOrder] | None = None

    def describe(self) -> dict:
        m = self.mixture
        return {"randomize": self.randomize, "window": self.window if self.randomize else None,
                "sample_based": self.sample_based if self.randomize else None,
                "seed": self.seed if self.randomize else None,
                "mixture": {"per_sweep": m.counts, "sequences": m.sizes}}

    def members(self) -> list:
        return self.mixture.members()

    def draws(self, part: int, sweep_index: int) -> tuple[np.ndarray, np.ndarray]:
        """Part ``part``'s sequences in mixture sweep ``sweep_index``: (its chunk ids, indexes),
        positions [k*count, (k+1)*count) of its endless stream of sweeps."""
        count, size = self.mixture.counts[part], self.mixture.sizes[part]
        if not count:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        start, stop = sweep_index * count, (sweep_index + 1) * count
        chunk, index = [], []
        for s in range(start // size, (stop - 1) // size + 1):
            order = self._parts[part].sweep(s)
            a, b = max(start - s * size, 0), min(stop - s * size, size)
            chunk.append(order.chunk[a:b])
            index.append(order.index[a:b])
        return np.concatenate(chunk), np.concatenate(index)

    def sweep(self, sweep_index: int) -> SweepOrder:
        if self._cache is not None and self._cache[0] == sweep_index:
            return self._cache[1]
        chunks, indexes, places = [], [], []
        for i, count in enumerate(self.mixture.counts):
            c, x = self.draws(i, sweep_index)
            if not len(c):
                continue
            chunks.append(c + self.mixture.offsets[i])
            indexes.append(x)
            places.append((np.arange(len(c), dtype=np.float64) + 0.5) / len(c))
        place = np.concatenate(places)
        by = np.argsort(place, kind="stable")  # even interleave; ties keep part order
        order = SweepOrder(np.concatenate(chunks)[by], np.concatenate(indexes)[by])
        self._cache = (sweep_index, order)
        return order

    def trace(self, sweep_index: int) -> str:
        m = self.mixture
        parts = ", ".join(f"{c} of {n} from {_name(p)}" for c, n, p in zip(m.counts, m.sizes, m.parts))
        how = f"each randomized (seed {self.seed} + sweep, window {self.window})" if self.randomize else "file order"
        return f"mixture: {parts}; {how}"


def _apportion(weights: list, total: int) -> list:
    """Whole counts in the weights' proportions that sum to ``total`` (largest remainders)."""
    w = np.asarray(weights, dtype=np.float64)
    exact = w / w.sum() * total
    counts = np.floor(exact).astype(np.int64)
    short = total - int(counts.sum())
    if short > 0:
        counts[np.argsort(-(exact - counts), kind="stable")[:short]] += 1
    return [int(c) for c in counts]


def _check_streams(first, other) -> None:
    a = {s.name: s for s in first.streams}
    b = {s.name: s for s in other.streams}
    if set(a) != set(b):
        raise UsageError(f"a mixture's data sets must have the same streams: {_name(first)} has "
                         f"{sorted(a)}, {_name(other)} has {sorted(b)}")
    for name, s in a.items():
        t = b[name]
        if (s.format, s.dim) != (t.format, t.dim):
            raise UsageError(f"stream {name!r} differs between the mixture's data sets: {s.format} {s.dim} in "
                             f"{_name(first)}, {t.format} {t.dim} in {_name(other)}")
