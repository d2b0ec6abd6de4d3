"""PyTorch integration: minibatches as dicts of tensors, split across DataLoader workers and ranks.

``MinibatchDataset`` is a ``torch.utils.data.IterableDataset`` whose items are whole
minibatches (the engine already batches), so use it with ``batch_size=None``::

    from torch.utils.data import DataLoader
    from recordkit.integrations.torch import MinibatchDataset, StateTracker, minibatch_collate

    def make_source():                      # a module-level function (or functools.partial):
        reader = CTFReader("train.ctf", [StreamSpec("x", "dense", 3, "x"),      # each worker
                                         StreamSpec("y", "sparse", 5, "y")])    # builds its own
        return MinibatchSource(reader, randomize=True, max_sweeps=1)

    ds = MinibatchDataset(make_source, minibatch_size=256)
    loader = DataLoader(ds, batch_size=None, num_workers=2,
                        collate_fn=minibatch_collate)   # optional: skips default_convert's walk
    tracker = StateTracker()
    for item in loader:
        tracker.update(item)                # remembers item["__state__"] of its worker
        x, mask, y = item["x"], item["x_mask"], item["y"]   # y: torch.sparse_csr_tensor
        ...
        save({"data": tracker.state_dict(), ...})          # JSON-able

    # later: continue exactly with the minibatches that would have come next
    ds = MinibatchDataset(make_source, minibatch_size=256, resume_state=saved["data"])

Splitting. In every iteration each DataLoader worker of every ``torch.distributed``
rank reads its own partition of every sweep: ``world_size * num_workers`` partitions,
index ``rank * num_workers + worker_id``. The engine cuts each sweep's order into
that many contiguous, sample-balanced runs, so every sequence of a sweep is read by
exactly one worker of one rank. ``num_data_partitions`` / ``partition_index`` given to
the dataset replace the world size and rank (for launchers other than
torch.distributed); the DataLoader workers still subdivide them.

Items. ``{"keys": int64 (S,), "lengths": int64 (S,), "end_of_sweep": bool,
"sweep": int, "sweeps": int64 (S,), name: ..., "__state__": dict}`` (``sweep``: the sweep
the minibatch started in; ``sweeps``: each sequence's, as a minibatch may run on into
the next sweep) where a dense stream ``name`` gives a
float tensor (S, T, dim) zero padded plus ``name + "_mask"`` (S, T) bool and
``name + "_lengths"`` (S,) int64, and a sparse stream gives a
``torch.sparse_csr_tensor`` of shape (samples, dim) whose rows are the samples,
sequence after sequence, plus ``name + "_offsets"`` (S + 1,) int64, the row range of
each sequence; a bytes stream gives a list of ``bytes``, one per sequence (an
``images=`` stage of the source turns it into a float or uint8 tensor). Arrays are shared with the engine's NumPy output (``torch.from_numpy``,
no copy). Keys are the engine's uint64 keys viewed as int64 (``.numpy().view("uint64")``
gives them back). A truncated-BPTT source's ``Minibatch.extra`` comes as ``"extra"``.

Resume. ``item["__state__"]`` is the state of the worker's source right after it
produced the item, with the worker's partition. The states of the last item the
training loop consumed from each worker (``StateTracker``, or
``MinibatchDataset.state_dict_from``) are the data's checkpoint, as
``{partition_index: state}``; a dataset built with it as ``resume_state`` restores
each worker's source, so each worker continues with exactly the minibatches it would
have produced next; a worker with no state starts from its beginning (the loop had
taken nothing from it). Minibatches the DataLoader had prefetched but the loop had
not taken are produced again. The checkpoint needs the same data and randomization
settings; the number of partitions (world size x workers) may change: resumed on another
number, what no old partition delivered of the sweep(s) they were in is delivered exactly once
over the new partitions, then ordinary sweeps of the new split follow (``engine/elastic.py``).
An elastic resume needs the states of all the old partitions (under DDP: the union of every
rank's, e.g. gathered with ``torch.distributed.all_gather_object``); ``resume_state`` also takes a
``StatefulDataLoader.state_dict()`` (or a list of them, one per rank) and finds the states inside.
Under DDP each rank may resume from its own states or from the union of all ranks'
(the partition indexes are global). DataLoader workers started by spawn or
forkserver have no process group: they use the rank and world size the main process
had when the DataLoader sent them the dataset. Every iteration of the dataset starts from
``resume_state``; for several epochs use one source that runs several sweeps
(``max_sweeps=k`` or None, each sweep with its own randomization; ``end_of_sweep``
and ``sweep`` tell where one ends) rather than re-iterating a one-sweep dataset,
which would see the same order each time.

torchdata. ``MinibatchDataset`` is ``Stateful`` (``state_dict()`` / ``load_state_dict()``), so
``torchdata.stateful_dataloader.StatefulDataLoader(ds, batch_size=None, num_workers=K)`` checkpoints
it itself: the loader calls ``state_dict()`` in each worker after each item the worker yields and
keeps, per worker, the state of the last item the loop took, so ``loader.state_dict()`` resumes
exactly, prefetched items included (they come again, none is skipped). ``StateTracker`` stays the
way for the plain ``DataLoader``; both produce the same ``{partition_index: state}`` checkpoint.

Passing minibatches between processes: a worker packs each item into a slot of its own
shared-memory ring and sends only the slot's number; the main process copies it out once and
sees the same dict of tensors (``integrations/torch_transfer.py``, measured in
benchmarks/torch_loader.py).

Sparse tensors sent from DataLoader workers are rebuilt in the main process by
torch, which warns once that sparse invariant checks are off and that CSR support is
in beta; both are harmless here (the engine builds valid CSR).
"""
from __future__ import annotations

