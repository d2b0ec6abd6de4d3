"""OFRecordReader: OneFlow's reader parameters over a directory of part files.

Semantics follow OneFlow 0.9 (``flow.nn.OFRecordReader``): parts are split among ranks
in contiguous balanced ranges (an error when there are fewer parts than ranks);
``random_shuffle`` is a shuffle buffer of ``shuffle_buffer_size`` records;
``shuffle_after_epoch`` reshuffles the global part list before every epoch after the
first (seeded by the epoch, the same on every rank, so ranks stay disjoint). OneFlow's
stream is endless with full batches (``epochs=None``, the default here too); with
``epochs=N`` the stream ends and the last batch may be partial (``drop_last`` to drop
it), and ``len()`` counts batches. Exact random streams of OneFlow's C++ are not
reproduced (the semantics are).

Bad input: a broken frame (length <= 0, a tail cut off) or a record that does not parse
is an error naming the part file, byte offset and record index; with ``max_errors=N``
each is counted and reported, the bad record (or the rest of a broken part) skipped.
"""
from __future__ import annotations

import mmap
import os
import warnings
from typing import Iterator

import numpy as np

from recordkit.errors import ErrorBudget, FormatError, RecordkitWarning
from recordkit.formats.ofrecord import codec
from recordkit.formats.ofrecord.dataset import load_index, part_paths

ONEFLOW_DATASET_SEED = 524287  # OneFlow's kOneflowDatasetSeed for the per-epoch part shuffle


def balanced_split(n: int, parts: int, index: int) -> range:
    """OneFlow's BalancedSplitter: contiguous ranges, the first n % parts get one extra."""
    base, extra = divmod(n, parts)
    start = index * base + min(index, extra)
    return range(start, start + base + (1 if index < extra else 0))


class OFRecordReader:
    def __init__(self, ofrecord_dir, batch_size: int = 1, data_part_num: int | None = None,
                 part_name_prefix: str = "part-", part_name_suffix_length: int = -1, random_shuffle: bool = False,
                 shuffle_buffer_size: int = 1024, shuffle_after_epoch: bool = False, random_seed: int | None = None,
                 *, rank: int | None = None, world_size: int | None = None, epochs: int | None = None,
                 drop_last: bool = False, max_errors: int = 0, index_sidecar: bool = False):
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.paths = part_paths(ofrecord_dir, data_part_num, part_name_prefix, part_name_suffix_length)
        if rank is None and world_size is None:
            from recordkit.engine.source import _torch_distributed_partition
            world_size, rank = _torch_distributed_partition()
        self.world_size = 1 if world_size is None else int(world_size)
        self.rank = 0 if rank is None else int(rank)
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} outside 0..{self.world_size - 1}")
        if self.world_size > len(self.paths):
            raise ValueError(f"{len(self.paths)} part file(s) for {self.world_size} ranks: every rank needs at least "
                             f"one part (re-shard with `recordkit reshard DIR OUT --parts N`)")
        self.batch_size = int(batch_size)
        self.random_shuffle = bool(random_shuffle)
        self.shuffle_buffer_size = max(1, int(shuffle_buffer_size))
        self.shuffle_after_epoch = bool(shuffle_after_epoch)
        self.seed = random_seed
        self.epochs = epochs
        self.drop_last = bool(drop_last)
        self.budget = ErrorBudget(max_errors, warn=lambda text: warnings.warn(text, RecordkitWarning, stacklevel=4))
        self._indexes = {p: load_index(p, write=index_sidecar) for p in self.paths}

    # -- which parts, in which order ---------------------------------------------------------------
    def parts_for_epoch(self, epoch: int) -> list[str]:
        order = list(self.paths)
        if self.shuffle_after_epoch and epoch > 0:
            perm = np.random.default_rng(ONEFLOW_DATASET_SEED + epoch).permutation(len(order))
            order = [order[i] for i in perm]
        return [order[i] for i in balanced_split(len(order), self.world_size, self.rank)]

    def records_per_epoch(self) -> int:
        """Records this rank reads per epoch (the part split changes with shuffle_after_epoch; the
        count is that of epoch 0)."""
        return sum(len(self._indexes[p]) for p in self.parts_for_epoch(0))

    def __len__(self) -> int:
        n = self.records_per_epoch() * (self.epochs or 1)
        return n // self.batch_size if (self.drop_last or self.epochs is None) else -(-n // self.batch_size)

    # -- records ------------------------------------------------------------------------------------
    def _part_records(self, path: str) -> Iterator[dict]:
        index = self._indexes[path]
        if index.size == 0:
            return
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            for i, (off, n) in enumerate(zip(index.offsets.tolist(), index.lengths.tolist())):
                try:
                    yield codec.decode(mm[off:off + n], path=path, offset=off - 8, index=i)
                except FormatError as e:
                    self.budget.charge(e, consequence="record skipped")
        err = index.error()
        if err is not None:
            self.budget.charge(err, consequence="rest of the part skipped")

    def records(self) -> Iterator[dict]:
        """Records in stream order (shuffled through the buffer when random_shuffle)."""
        stream = self._stream()
        if not self.random_shuffle:
            yield from stream
            return
        rng = np.random.default_rng(self.seed)
        buffer = []
        for rec in stream:
            if len(buffer) < self.shuffle_buffer_size:
                buffer.append(rec)
                continue
            j = int(rng.integers(len(buffer)))
            buffer[j], rec = rec, buffer[j]
            yield rec
        order = rng.permutation(len(buffer))  # the stream ended (finite epochs): drain at random
        for j in order:
            yield buffer[j]

    def _stream(self) -> Iterator[dict]:
        epoch = 0
        while self.epochs is None or epoch < self.epochs:
            produced = False
            for path in self.parts_for_epoch(epoch):
                for rec in self._part_records(path):
                    produced = True
                    yield rec
            if not produced:
                return  # nothing readable: an endless stream would spin
            epoch += 1

    def __iter__(self) -> Iterator[list]:
        """Batches of ``batch_size`` records (lists of ``{name: Feature}``)."""
        batch = []
        for rec in self.records():
            batch.append(rec)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last and self.epochs is not None:
            yield batch
