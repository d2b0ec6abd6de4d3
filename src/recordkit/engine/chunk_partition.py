"""Whole-chunk partitions: each reader process owns a disjoint set of chunks.

``MinibatchSource``'s own partitions cut every sweep's order into contiguous runs of equal
samples. That balances samples exactly, but a randomized order draws each position from a
window of chunks, so with a large window every process ends up parsing nearly every chunk
and only the packing is divided (``benchmarks/many_readers.py`` shows it: total CPU grows
with the number of processes). ``ChunkPartition`` is the alternative CNTK 2.7 uses: deal
whole chunks to the partitions, so each process parses only its own and the work divides;
the price is balance to within one chunk rather than one sequence, and a process's
randomized order mixes only its own chunks.

It is a Deserializer over another one, so it composes with everything::

    part = ChunkPartition(CBFReader("train.cbf"), num_partitions=world, index=rank)
    source = MinibatchSource(part, randomize=True, seed=7)   # no partitions here: part is already one

Chunks go to partitions in file order as contiguous runs of about equal samples (partition
i takes the chunks whose first sample falls in [i*S/n, (i+1)*S/n)), so a partition reads
a contiguous region of each file. Every chunk belongs to exactly one partition.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from recordkit.engine.chunk import ChunkData
from recordkit.engine.deserializer import (ChunkInfo, Deserializer, WrapsDeserializers, chunk_sequence_keys, keys_are_ids,
                                           load_chunk, name_of, sequence_lengths, splits_chunks,
                                           takes_threads)
from recordkit.errors import UsageError


PARTITION_BY = ("auto", "samples", "chunks")


def reads_remote(deserializer) -> bool:
    """Whether ``deserializer`` (or any it wraps) reads a URL (an object store)."""
    from recordkit.storage.location import is_url
    wrapped = getattr(deserializer, "wrapped", None)
    if callable(wrapped):
        return any(reads_remote(d) for d in wrapped())
    return is_url(getattr(deserializer, "path", None))


def in_chunks(deserializer, partition_by: str, randomize: bool, num_partitions) -> bool:
    """Whether ``MinibatchSource``'s partitions are whole chunks: ``partition_by="chunks"``, or
    ``"auto"`` (the default) for a randomized read of remote files. Partitions by samples draw
    every position from a window of chunks, so with a wide window every partition fetches nearly
    every chunk: N readers download the file N times. Whole chunks are fetched once in all; the
    price is balance to within a chunk and a different (per partition) order. ``"samples"`` keeps
    the sample partitions. A mixture keeps its own order, hence partitions by samples."""
    if partition_by not in PARTITION_BY:
        raise UsageError(f"partition_by must be one of {', '.join(PARTITION_BY)}, not {partition_by!r}")
    if num_partitions is None or int(num_partitions) <= 1 or partition_by == "samples":
        return False
    if hasattr(deserializer, "make_randomizer"):
        if partition_by == "chunks":
            raise UsageError(f"{name_of(deserializer, 'the data')}: a mixture is split by samples "
                             f"(num_data_partitions), not into whole chunks")
        return False
    return partition_by == "chunks" or (bool(randomize) and reads_remote(deserializer))


def assign_chunks(chunks: list[ChunkInfo], num_partitions: int) -> np.ndarray:
    """The partition of every chunk: contiguous runs, balanced by samples (by chunk count when
    no chunk has samples)."""
    n = int(num_partitions)
    samples = np.array([max(int(c.num_samples), 0) for c in chunks], dtype=np.int64)
    if samples.sum() == 0:
        samples = np.ones(len(chunks), dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(samples)[:-1]])
    total = int(samples.sum())
    return np.minimum((starts * n) // max(total, 1), n - 1).astype(np.int64)


class ChunkPartition(WrapsDeserializers):
    """Partition ``index`` of ``num_partitions`` of ``deserializer``, in whole chunks."""

    def __init__(self, deserializer: Deserializer, num_partitions: int, index: int) -> None:
        n, i = int(num_partitions), int(index)
        if n < 1 or not 0 <= i < n:
            raise UsageError(f"partition index must be in [0, num_partitions): got {i} of {n}")
        if hasattr(deserializer, "make_randomizer"):
            # its order is its own (a mixture's proportions per sweep): whole chunks of its union
            # read in a block-randomized order would silently drop the proportions
            raise UsageError(f"{name_of(deserializer, 'the data')}: a mixture is split by samples "
                             f"(num_data_partitions), not into whole chunks")
        self.inner = deserializer
        self.num_partitions, self.index = n, i
        inner_chunks = deserializer.chunks
        owner = assign_chunks(inner_chunks, n)
        self._ids = [c.id for c, o in zip(inner_chunks, owner) if o == i]
        if not self._ids:
            where = name_of(deserializer, "the data")
            raise UsageError(f"{where}: {len(inner_chunks)} chunk(s) for {n} partitions leaves partition {i} "
                             f"empty; use smaller chunks (chunk_size) or fewer partitions")
        self._chunks = [dataclasses.replace(inner_chunks[cid], id=k) for k, cid in enumerate(self._ids)]
        self._inner_takes_threads = takes_threads(deserializer)

    @property
    def streams(self):
        return self.inner.streams

    @property
    def chunks(self) -> list[ChunkInfo]:
        return list(self._chunks)

    @property
    def inner_chunk_ids(self) -> list[int]:
        """The wrapped deserializer's ids of this partition's chunks, in order."""
        return list(self._ids)

    @property
    def splits_chunks(self) -> bool:
        return splits_chunks(self.inner)

    def load_chunk(self, chunk_id: int, threads: int | None = None) -> ChunkData:
        inner_id = self._ids[chunk_id]
        data = load_chunk(self.inner, inner_id, threads, self._inner_takes_threads)
        return dataclasses.replace(data, chunk_id=chunk_id)

    def wrapped(self) -> list:
        return [self.inner]

    # the optional half of the protocol, answered from the wrapped deserializer's
    @property
    def keys_are_ids(self) -> bool:
        return keys_are_ids(self.inner)

    def sequence_lengths(self, chunk_id: int) -> np.ndarray | None:
        return sequence_lengths(self.inner, self._ids[chunk_id])

    def sequence_keys(self, chunk_id: int) -> np.ndarray:
        return chunk_sequence_keys(self.inner, self._ids[chunk_id])

    def estimated_chunk_bytes(self) -> np.ndarray:
        from recordkit.engine.memory import chunk_bytes
        return np.asarray(chunk_bytes(self.inner))[self._ids]
