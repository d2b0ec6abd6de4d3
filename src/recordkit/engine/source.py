"""MinibatchSource: sweeps over any deserializer, cut into minibatches counted in samples.

The model is CNTK's reader: an endless repetition of sweeps, each in the order a
randomizer gives (``randomizer.py``); minibatches take whole sequences until the
requested number of samples is reached (at least one sequence each); the data may be
split among workers; the position can be saved and restored.

Positions. Every sequence of a sweep has a global sample position (sweep index x
sweep size + the samples before it in the sweep order), counted with the
deserializer's *index* estimate of each sequence's length, so that every worker
computes the same positions before loading anything. ``max_samples`` and worker
shares are defined on these positions; the minibatch size is counted with the loaded
sequences' real lengths (the ``defines_mb_size`` stream, else the longest stream).

Workers. Unlike CNTK 2.7, which deals out whole chunks (so a worker goes empty when
there are fewer chunks than workers), each sweep's order is cut into ``n`` contiguous
runs of about equal samples: every sequence goes to exactly one worker per sweep,
and with one worker the order is exactly CNTK's.

Memory. Only chunks that the rest of this worker's share still needs soon are kept; the
next chunks in order of first use are loaded on background threads (parsing
releases the GIL) while the caller trains. ``max_memory`` bounds the chunks held at
once (window + prefetch): the window is reduced to fit, from the index's decoded size
estimates (``engine/memory.py``), and the choice is reported (``source.memory``, and a
warning when the window was reduced). The default bound is a quarter of the memory
available, so a randomized read never silently grows with the data set.

Copies. A minibatch is copied out of its chunks, except a run of consecutive sequences of one
chunk whose arrays are the chunk's alone (``ChunkData.lendable``: OFRecord's), which is handed out
as views of the chunk's columns (``_gather.lend_run``), the copy's bytes without the copy. A chunk
lent from is loaded again before a new sweep, elastic group, restore or split can deliver its
sequences again, so what a caller writes into a minibatch never reaches a later one.
"""
from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from recordkit.engine import _gather
from recordkit.engine.chunk import ChunkData
from recordkit.engine.checkpoint import ReadPosition
from recordkit.engine.deserializer import Deserializer
from recordkit.engine.chunk_cache import ChunkCache
from recordkit.engine.environment import distributed_partition, loader_workers
from recordkit.engine.minibatch import (Minibatch, chunk_columns, counted, lend_from_table, pack_from_chunks,
                                        pack_from_table)
from recordkit.engine.randomizer import BlockRandomizer, NoRandomizer
from recordkit.engine.resume import Checkpointing
from recordkit.engine.sweep import (LengthTable, Sweep, build_sweep, cumulative, index_length_table, order_positions,
                                    reach, share_sweep, wanted_ahead)

if TYPE_CHECKING:  # annotations only: the elastic planner is imported where a resume needs it
    from recordkit.engine.elastic import ChunkPlan, ElasticPlan, Run
    from recordkit.engine.image_streams import ImageStreams

INFINITELY_REPEAT = None
_NO_SIZE_LIMIT = 1 << 62  # the sample budget of a pick where only the number of sequences counts


def _joined(parts: list) -> np.ndarray:
    """The runs of one pick as one array (most picks are one run: no copy then)."""
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


