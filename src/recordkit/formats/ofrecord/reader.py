"""OFRecordReader: OneFlow's reader parameters over a directory of part files.

Semantics follow OneFlow 0.9 (``flow.nn.OFRecordReader``): parts are split among ranks
in contiguous balanced ranges. With more ranks than parts (where OneFlow refuses), the
parts' record indexes (sidecar or one scan of the length prefixes) let the ranks split
the data set at record boundaries instead: rank r reads the r-th of ``world_size``
contiguous runs of records (taken across part boundaries, in epoch part order), so the
shares differ by at most one record and no data is rewritten;
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

from typing import TYPE_CHECKING, Iterator

import numpy as np

from recordkit.errors import ErrorBudget, FormatError, warn
from recordkit.formats.closing import ClosingReader
from recordkit.formats.ofrecord import codec
from recordkit.formats.ofrecord.blocks import Buffers, cut, part_runs, read_ahead
from recordkit.formats.ofrecord.dataset import load_index, part_paths
from recordkit.storage import open_source

if TYPE_CHECKING:
    import os

ONEFLOW_DATASET_SEED = 524287  # OneFlow's kOneflowDatasetSeed for the per-epoch part shuffle


def balanced_split(n: int, parts: int, index: int) -> range:
    """OneFlow's BalancedSplitter: contiguous ranges, the first n % parts get one extra."""
    base, extra = divmod(n, parts)
    start = index * base + min(index, extra)
    return range(start, start + base + (1 if index < extra else 0))


def _fingerprint(path: str, storage: dict) -> tuple:
    source = open_source(path, **storage)
    try:
        return tuple(source.fingerprint)
    finally:
        source.close()