import json
import warnings
from typing import Any, Callable, Iterator, Mapping

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

__all__ = ["MinibatchDataset", "SequenceDataset", "StateTracker", "to_torch", "minibatch_collate", "STATE_KEY"]

STATE_KEY = "__state__"
# 2: the source's checkpoint is one JSON text ("source"), so the DataLoader's default_convert, which
# walks every value of every item (~3.5 us a value), sees one value instead of ~28 (measured: 105 us
# an item, 0.86 -> 1.0x of the direct loop with workers=0). 1 (a nested dict) is still read.
TORCH_STATE_VERSION = 2
_READ_VERSIONS = (1, 2)


def _source_state(state) -> dict:
    """The source's checkpoint inside a worker state (a JSON text since version 2, a dict before)."""
    src = state["source"]
    if isinstance(src, (str, bytes)):
        return json.loads(src)
    return src


def _tensor(a: np.ndarray) -> torch.Tensor:
    """``torch.from_numpy`` without a copy where the array allows it."""
    a = np.asarray(a)
    if a.dtype == np.uint64:
        a = a.view(np.int64)
    if not a.flags.writeable:  # torch warns on read-only arrays; a copy is the safe choice
        a = a.copy()
    return torch.from_numpy(a)


def _csr_tensor(csr) -> torch.Tensor:
    indptr, indices = np.asarray(csr.indptr), np.asarray(csr.indices)
    if indptr.dtype != indices.dtype or indptr.dtype not in (np.int32, np.int64):
        indptr, indices = indptr.astype(np.int64), indices.astype(np.int64)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
        return torch.sparse_csr_tensor(_tensor(indptr), _tensor(indices), _tensor(csr.data),
                                       size=tuple(csr.shape), check_invariants=False)


def to_torch(minibatch) -> dict:
    """One engine ``Minibatch`` as a dict of tensors (the layout is in the module docstring).

    For a plain loop: ``for mb in source.minibatches(256): batch = to_torch(mb)``.
    """
    out: dict[str, Any] = {
        "keys": _tensor(minibatch.keys),
        "lengths": _tensor(np.asarray(minibatch.lengths, dtype=np.int64)),
        "end_of_sweep": bool(minibatch.end_of_sweep),
        "sweep": int(minibatch.sweep),
    }
    if minibatch.sweeps is not None:
        out["sweeps"] = _tensor(np.asarray(minibatch.sweeps, dtype=np.int64))
    for name, sb in minibatch.streams.items():
        if sb.is_bytes:  # no tensor holds them: a list of bytes values, in the sequences' order
            out[name] = sb.data.tolist()
        elif sb.is_sparse:
            out[name] = _csr_tensor(sb.csr)
            out[f"{name}_offsets"] = _tensor(np.asarray(sb.seq_offsets, dtype=np.int64))
        else:
            out[name] = _tensor(sb.data)
            out[f"{name}_mask"] = _tensor(sb.mask)
            out[f"{name}_lengths"] = _tensor(np.asarray(sb.lengths, dtype=np.int64))
    if minibatch.extra:
        out["extra"] = {k: _tensor(v) if isinstance(v, np.ndarray) else v for k, v in minibatch.extra.items()}
    return out