class MinibatchSource(Checkpointing):
    """Minibatches from a deserializer (``CTFReader``, ``CBFReader``, a composite, ...).

    randomize: block randomization (CNTK's) or file order. window: randomization
    window in chunks, or with ``sample_based_window`` in samples; None = the whole
    data set. seed: sweep k uses seed + k. max_samples / max_sweeps: where the data
    ends (None = repeat forever). epoch_size: CNTK's epochs of that many samples (a
    minibatch never crosses an epoch end and reports ``end_of_epoch``; the next epoch
    starts at the first sequence at or after the boundary). frame_mode: every sequence must be one sample.
    truncation_length: truncated BPTT (see ``next_minibatch``). num_data_partitions /
    partition_index: the default worker split (else torch.distributed's, else 1/0).
    trace_level: CNTK's traceLevel for what the engine itself reports: 2 prints a line
    (``RecordkitInfo``) as each sweep starts (its order, sequences, samples and this worker's
    share), as CNTK's randomizer does with ``verbosity``; None: ``recordkit.errors``' default.
    The deserializers report their own chunks and warnings at their own ``trace_level``.
    max_memory: bound on the chunks held at once (window + prefetch), bytes or a size such
    as "512MB"; "auto" (default): a quarter of the memory available now (shared by the workers
    when built in a PyTorch DataLoader worker); None: unbounded (CNTK's
    behaviour; a warning when the estimate exceeds the memory available). When the requested
    window does not fit, the largest one that does is used (a warning says so; ``memory`` holds
    the choice). A window that fits is never changed, so the order is CNTK's for that window.
    partition_by: how ``num_data_partitions``/``partition_index`` given here split the data:
    "samples" (equal samples of every sweep), "chunks" (whole chunks per partition, a
    ``ChunkPartition``), or "auto" (default): chunks for a randomized read of remote files, so N
    readers fetch each chunk once in all, else samples (``engine/chunk_partition.py``).
    images: {bytes stream name: ``recordkit.images.ImageStage``}: each minibatch's encoded images of
    that stream decoded, cropped and normalized by the stage into one array (its random state is in
    the checkpoint: ``engine/image_streams.py``).
    """

    def __init__(self, deserializer: Deserializer, *, randomize: bool = True, window: int | None = None,
                 sample_based_window: bool = False, seed: int = 0, max_samples: int | None = None,
                 max_sweeps: int | None = None, epoch_size: int | None = None, frame_mode: bool = False,
                 truncation_length: int = 0,
                 num_data_partitions: int | None = None, partition_index: int | None = None,
                 prefetch_chunks: int = 2, threads: int = 2, trace_level: int | None = None,
                 max_memory: int | str | None = "auto", partition_by: str = "auto",
                 images: dict | None = None) -> None:
        from recordkit.engine.chunk_partition import ChunkPartition, in_chunks
        from recordkit.errors import trace_level as _trace_level
        self.trace_level = _trace_level(trace_level)
        self._chunk_split = None  # (n, i) when this source reads whole-chunk partition i of n
        if in_chunks(deserializer, partition_by, randomize, num_data_partitions):
            assert num_data_partitions is not None  # in_chunks is true only with several partitions
            i = 0 if partition_index is None else int(partition_index)
            deserializer = ChunkPartition(deserializer, int(num_data_partitions), i)
            self._chunk_split = (int(num_data_partitions), i)
            num_data_partitions = partition_index = None
        if max_samples is not None and max_sweeps is not None:
            raise ValueError("max_samples and max_sweeps are mutually exclusive")
        if frame_mode and truncation_length:
            raise ValueError("frame mode and truncated BPTT are mutually exclusive")
        if truncation_length < 0:
            raise ValueError("truncation_length must be >= 0")
        self.deserializer = deserializer
        self.streams = list(deserializer.streams)
        # the image stages turning bytes streams into batch arrays (None without ``images=``)
        self.image_streams: ImageStreams | None = None
        if images:
            from recordkit.engine.image_streams import ImageStreams
            self.image_streams = ImageStreams(self.streams, images)
        self._chunks = list(deserializer.chunks)
        self._described = {c.id: c.num_sequences for c in self._chunks}
        # in every checkpoint's fingerprint: summed once, not over every chunk at each minibatch's state
        self._described_total = int(sum(self._described.values()))
        planned: dict = {}  # randomizers the memory plan made, with their sweep 0 already shuffled
        self.memory = self._choose_memory(max_memory, bool(randomize), window, bool(sample_based_window), seed,
                                          max(0, int(prefetch_chunks)), max(1, int(threads)), planned)
        window, prefetch_chunks = self.memory.window, self.memory.prefetch
        make = getattr(deserializer, "make_randomizer", None)  # a deserializer with an order of its own (mixture.py)
        if make is not None:
            self.randomizer = make(randomize=bool(randomize), window=window, sample_based=bool(sample_based_window),
                                   seed=int(seed))
        else:
            self.randomizer = planned.get((bool(randomize), window, bool(sample_based_window), int(seed))) or (
                BlockRandomizer(self._chunks, window=window, sample_based=sample_based_window, seed=seed)
                if randomize else NoRandomizer(self._chunks))
        planned.clear()
        self.max_samples = max_samples
        self.max_sweeps = max_sweeps
        if epoch_size is not None and int(epoch_size) <= 0:
            raise ValueError("epoch_size must be positive")
        self.epoch_size = None if epoch_size is None else int(epoch_size)
        self._epoch = 0
        self.frame_mode = bool(frame_mode)
        self.truncation_length = int(truncation_length)
        self._default_partitions = (num_data_partitions, partition_index)
        self._lengths = index_length_table(self.deserializer, self._chunks)
        self.sweep_samples = int(self._lengths.flat.sum())
        if getattr(self.randomizer, "constant_sweeps", None) is not None:  # a mixture: its sweeps are its own
            if self.randomizer.constant_sweeps:
                self.sweep_samples = int(self._order_cum(0)[1][-1])
            elif max_samples is not None or epoch_size is not None:
                from recordkit.errors import UsageError
                raise UsageError("this mixture's sweeps differ in samples (weights or fractional repeats): bound "
                                 "it with max_sweeps, not max_samples or epoch_size (or use whole repeats)")
        if self.sweep_samples == 0 and self._described_total == 0:
            raise ValueError("the data holds no sequences")
        self._partition: tuple[int, int] | None = None
        self._sweep: Sweep | None = None
        self._cursor = 0
        self._exhausted = False
        self.samples_delivered = 0
        self.minibatches_delivered = 0
        self._prefetch_chunks = max(0, int(prefetch_chunks))
        self._cache = ChunkCache(deserializer, self._described, prefetch=self._prefetch_chunks > 0, threads=threads,
                                 on_load=self._on_load, prepare=functools.partial(chunk_columns, specs=self.streams),
                                 nbytes=self._chunk_nbytes, joined=self._joins())
        self._bptt: Any = None  # truncated BPTT slots (engine/bptt.py)
        self._last_size = 1
        self._evict_memo: tuple | None = None  # (sweep, size, cache version, cursor from, cursor to): see _evict
        self._prefetch_memo: tuple | None = None  # (sweep, cache version, cursor above, cursor up to): see _prefetch
        # elastic resume (engine/elastic.py): the job's plan, this partition's run of it, and the
        # group of the run being delivered (None once the ordinary sweeps have begun)
        self._plan: Any = None
        self._run: Any = None
        self._group: int | None = None

    # -- setup -------------------------------------------------------------------------------------
    def _joins(self) -> bool:
        """Whether runs of small chunks are held as one unit each (``ChunkCache(joined=True)``): a
        unit's memory stays held until its last chunk is dropped, which the memory plan does not
        count chunk by chunk, so only where every chunk fits in the bound at once; not with BPTT or
        image stages, which take chunks one at a time (``chunk(cid)``)."""
        choice = self.memory
        fits = choice.max_memory is None or choice.whole_bytes <= choice.max_memory
        return fits and not self.truncation_length and self.image_streams is None

    def _choose_memory(self, max_memory, randomize, window, sample_based, seed, prefetch, threads, cache):
        """Fit the window (and prefetch) to the memory bound; warn where the choice changes what
        was asked for, or where an unbounded plan needs more memory than is available."""
        from recordkit.engine import memory as plan
        from recordkit.errors import RecordkitWarning
        if isinstance(max_memory, str) and max_memory.strip().lower() == "auto":
            # DataLoader workers each build a source: they share the machine's quarter
            bound, frm = plan.machine_memory_bound() // loader_workers(), "machine"
        elif max_memory is None:
            bound, frm = None, "none"
        else:
            bound, frm = plan.parse_size(max_memory), "argument"
        nbytes = plan.chunk_bytes(self.deserializer)
        self._chunk_nbytes = plan.by_id(self._chunks, nbytes)  # what groups small chunks per load task
        choice = plan.choose_window(self._chunks, nbytes, plan.load_bytes(self.deserializer, nbytes),
                                    max_memory=bound, bound_from=frm, randomize=randomize, window=window,
                                    sample_based=sample_based, seed=seed, prefetch=prefetch, threads=threads,
                                    cache=cache, make=getattr(self.deserializer, "make_randomizer", None))
        if choice.capped or not choice.fits:
            warnings.warn(choice.describe(), RecordkitWarning, stacklevel=3)
        elif bound is None and choice.estimated_bytes > plan.available_memory():
            warnings.warn(f"this reader's plan needs about {plan.format_size(choice.estimated_bytes)} of chunks at "
                          f"once ({choice.window_text()} window), more than the "
                          f"{plan.format_size(plan.available_memory())} of memory available; set a smaller "
                          f"randomization window", RecordkitWarning, stacklevel=3)
        return choice

    def resolve_partition(self, num_data_partitions: int | None, partition_index: int | None) -> tuple[int, int]:
        """The (partitions, index) ``next_minibatch`` reads when asked for these."""
        n, i = num_data_partitions, partition_index
        if self._chunk_split is not None:  # already one partition of whole chunks: nothing left to split
            if n is not None and (int(n), 0 if i is None else int(i)) != self._chunk_split:
                from recordkit.errors import UsageError
                raise UsageError(f"this source reads whole-chunk partition {self._chunk_split[1]} of "
                                 f"{self._chunk_split[0]}: it cannot read partition {i} of {n}")
            return 1, 0
        if n is None and i is None:
            n, i = self._default_partitions
        if n is None and i is None:
            n, i = distributed_partition()
        n = 1 if n is None else int(n)
        i = 0 if i is None else int(i)
        if n < 1 or not 0 <= i < n:
            raise ValueError(f"partition_index must be in [0, num_data_partitions): got {i} of {n}")
        return n, i

    def _order_cum(self, index: int):
        """Sweep ``index``'s order and the index estimate of the sample each position starts at."""
        return order_positions(self.randomizer, self._lengths, index)

    def _make_sweep(self, index: int) -> Sweep:
        assert self._partition is not None  # chosen before any sweep is made
        # contiguous runs of about total/n samples; run i covers positions whose start is in [i*S/n, (i+1)*S/n)
        return self._held(share_sweep(self.randomizer, self._lengths, index, *self._partition))

    def _make_run_sweep(self, index: int, positions: np.ndarray, chunk=None, seq=None) -> Sweep:
        """An elastic run's stretch of sweep ``index``: only ``positions`` (sorted), all this
        worker's; ``cum`` keeps each one's place in the whole sweep, so sample limits, epochs and
        positions in minibatches and checkpoints mean what they mean in an ordinary sweep.
        ``chunk``/``seq`` given (a ChunkPartition's run: other partitions' orders): the sequences
        themselves, ``positions`` their places in the run."""
        if chunk is not None:
            return self._held(build_sweep(index, chunk, seq, cumulative(self._lengths.of(chunk, seq)), 0,
                                          len(chunk), orig=positions))
        order, cum = self._order_cum(index)
        run_cum = np.append(cum[positions], cum[positions[-1] + 1])
        return self._held(build_sweep(index, order.chunk[positions], order.index[positions], run_cum, 0,
                                      len(positions), orig=positions))

    def _held(self, sweep: Sweep) -> Sweep:
        """The sweep with what the chunks already held say about its positions."""
        self._resolve(sweep, self._cache.ids())
        return sweep

    def _resolve(self, sweep: Sweep, cids: list) -> None:
        """Record, for the share's positions that use the held chunks ``cids``, where each sequence
        is and its length: a few array operations for all of them (a batch of small chunks loads at
        once, a joined run of them is one unit: ``ChunkCache.first_of``)."""
        if not cids:
            return
        ids = np.asarray(cids, dtype=np.int64)
        rel, owner = sweep.positions_of(ids)
        if not len(rel):
            return
        cache = self._cache
        seqs = sweep.seq[sweep.lo + rel]
        slots, at_unit = np.unique(cache.slot_of[ids], return_inverse=True)
        units = cache.units(slots)
        if all(u.positions is None for u in units):  # no sequence dropped: index j is sequence j
            js = np.where(seqs < cache.size_of[ids][owner], seqs, -1)
        else:
            js = np.empty(len(rel), dtype=np.int64)
            bounds = np.searchsorted(owner, np.arange(len(cids) + 1))
            for k, cid in enumerate(cids):
                a, b = int(bounds[k]), int(bounds[k + 1])
                if b > a:
                    js[a:b] = cache.lookup(cid, seqs[a:b])
        sweep.pos_j[rel] = js
        if self.truncation_length:  # BPTT counts steps (the first stream's samples: engine/bptt.py)
            from recordkit.engine.bptt import step_counts
            lengths = [step_counts(u, self.streams)[0] for u in units]
        else:
            lengths = [u.lengths for u in units]
        flat = np.concatenate(lengths) if len(lengths) > 1 else np.asarray(lengths[0])
        unit_base = np.zeros(len(lengths), dtype=np.int64)
        np.cumsum([len(x) for x in lengths[:-1]], out=unit_base[1:])
        # each chunk's first sequence in ``flat``: its unit's place there plus its place in the unit
        base = unit_base[at_unit.reshape(-1)] + cache.first_of[ids]
        # a chunk whose every sequence was dropped has no lengths at all (js all -1)
        ok = js >= 0
        sweep.pos_len[rel] = np.where(ok, flat[np.where(ok, base[owner] + js, 0)], 0) if len(flat) else 0

    # -- chunks ----------------------------------------------------------------------------------
    def _chunk(self, cid: int) -> ChunkData:
        return self._cache.get(cid)

    def _on_load(self, cids: list) -> None:
        if self._sweep is not None:
            self._resolve(self._sweep, cids)

    def _evict(self, size: int = 1) -> None:
        """Drop loaded chunks that no position from the cursor on still needs, and those not
        needed soon: a chunk carried over from the previous sweep whose first use in this one
        is neither in the next minibatch's reach nor among the chunks the prefetch wants
        (kept, it would add to the window until that use; reloaded, it costs one parse).

        Run after every minibatch, the pass is skipped while its answer cannot have changed:
        same sweep, same size, the same chunks held or under way (``ChunkCache.version``), the
        cursor moved forward but past no held chunk's last use. (A chunk that survived the
        second test keeps surviving as the cursor advances: the reach only grows, and a chunk
        leaves the prefetch's list only once its first use is behind the cursor.)"""
        sw = self._current
        memo = self._evict_memo
        cursor = self._cursor
        if (memo is not None and memo[0] is sw and memo[1] == size and memo[2] == self._cache.version
                and memo[3] <= cursor <= memo[4]):
            return
        held = self._cache.held()
        until = sw.hi
        if len(held):
            soon = self._wanted_ahead()
            last = sw.per_chunk(sw.last_use, held)
            late = sw.per_chunk(sw.first_at, held) >= self._reach(size)
            if soon and late.any():
                late &= ~np.isin(held, soon)
            used_up = last < cursor
            gone = used_up | late
            if gone.any():
                self._cache.drop_many(held[gone].tolist())
                # positions are read from the cursor on, never behind it (a restore or a new split
                # builds a new sweep): only a chunk dropped before its first use needs its
                # positions marked not loaded (a sweep of small chunks drops hundreds used up)
                ahead = late & ~used_up
                if ahead.any():
                    rel, _ = sw.positions_of(held[ahead])
                    sw.pos_j[rel] = -2
                    sw.pos_len[rel] = 0
                last = last[~gone]
            if len(last):
                until = int(last.min())
        self._evict_memo = (sw, size, self._cache.version, cursor, until)

    def _reach(self, samples: int) -> int:
        return reach(self._current, self._cursor, samples)

    def _wanted_ahead(self) -> list:
        """The chunks the prefetch wants now: the one in use and the next ones in order of first use."""
        if self._cache.pool is None:
            return []
        return wanted_ahead(self._current, self._cursor, self._prefetch_chunks)

    def _prefetch(self) -> None:
        """Start loading the next chunks, in order of first use, on the background threads
        (nothing to do while the cursor is between the same two first uses and no chunk was
        loaded, dropped or started since the last call)."""
        if self._cache.pool is None:
            return
        sw, cursor, memo = self._current, self._cursor, self._prefetch_memo
        if memo is not None and memo[0] is sw and memo[1] == self._cache.version and memo[2] < cursor <= memo[3]:
            return
        self._cache.start(self._wanted_ahead(), ahead=True)
        # wanted_ahead's list changes only when the cursor passes a chunk's first use: it depends on
        # k = the number of first uses before the cursor, the same while first_pos[k-1] < cursor <= first_pos[k]
        k = int(np.searchsorted(sw.first_pos, cursor, side="left"))
        low = int(sw.first_pos[k - 1]) if k > 0 else -1
        high = int(sw.first_pos[k]) if k < len(sw.first_pos) else sw.hi
        self._prefetch_memo = (sw, self._cache.version, low, high)

    # -- positions -------------------------------------------------------------------------------
    @property
    def _current(self) -> Sweep:
        """The sweep being delivered (there is one once the first minibatch chose the partition,
        or a restore set it)."""
        sw = self._sweep
        assert sw is not None, "no sweep yet: the first next_minibatch chooses the partition"
        return sw

    def read_position(self) -> ReadPosition:
        """Where this source is, as a value (what a checkpoint saves: ``checkpoint.save_position``)."""
        return ReadPosition(0 if self._sweep is None else self._current.index, int(self._cursor), self._partition,
                            self._exhausted, self._epoch, self.samples_delivered, self.minibatches_delivered)

    # -- what engine/resume.py reads and drives: a restore lands here, every number checked there -----
    def bptt_state(self) -> dict | None:
        """The sequences truncated BPTT holds split across minibatches, as a checkpoint saves them
        (None: it holds none)."""
        return self._bptt.state() if self._bptt is not None and self._bptt.busy() else None

    def elastic_run(self) -> tuple | None:
        """(the elastic plan this source reads on, how far into its run it is: None once in the
        ordinary sweeps), or None when it never resumed elastically."""
        return None if self._plan is None else (self._plan, self._run_position())

    @property
    def length_table(self) -> LengthTable:
        """The index estimate of every sequence's samples: what positions are counted in."""
        return self._lengths

    def data_sizes(self) -> tuple[int, int, int]:
        """(chunks, sequences their descriptions count, samples per sweep): the data a checkpoint
        is bound to."""
        return len(self._chunks), self._described_total, self.sweep_samples

    @property
    def default_partition(self) -> tuple[int, int] | None:
        """(partitions, index) as the constructor gave them (None: it gave none)."""
        n, i = self._default_partitions
        return None if n is None else (int(n), int(i or 0))

    def resume_at(self, pos: ReadPosition, *, sweep: Sweep | None = None, plan: ElasticPlan | ChunkPlan | None = None,
                  run: Run | None = None, run_position: int | None = None, bptt: dict | None = None) -> None:
        """Continue from a restored read position, nothing loaded: at ``run_position`` of ``run`` (this
        partition's elastic run of ``plan``), else at ``pos.position`` of ``sweep`` (this partition's
        share of sweep ``pos.sweep``); ``bptt``: the slots truncated BPTT held."""
        self._land(pos, plan, run)
        if pos.partition is None:
            self._sweep = None
            self._cursor = 0
            return
        if run is not None:
            assert run_position is not None  # a position in an elastic run comes with its run
            self._enter_group(*run.locate(run_position))
        else:
            assert sweep is not None  # a partition reads its share of a sweep, or an elastic run
            self._sweep = sweep
            self._cursor = pos.position
        self._resume_bptt(bptt)

    def begin_as(self, part: tuple[int, int], *, plan: ElasticPlan | ChunkPlan | None = None, run: Run | None = None,
                 bptt: dict | None = None) -> None:
        """Begin as partition ``part`` with nothing delivered: ``run`` (its elastic run of ``plan``, then
        the plan's ordinary sweeps), or with no run the first sweep; ``bptt``: slots holding the
        sequences the old partitions had begun."""
        self._land(ReadPosition(sweep=0, position=0, partition=part, exhausted=False, epoch=0, samples_delivered=0,
                                minibatches_delivered=0), plan, run)
        if run is None:
            self._start_sweep(0)
        else:
            self._enter_group(0)
        if self.epoch_size is not None and self._sweep is not None and self._cursor < self._sweep.hi:
            self._epoch = self._global_start(self._cursor) // self.epoch_size
        self._resume_bptt(bptt)

    def _land(self, pos: ReadPosition, plan: ElasticPlan | ChunkPlan | None, run: Run | None) -> None:
        """What a restore replaces: no chunk held, the position's partition and counts, no BPTT slots."""
        self._clear_chunks()
        self._partition = pos.partition
        self._exhausted = pos.exhausted
        self._epoch = pos.epoch
        self.samples_delivered = pos.samples_delivered
        self.minibatches_delivered = pos.minibatches_delivered
        self._bptt = None
        self._plan, self._run, self._group = plan, run, None

    def _resume_bptt(self, state: dict | None) -> None:
        if state:
            from recordkit.engine.bptt import BpttSlots
            self._bptt = BpttSlots.from_state(self, state)

    def _global_start(self, pos: int) -> int:
        return self._current.index * self.sweep_samples + int(self._current.cum[pos])

    def _following_sweep(self) -> int:
        """The index of the sweep that comes after the current one (or after the current group of an
        elastic run: its next group, then the plan's first ordinary sweep)."""
        if self._group is not None:
            g = self._group + 1
            return self._run.groups[g][0] if g < len(self._run.groups) else self._plan.resume_sweep
        return self._current.index + 1

    def _advance_sweep(self) -> None:
        if self._group is not None:
            self._enter_group(self._group + 1)
        else:
            self._start_sweep(self._current.index + 1)

    def _enter_group(self, group: int, at: int = 0) -> None:
        """Deliver group ``group`` of this partition's elastic run from ``at`` on; past the last
        group, the ordinary sweeps of the new partitioning begin at the plan's ``resume_sweep``."""
        self._cache.cancel()
        if group >= len(self._run.groups):
            self._group = None
            self._start_sweep(self._plan.resume_sweep)
            return
        self._cache.drop_lent()
        self._group = group
        self._sweep = self._make_run_sweep(*self._run.groups[group])
        self._cursor = min(max(int(at), 0), self._current.hi)
        if self.trace_level >= 2:
            self._trace_sweep(self._sweep)

    def _run_position(self) -> int | None:
        """How far into its elastic run this partition is (None: in the ordinary sweeps)."""
        if self._group is None:
            return None
        return self._run.offsets[self._group] + int(self._cursor) if self._group < len(self._run.groups) \
            else self._run.length

    def _start_sweep(self, index: int, at: int | None = None) -> None:
        self._cache.cancel()
        self._cache.drop_lent()  # the new sweep takes the sequences of lent chunks from fresh loads
        self._sweep = self._make_sweep(index)
        self._cursor = self._current.lo if at is None else min(max(at, self._current.lo), self._current.hi)
        if self.trace_level >= 2:
            self._trace_sweep(self._sweep)

    def _trace_sweep(self, sw: Sweep) -> None:
        from recordkit.errors import RecordkitInfo, warn
        r = self.randomizer
        if hasattr(r, "trace"):
            order = r.trace(sw.index)
        elif isinstance(r, BlockRandomizer):
            window = "the whole data set" if r.window is None else \
                f"{r.window} {'samples' if r.sample_based else 'chunks'}"
            order = f"randomized (seed {r.seed + sw.index}, window {window})"
        else:
            order = "file order"
        assert self._partition is not None  # chosen before any sweep is made
        n, i = self._partition
        if sw.orig is not None:
            warn(f"sweep {sw.index} (elastic resume): worker {i} of {n} delivers {len(sw.orig)} of the positions "
                 f"the old partitions left, {int(sw.orig[0])}..{int(sw.orig[-1])}; {order}; ordinary sweeps "
                 f"resume at sweep {self._plan.resume_sweep}", RecordkitInfo, self.trace_level)
            return
        share = int(sw.cum[sw.hi] - sw.cum[sw.lo])
        warn(f"sweep {sw.index}: {len(sw.chunk)} sequences, {int(sw.cum[-1])} samples in {len(self._chunks)} "
             f"chunks, {order}; worker {i} of {n}: positions {sw.lo}..{sw.hi} ({share} samples)",
             RecordkitInfo, self.trace_level)

    def _ended(self, pos: int) -> bool:
        if self.max_sweeps is not None and self._current.index >= self.max_sweeps:
            return True
        return self.max_samples is not None and self._global_start(pos) >= self.max_samples

    # -- minibatches -------------------------------------------------------------------------------
    def next_minibatch(self, minibatch_size_in_samples: int, *, num_data_partitions: int | None = None,
                       partition_index: int | None = None) -> Minibatch | None:
        """The next minibatch of at most ``minibatch_size_in_samples`` samples (at least one
        sequence), or None once the data is exhausted (``max_samples``/``max_sweeps``).

        A minibatch may run on from one sweep into the next; ``end_of_sweep`` tells
        that it touched the end of a sweep. With ``truncation_length`` > 0 the size
        gives the number of parallel slots (size // truncation_length), each holding
        ``truncation_length`` steps (see ``engine/bptt.py``).
        """
        size = int(minibatch_size_in_samples)
        if size <= 0:
            raise ValueError("minibatch_size_in_samples must be > 0")
        part = self.resolve_partition(num_data_partitions, partition_index)
        if part != self._partition:
            self._reconfigure(part)
        self.restore_settled()
        if self._exhausted and not (self._bptt is not None and self._bptt.busy()):
            return None
        if self.truncation_length:
            return self._next_bptt(size)
        self._last_size = size
        picked, end_of_sweep, sweep_index = self._pick(size)
        if len(picked[0]) == 0:
            return None
        return self._assemble(picked, end_of_sweep, sweep_index)

    def _pick(self, size: int, *, max_sequences: int | None = None):
        """Choose the next sequences, vectorized over runs of positions.

        Returns ((chunk ids, indexes in the loaded chunks, lengths, sweep of each, position of each
        in its sweep), end_of_sweep, sweep).
        CNTK's rule: the first sequence is always taken; after it, a sequence is taken
        only if it still fits in ``size`` samples.
        """
        cids, js, lens, sweeps, positions = [], [], [], [], []
        total = 0
        count = 0
        end_of_sweep = False
        sweep_index = self._current.index
        limit_seqs = max_sequences if max_sequences is not None else None
        empty_sweeps = 0
        end_of_epoch = False
        mb_epoch = self._epoch
        while True:
            sw = self._current
            if self._cursor >= sw.hi:
                end_of_sweep = True
                following = self._following_sweep()
                if self.max_sweeps is not None and following >= self.max_sweeps:
                    self._exhausted = True
                    break
                if self.max_samples is not None and following * self.sweep_samples >= self.max_samples:
                    self._exhausted = True
                    break
                if sw.hi == sw.lo:
                    # this worker's share is empty (fewer sequences than workers): after a few
                    # empty sweeps in a row, report the end instead of spinning forever (with
                    # max_sequences, counted since the last pick, as that many one-sequence picks would)
                    empty_sweeps += 1
                    if empty_sweeps > 2 and (count == 0 or max_sequences is not None):
                        self._exhausted = True
                        break
                self._advance_sweep()
                continue
            stop = sw.hi
            if self.max_sweeps is not None and sw.index >= self.max_sweeps:
                stop = self._cursor
            if self.max_samples is not None:
                room = self.max_samples - sw.index * self.sweep_samples
                stop = min(stop, int(np.searchsorted(sw.cum[:-1], room, side="left")))
            epoch_stop = False
            if self.epoch_size is not None:
                room = (self._epoch + 1) * self.epoch_size - sw.index * self.sweep_samples
                at = int(np.searchsorted(sw.cum[:-1], room, side="left"))
                if at < stop:
                    stop, epoch_stop = max(at, sw.lo), True
            if self._cursor >= stop:
                if not epoch_stop:
                    self._exhausted = True
                    break
                if count and max_sequences is None:  # this minibatch ends the epoch; the next call starts the next one
                    end_of_epoch = True
                    break
                self._epoch += 1
                mb_epoch = self._epoch
                continue
            nxt, sel, total, status = _gather.pick_run(sw.pos_j, sw.pos_len, self._cursor - sw.lo, stop - sw.lo,
                                                       total, size, count > 0,
                                                       -1 if limit_seqs is None else limit_seqs - count)
            self._cursor = sw.lo + nxt
            if len(sel):
                empty_sweeps = 0
                c, j, n, w, p = _gather.take_picks(sel, sw.lo, sw.chunk, sw.pos_j, sw.pos_len, sw.orig, sw.index)
                cids.append(c)
                js.append(j)
                lens.append(n)
                sweeps.append(w)
                positions.append(p)
                count += len(sel)
            if status == 1:  # chunks not loaded yet: load those the next stretch needs, in parallel
                end = min(stop, self._reach(size - total if count else size))
                if max_sequences is not None:  # a BPTT refill: no further than the sequences it takes
                    end = min(end, self._cursor + max(max_sequences, 1) + 1)
                a, b = self._cursor - sw.lo, end - sw.lo
                missing = np.unique(sw.chunk[self._cursor:end][sw.pos_j[a:b] == -2])
                self._cache.ensure([int(c) for c in missing], ahead=self._wanted_ahead())
                continue
            if status == 2:
                break
        if self._cursor >= self._current.hi:
            end_of_sweep = True
        self._prefetch()
        picked = (_joined(cids), _joined(js), _joined(lens), _joined(sweeps), _joined(positions))
        self._last_epoch = (mb_epoch, end_of_epoch)
        return picked, end_of_sweep, sweep_index

    def _next_bptt(self, size: int) -> Minibatch | None:
        from recordkit.engine.bptt import BpttSlots
        slots = max(1, size // self.truncation_length)
        if self._bptt is None or self._bptt.num_slots != slots:
            if self._bptt is not None and self._bptt.busy():
                raise ValueError("the minibatch size (number of BPTT slots) cannot change while sequences are "
                                 "split across minibatches")
            self._bptt = BpttSlots(self, slots)
        return self._bptt.next(self.truncation_length)

    # -- what engine/bptt.py drives: the picker one sequence count at a time -----------------------
    @property
    def exhausted(self) -> bool:
        """The data has ended for this worker (``max_samples``/``max_sweeps``)."""
        return self._exhausted

    @property
    def at_sweep_end(self) -> bool:
        return self._cursor >= self._current.hi

    @property
    def sweep_index(self) -> int:
        return self._current.index

    def share_ahead(self) -> tuple:
        """(index in the loaded chunk, real length) of this worker's share from the cursor on, the
        share-relative cursor and end: what ``_gather.bptt_need`` reads."""
        sw = self._current
        return sw.pos_j, sw.pos_len, self._cursor - sw.lo, sw.hi - sw.lo

    def take_sequences(self, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The next ``count`` sequences whatever their samples: (chunk ids, indexes in the loaded
        chunks, lengths, sweep of each, position of each in its sweep)."""
        return self._pick(_NO_SIZE_LIMIT, max_sequences=count)[0]

    def chunk(self, cid: int) -> ChunkData:
        """Chunk ``cid``, held (loaded now if it is not)."""
        return self._chunk(cid)

    def sequence_index(self, cid: int, index: int) -> int:
        """Where the chunk description's sequence ``index`` is in the loaded chunk (-1: dropped)."""
        self._chunk(cid)
        return int(self._cache.lookup(cid, np.array([index], dtype=np.int64))[0])

    def release_chunks(self) -> None:
        """Drop the chunks the rest of the share no longer needs (after the caller took its own)."""
        self._evict()

    def count_delivered(self, mb: Minibatch) -> None:
        self.samples_delivered += mb.num_samples
        self.minibatches_delivered += 1

    @property
    def partition(self) -> tuple[int, int] | None:
        """(number of partitions, this one's index) once the first minibatch chose it, else None."""
        return self._partition

    def held_chunks(self) -> list:
        """The ids of the chunks held in memory now (the window and prefetch at work)."""
        return self._cache.ids()

    def loads_under_way(self) -> int:
        """Chunk loads running on the background threads now."""
        return sum(1 for f in self._cache.futures.values() if not f.done())

    @property
    def chunks(self) -> list:
        """The deserializer's chunk descriptions, as this source reads them."""
        return list(self._chunks)

    def _assemble(self, picked, end_of_sweep: bool, sweep_index: int) -> Minibatch:
        cids, js, _, sweeps, _ = picked
        cache = self._cache
        slots = cache.slot_of[cids] if len(cids) else cids
        at = js + cache.first_of[cids] if len(cids) else js  # the sequences' places in their slots' units
        layout = cache.layout
        lent = None
        if layout is not None:  # consecutive sequences of one chunk (in file order): views of its columns
            lent = lend_from_table(cache.columns, layout, slots, at, self.streams, frame_mode=self.frame_mode)
        if lent is not None:
            streams, keys, lengths, total, viewed = lent
            if viewed:  # the picks are of one held unit: every chunk of it they are from
                first, last = int(cids[0]), int(cids[-1])
                # consecutive sequences in file order: one chunk when the first and last agree (an
                # np.unique a minibatch cost ~45 us, a tenth of an in-order OFRecord minibatch)
                for cid in ([first] if first == last else np.unique(cids).tolist()):
                    cache.lend(cid)
        elif layout is not None and (slots >= 0).all():
            streams, keys, lengths, total = pack_from_table(cache.columns, layout, slots, at, self.streams,
                                                            frame_mode=self.frame_mode)
        else:  # chunks of different dtypes (a hand-built deserializer's): the per-chunk way
            found = _gather.chunk_slots(np.ascontiguousarray(cids, dtype=np.int64))
            uniq, slot = found if found is not None else np.unique(cids, return_inverse=True)
            chunks = [cache.get(c) for c in uniq.tolist()]
            streams, keys, lengths, total = pack_from_chunks(chunks, slot, js, self.streams,
                                                             frame_mode=self.frame_mode)
            del chunks
        if self.image_streams is not None:  # before eviction: the images are the held chunks' values
            self.image_streams.apply(streams, cids, js, self.deserializer)
        self._evict(self._last_size)
        mb = counted(Minibatch(streams, keys, lengths, end_of_sweep, sweep_index, sweeps=sweeps), total)
        if self.epoch_size is not None:
            mb.epoch, mb.end_of_epoch = self._last_epoch
        self.count_delivered(mb)
        return mb

    def _reconfigure(self, part) -> None:
        """A new worker split: keep the sweep and global position, move into the new share. Right
        after a restore the split is the checkpoint's: a list of states is planned anew for the
        new one, a single state is refused (its position is in its own partition's share)."""
        if self.repartition_restored(part, in_run=self._plan is not None and self._group is not None):
            return
        first = self._partition is None
        self._partition = part
        sweep = 0 if self._sweep is None else self._current.index
        at = None if first else self._cursor
        self._start_sweep(sweep, at)
        if self._bptt is not None:
            self._bptt = None

    def _clear_chunks(self) -> None:
        self._cache.clear()

    # -- conveniences ------------------------------------------------------------------------------
    def __iter__(self):
        raise TypeError("iterate with next_minibatch(size) or MinibatchSource.minibatches(size)")

    def minibatches(self, size: int, **partition: int | None) -> Iterator[Minibatch]:
        """Iterate ``next_minibatch(size)`` until the data is exhausted."""
        while True:
            mb = self.next_minibatch(size, **partition)
            if mb is None:
                return
            yield mb

    def close(self) -> None:
        self._cache.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