class OFRecordReader(ClosingReader):
    def __init__(self, ofrecord_dir: str | os.PathLike[str], batch_size: int = 1, data_part_num: int | None = None,
                 part_name_prefix: str = "part-", part_name_suffix_length: int = -1, random_shuffle: bool = False,
                 shuffle_buffer_size: int = 1024, shuffle_after_epoch: bool = False, random_seed: int | None = None,
                 *, rank: int | None = None, world_size: int | None = None, epochs: int | None = None,
                 drop_last: bool = False, max_errors: int = 0, index_sidecar: bool = False,
                 storage_options: dict | None = None, cache_dir: str | None = None) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.paths = part_paths(ofrecord_dir, data_part_num, part_name_prefix, part_name_suffix_length,
                                storage_options=storage_options)
        self._storage = dict(storage_options=storage_options, cache_dir=cache_dir)
        if rank is None and world_size is None:
            from recordkit.engine.environment import distributed_partition
            world_size, rank = distributed_partition()
        self.world_size = 1 if world_size is None else int(world_size)
        self.rank = 0 if rank is None else int(rank)
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} outside 0..{self.world_size - 1}")
        self.batch_size = int(batch_size)
        self.random_shuffle = bool(random_shuffle)
        self.shuffle_buffer_size = max(1, int(shuffle_buffer_size))
        self.shuffle_after_epoch = bool(shuffle_after_epoch)
        self.seed = random_seed
        self.epochs = epochs
        self.drop_last = bool(drop_last)
        self.budget = ErrorBudget(max_errors, warn=warn)
        self.index_sidecar = bool(index_sidecar)
        self._indexes: dict = {}
        self._opened = {p: _fingerprint(p, self._storage) for p in self.paths}  # parts are read as they are now
        # OneFlow splits whole parts among ranks; with fewer parts than ranks the split is by records
        self.split_records = self.world_size > len(self.paths)
        if self.split_records:
            total = sum(len(self._index(p)) for p in self.paths)
            if total < self.world_size:
                raise ValueError(f"{total} record(s) in {len(self.paths)} part file(s) for {self.world_size} ranks: "
                                 f"every rank needs at least one record")


    def _index(self, path: str, scan: bool = True):
        """A part's index, loaded when first needed (``len()``, a split by records); a part read
        whole needs none: its frames are found while it is read (``blocks``). None when ``scan``
        is False and no index is at hand."""
        index = self._indexes.get(path)
        if index is None:
            index = load_index(path, write=self.index_sidecar, scan=scan, **self._storage)
            if index is not None:
                self._indexes[path] = index
        return index

    # -- which parts, in which order ---------------------------------------------------------------
    def _part_order(self, epoch: int) -> list[str]:
        order = list(self.paths)
        if self.shuffle_after_epoch and epoch > 0:
            perm = np.random.default_rng(ONEFLOW_DATASET_SEED + epoch).permutation(len(order))
            order = [order[i] for i in perm]
        return order

    def parts_for_epoch(self, epoch: int) -> list[str]:
        """The part files this rank reads (some of them only in part when ``split_records``)."""
        return list(dict.fromkeys(path for path, _, _ in self.shares_for_epoch(epoch)))

    def shares_for_epoch(self, epoch: int) -> list[tuple[str, int, int]]:
        """This rank's share of epoch ``epoch`` as ``(part path, first record, end record)`` runs.

        Parts >= ranks: OneFlow's split, whole parts (a contiguous balanced range of the epoch's part
        order). Parts < ranks: the records of the epoch's part order cut into ``world_size``
        contiguous runs of ``N // world_size`` or one more records; a run may start or end inside a
        part and span several. Every rank computes the same order, so the shares are disjoint and
        cover the epoch exactly once.
        """
        return [(p, lo, len(self._index(p)) if hi is None else hi) for p, lo, hi in self._shares(epoch)]

    def _shares(self, epoch: int) -> list[tuple]:
        """``shares_for_epoch`` with ``None`` as the end of a part read whole (its index not needed)."""
        order = self._part_order(epoch)
        if not self.split_records:
            return [(p, 0, None) for p in (order[i] for i in balanced_split(len(order), self.world_size, self.rank))]
        counts = [len(self._index(p)) for p in order]
        total = sum(counts)
        mine = balanced_split(total, self.world_size, self.rank)
        last = self.rank == self.world_size - 1
        runs, first = [], 0
        for path, n in zip(order, counts):
            lo, hi = max(mine.start, first), min(mine.stop, first + n)
            if lo < hi:
                runs.append((path, lo - first, hi - first))
            elif n == 0 and (mine.start <= first < mine.stop or (first == total and last)):
                runs.append((path, 0, 0))  # no intact record: kept so that its framing problem is reported once
            first += n
        return runs

    def records_per_epoch(self) -> int:
        """Records this rank reads per epoch (the part split changes with shuffle_after_epoch; the
        count is that of epoch 0)."""
        return sum(hi - lo for _, lo, hi in self.shares_for_epoch(0))

    def __len__(self) -> int:
        n = self.records_per_epoch() * (self.epochs or 1)
        return n // self.batch_size if (self.drop_last or self.epochs is None) else -(-n // self.batch_size)

    READ_BLOCK = 8 << 20  # bytes per pread (about: a block holds whole frames)

    # -- runs, frames and records --------------------------------------------------------------------
    def _produce(self) -> Iterator[tuple]:
        """The stream's items in order (run on the reading thread): ``("run", Run)`` per block of
        frames, ``("error", FormatError)`` where a part's framing breaks (``blocks.part_runs``)."""
        epoch = 0
        buffers = Buffers()
        while self.epochs is None or epoch < self.epochs:
            produced = False
            for path, first, end in self._shares(epoch):
                index = self._index(path, scan=end is not None)  # None: scanned while read
                if end is None and index is not None and index.size != self._opened[path][0]:
                    index = None  # an index of the part as it is now, not as it was opened: read the snapshot
                for item in part_runs(path, first, end, index, write_index=self.index_sidecar,
                                      storage=self._storage, block_size=self.READ_BLOCK,
                                      opened=self._opened[path], buffers=buffers):
                    produced = produced or (item[0] == "run" and len(item[1]) > 0)
                    yield item
            if not produced:
                return  # nothing readable: an endless stream would spin
            epoch += 1

    def _runs(self) -> Iterator:
        """Runs of frames in stream order, read one block ahead on a second thread; framing
        problems are charged here, where the stream reaches them."""
        for kind, item in read_ahead(self._produce()):
            if kind == "error":
                self.budget.charge(item, consequence="rest of the part skipped")
            else:
                yield item

    def _stream(self) -> Iterator[tuple]:
        for run in self._runs():
            yield from run.frames()

    def frames(self) -> Iterator[tuple]:
        """Frames in stream order (through the shuffle buffer when random_shuffle)."""
        stream = self._stream()
        if not self.random_shuffle:
            yield from stream
            return
        rng = np.random.default_rng(self.seed)
        buffer = []
        for item in stream:
            if len(buffer) < self.shuffle_buffer_size:
                buffer.append(item)
                continue
            j = int(rng.integers(len(buffer)))
            buffer[j], item = item, buffer[j]
            yield item
        for j in rng.permutation(len(buffer)):  # the stream ended (finite epochs): drain at random
            yield buffer[j]

    def records(self) -> Iterator[dict]:
        """Decoded records ``{name: Feature}`` in stream order; unparseable ones count as errors."""
        for payload, (path, i, off) in self.frames():
            try:
                yield codec.decode(payload, path=path, offset=off, index=i)
            except FormatError as e:
                self.budget.charge(e, consequence="record skipped")

    def _batched(self, items) -> Iterator[list]:
        batch = []
        for item in items:
            batch.append(item)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last and self.epochs is not None:
            yield batch

    def __iter__(self) -> Iterator[list]:
        """Batches of ``batch_size`` records (lists of ``{name: Feature}``)."""
        return self._batched(self.records())

    def batches(self, features: dict) -> Iterator[dict]:
        """Batches decoded straight from the wire into NumPy arrays, OneFlow's raw-decoder way.

        ``features``: {name: (shape, dtype)} or {name: {"shape", "dtype", "truncate",
        "dim1_varying_length"}}; each batch is {name: array (n, *shape)}. The compiled decoder
        reads the packed lists without building protobuf objects, straight from the blocks read
        (see ``batch.decode_runs``; through the shuffle buffer, ``batch.decode_frames``).
        """
        from recordkit.formats.ofrecord.batch import decode_frames, decode_runs, normalize_spec
        spec = normalize_spec(features)
        if self.random_shuffle:
            for frames in self._batched(self.frames()):
                yield decode_frames(frames, spec, self.budget)
            return
        for runs in self.batch_runs():
            yield decode_runs(runs, spec, self.budget)

    def batch_runs(self) -> Iterator[list]:
        """Batches as lists of ``blocks.Run`` (stream order, no shuffle): the frames stay in the
        blocks read, for decoders that read them there."""
        return cut(self._runs(), self.batch_size, not self.drop_last and self.epochs is not None)

    def close(self) -> None:
        pass  # parts are opened per read