def minibatch_collate(item):
    """``collate_fn`` for ``DataLoader(MinibatchDataset(...), batch_size=None, collate_fn=minibatch_collate)``:
    the item as it is.

    Why: with ``batch_size=None`` the DataLoader's default ``collate_fn`` is ``default_convert``,
    which walks every value of every item to turn NumPy arrays into tensors and copies each dict.
    A ``MinibatchDataset`` item is already batched and already tensors, so that walk finds nothing
    to do, yet it cost 52-63 us an item with ``num_workers=0`` (12-14% of a 1024-sample dense
    minibatch; benchmarks/torch_loader.py). The item that arrives is the same dict either way
    (from workers too: there the walk runs in the worker, on the packed item, and is cheap). A
    module-level function, so spawn/forkserver workers can unpickle it."""
    return item


from recordkit.integrations.torch_transfer import _PackedItem  # noqa: E402  (items leaving a worker)


def _distributed() -> tuple[int, int] | None:
    """(world size, rank) of an initialized torch.distributed, else None."""
    dist = getattr(torch, "distributed", None)
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_world_size()), int(dist.get_rank())
    except Exception:  # pragma: no cover - a half-torn-down process group
        pass
    return None


def _is_state(value) -> bool:
    return isinstance(value, Mapping) and "recordkit_torch_state" in value


def _is_loader_state(value) -> bool:
    """A ``StatefulDataLoader.state_dict()`` (its workers' dataset states hold ours)."""
    return isinstance(value, Mapping) and ("_snapshot" in value or "dataset_state" in value)


def _nested_states(value):
    """The worker states inside a container that holds them deeper, such as the ``state_dict()``
    of torchdata's ``StatefulDataLoader`` (each worker's ``dataset_state``)."""
    if _is_state(value):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _nested_states(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _nested_states(v)


def _normalize_states(states) -> dict[int, dict]:
    """``{partition_index: worker state}`` from a mapping or an iterable of states or items, or
    from a ``StatefulDataLoader.state_dict()``. The states of a job resized since (another number
    of partitions) replace the earlier ones: the last one seen gives the number."""
    if states is None:
        return {}
    if _is_loader_state(states) or (isinstance(states, (list, tuple)) and states
                                     and all(_is_loader_state(v) for v in states)):
        values = list(_nested_states(states))  # StatefulDataLoader state(s): one per rank
    else:
        values = states.values() if isinstance(states, Mapping) else states
    ordered = not isinstance(states, Mapping)  # items in the order taken: the last split wins
    out: dict[int, dict] = {}
    for st in values:
        if isinstance(st, Mapping) and STATE_KEY in st:  # a whole item
            st = st[STATE_KEY]
        if not isinstance(st, Mapping) or st.get("recordkit_torch_state") not in _READ_VERSIONS:
            raise ValueError("not a recordkit MinibatchDataset worker state (an item's '__state__')")
        if out and int(next(iter(out.values()))["num_partitions"]) != int(st["num_partitions"]):
            if ordered:
                out = {}  # a resized job: its states supersede the old job's
            else:
                counts = sorted({int(st["num_partitions"]), int(next(iter(out.values()))["num_partitions"])})
                raise ValueError(f"resume_state mixes states of jobs with {counts} partitions")
        out[int(st["partition_index"])] = dict(st)
    return out


def _job_states(resume: dict) -> list | None:
    """The sources' states of all the partitions of the job ``resume`` was saved from, in partition
    order, None for a partition that had taken nothing (or None when there is nothing to resume)."""
    if not resume:
        return None
    counts = {int(s["num_partitions"]) for s in resume.values()}
    if len(counts) != 1:
        raise ValueError(f"resume_state mixes states of jobs with {sorted(counts)} partitions")
    (n_old,) = counts
    if any(not 0 <= k < n_old for k in resume):
        raise ValueError(f"resume_state has a partition index outside [0, {n_old})")
    return [_source_state(resume[k]) if k in resume else None for k in range(n_old)]


class StateTracker:
    """Keeps the last ``__state__`` of each worker seen by the training loop.

    ``update(item)`` after taking an item (returns the item); ``state_dict()`` is the
    JSON-able checkpoint to pass back as ``resume_state``; ``load_state_dict`` restores
    the tracker itself, so a resumed run's tracker starts from the states it resumed from.
    """

    def __init__(self, states=None):
        self.states: dict[int, dict] = _normalize_states(states)

    def update(self, item: Mapping) -> Mapping:
        st = item[STATE_KEY]
        if self.states and int(next(iter(self.states.values()))["num_partitions"]) != int(st["num_partitions"]):
            self.states = {}  # the first item of a resized job: the old job's states are superseded
        self.states[int(st["partition_index"])] = st
        return item

    def state_dict(self) -> dict:
        return MinibatchDataset.state_dict_from(self.states)

    def load_state_dict(self, states) -> None:
        self.states = _normalize_states(states)


class MinibatchDataset(IterableDataset):
    """A ``MinibatchSource`` per DataLoader worker, yielding whole minibatches as tensors.

    source_factory: a zero-argument callable returning a fresh ``MinibatchSource``; it is
    called once per iteration in each worker (sources and readers are not picklable, so
    each worker builds its own). With DataLoader workers started by ``spawn`` or
    ``forkserver`` it must be picklable (a module-level function or a
    ``functools.partial`` of one, not a lambda). minibatch_size: samples per minibatch.
    num_data_partitions / partition_index: replace torch.distributed's world size / rank.
    resume_state: ``{partition_index: state}`` from ``state_dict_from`` or
    ``StateTracker.state_dict`` (JSON round-trips, with string keys, are accepted).
    include_state: add ``"__state__"`` to each item (small; needed for resuming).

    Use with ``DataLoader(ds, batch_size=None, ...)``: the dataset already batches.
    """

    def __init__(self, source_factory: Callable[[], Any], minibatch_size: int, *,
                 num_data_partitions: int | None = None, partition_index: int | None = None,
                 resume_state=None, include_state: bool = True):
        super().__init__()
        if not callable(source_factory):
            raise TypeError("source_factory must be a zero-argument callable returning a MinibatchSource")
        if int(minibatch_size) <= 0:
            raise ValueError("minibatch_size must be > 0")
        if (num_data_partitions is None) != (partition_index is None):
            raise ValueError("give both num_data_partitions and partition_index, or neither")
        if num_data_partitions is not None and not 0 <= int(partition_index) < int(num_data_partitions):
            raise ValueError(f"partition_index must be in [0, num_data_partitions): "
                             f"got {partition_index} of {num_data_partitions}")
        self.source_factory = source_factory
        self.minibatch_size = int(minibatch_size)
        self.num_data_partitions = None if num_data_partitions is None else int(num_data_partitions)
        self.partition_index = None if partition_index is None else int(partition_index)
        self.include_state = bool(include_state)
        self.resume_state = _normalize_states(resume_state)
        # torch.distributed as seen where the dataset was made or last pickled: DataLoader workers
        # started by spawn/forkserver get the dataset pickled from the main process but no process group
        self._dist_seen = _distributed()
        self._live = None  # the state of the minibatch last yielded by the iteration in progress (state_dict)

    # -- checkpoints -----------------------------------------------------------------------------
    @staticmethod
    def state_dict_from(states) -> dict:
        """The data checkpoint ``{partition_index: state}`` from the last ``__state__`` per worker.

        ``states``: a dict whose values are items' ``__state__`` dicts (e.g. keyed by
        worker), or an iterable of them or of whole items in the order they were taken
        (the last one per partition wins). The result is JSON-able (JSON turns the keys
        into strings; ``resume_state`` accepts both).
        """
        return {k: v for k, v in sorted(_normalize_states(states).items())}

    def load_state_dict(self, states) -> None:
        """Set ``resume_state``: the next iteration continues from these states.

        Accepts what ``state_dict()`` returns (torchdata's ``StatefulDataLoader`` passes each
        worker's own back to it), ``StateTracker.state_dict()`` and their JSON round-trips."""
        self.resume_state = _normalize_states(states)
        self._live = None

    def state_dict(self) -> dict:
        """The state of the iteration in progress in this process: ``{partition_index: state}`` of
        the minibatch last yielded here (before the first: the state this iteration resumed from).

        This is torchdata's ``Stateful`` protocol for an ``IterableDataset``: ``StatefulDataLoader``
        calls it in each worker right after each item the worker yields, keeps it with the item,
        and its own ``state_dict()`` holds, per worker, the state of the last item the training loop
        took, so ``StatefulDataLoader.load_state_dict`` resumes exactly, without replaying the
        minibatches it had prefetched. In the main process (no workers) it is the state after the
        last item taken. JSON-able (``load_state_dict`` accepts string keys)."""
        states = dict(self.resume_state)
        live = getattr(self, "_live", None)
        if live is not None:
            if any(int(v["num_partitions"]) != int(live["num_partitions"]) for v in states.values()):
                states = {}  # resumed on another number of partitions: the old job's states are superseded
            states[int(live["partition_index"])] = live
        if get_worker_info() is not None:  # a worker answers for its own partition only
            mine = self.partition()["partition_index"]
            states = {k: v for k, v in states.items() if k == mine}
        return self.state_dict_from(states)

    # -- partitions ------------------------------------------------------------------------------
    def __getstate__(self):
        state = self.__dict__.copy()
        seen = _distributed()  # pickled in the main process when a DataLoader starts its workers
        if seen is not None:
            state["_dist_seen"] = seen
        return state

    def _rank_world(self) -> tuple[int, int]:
        if self.num_data_partitions is not None:
            return self.num_data_partitions, self.partition_index
        live = _distributed()
        if live is not None:
            return live
        # a DataLoader worker started by spawn/forkserver has no process group of its own
        if get_worker_info() is not None and self._dist_seen is not None:
            return self._dist_seen
        return 1, 0

    def partition(self) -> dict:
        """This process's (worker's) share: worker id and count, rank and world size, partition."""
        world, rank = self._rank_world()
        info = get_worker_info()
        wid, nw = (0, 1) if info is None else (int(info.id), int(info.num_workers))
        return {"worker_id": wid, "num_workers": nw, "rank": rank, "world_size": world,
                "partition_index": rank * nw + wid, "num_partitions": world * nw}

    # -- iteration -------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[dict]:
        self._live = None  # a new iteration: state_dict() is the resume state until the first item
        return self._iterate()

    def _iterate(self) -> Iterator[dict]:
        part = self.partition()
        n, i = part["num_partitions"], part["partition_index"]
        resumed = _job_states(self.resume_state)
        source = self.source_factory()
        in_worker = get_worker_info() is not None
        dumps = json.JSONEncoder(separators=(",", ":")).encode
        try:
            if resumed is not None:
                # the list of every old partition's state: the exact resume of this partition's own
                # when the split is the same, an elastic one (engine/elastic.py) when it is not
                source.restore_from_checkpoint(resumed, num_data_partitions=n, partition_index=i)
            while True:
                mb = source.next_minibatch(self.minibatch_size, num_data_partitions=n, partition_index=i)
                if mb is None:
                    return
                item = to_torch(mb)
                state = {"recordkit_torch_state": TORCH_STATE_VERSION, **part,
                         "source": dumps(source.get_checkpoint_state())}
                self._live = state  # what state_dict() reports while this item is out
                if self.include_state:
                    item[STATE_KEY] = state
                # to the main process as one buffer instead of a shared-memory segment per tensor
                yield _PackedItem(item) if in_worker else item
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()



class SequenceDataset(torch.utils.data.Dataset):
    """A map-style ``Dataset`` of single sequences over a ``RandomAccessDataSource``: ``ds[i]`` is
    sequence ``i`` as a dict of tensors (``"key"`` int64 — the uint64 key viewed as int64 — and
    the arrays of ``recordkit.integrations.random_access.sequence_record``).

    For samplers and shuffling done by torch (``DataLoader(ds, shuffle=True, ...)``) where the
    engine's CNTK-style chunk randomization is not wanted. Sequences differ in length, so give
    the DataLoader a ``collate_fn`` that pads (or ``batch_size=None``). ``source``: a
    ``RandomAccessDataSource``, or what builds one (a path plus ``streams``/``format``/options,
    or a reader factory); it pickles as its recipe, so DataLoader workers reopen the data
    themselves.
    """

    def __init__(self, source, streams=None, **options):
        from recordkit.integrations.random_access import RandomAccessDataSource
        self.source = source if isinstance(source, RandomAccessDataSource) else \
            RandomAccessDataSource(source, streams, **options)

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, index) -> dict:
        return {k: _tensor(v) for k, v in self.source[index].items()}

    def __repr__(self) -> str:
        return f"SequenceDataset({self.source!r})"
