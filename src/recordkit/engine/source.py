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
estimates (``engine/plan.py``), and the choice is reported (``source.memory``, and a
warning when the window was reduced). The default bound is a quarter of the memory
available, so a randomized read never silently grows with the data set.
"""
from __future__ import annotations

import dataclasses
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from recordkit.engine.chunk import ChunkData
from recordkit.engine.minibatch import Minibatch, pack_from_chunks
from recordkit.engine import _gather
from recordkit.engine.checkpoint import STATE_VERSION, SourceFacts, check_position, check_state
from recordkit.engine.deserializer import accepts_keyword
from recordkit.engine.randomizer import BlockRandomizer, NoRandomizer

INFINITELY_REPEAT = None


@dataclass
class _Sweep:
    """One sweep's order with its positions, and this worker's share of it."""
    index: int
    chunk: np.ndarray      # original chunk id per position
    seq: np.ndarray        # index in the chunk description per position
    cum: np.ndarray        # estimated samples before each position (len + 1)
    lo: int                # this worker's positions [lo, hi)
    hi: int
    last_use: dict         # chunk id -> last position in [lo, hi) that needs it
    first_use: np.ndarray  # chunks in order of first use within [lo, hi)
    first_pos: np.ndarray  # ... and that first position
    by_chunk: dict         # chunk id -> share-relative positions that use it
    pos_j: np.ndarray      # share-relative: index in the loaded chunk (-1 dropped, -2 not loaded yet)
    pos_len: np.ndarray    # share-relative: real length once loaded (0 for dropped)
    first_at: dict | None = None  # chunk id -> first_pos, made on first eviction
    orig: np.ndarray | None = None  # elastic resume: the sweep positions of this run (None: all of [lo, hi))


class MinibatchSource:
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
    """

    def __init__(self, deserializer, *, randomize: bool = True, window: int | None = None,
                 sample_based_window: bool = False, seed: int = 0, max_samples: int | None = None,
                 max_sweeps: int | None = None, epoch_size: int | None = None, frame_mode: bool = False,
                 truncation_length: int = 0,
                 num_data_partitions: int | None = None, partition_index: int | None = None,
                 prefetch_chunks: int = 2, threads: int = 2, trace_level: int | None = None, max_memory="auto"):
        from recordkit.errors import trace_level as _trace_level
        self.trace_level = _trace_level(trace_level)
        if max_samples is not None and max_sweeps is not None:
            raise ValueError("max_samples and max_sweeps are mutually exclusive")
        if frame_mode and truncation_length:
            raise ValueError("frame mode and truncated BPTT are mutually exclusive")
        if truncation_length < 0:
            raise ValueError("truncation_length must be >= 0")
        self.deserializer = deserializer
        self.streams = list(deserializer.streams)
        self._chunks = list(deserializer.chunks)
        self._described = {c.id: c.num_sequences for c in self._chunks}
        planned: dict = {}  # randomizers the memory plan made, with their sweep 0 already shuffled
        self.memory = self._choose_memory(max_memory, bool(randomize), window, bool(sample_based_window), seed,
                                          max(0, int(prefetch_chunks)), max(1, int(threads)), planned)
        window, prefetch_chunks = self.memory.window, self.memory.prefetch
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
        self._est_lengths = self._estimate_lengths()
        # the estimates flattened in chunk-id order, to gather a sweep's lengths in one step
        ids = sorted(self._est_lengths)
        self._est_flat = np.concatenate([self._est_lengths[c] for c in ids]) if ids else np.zeros(0, np.int64)
        self._est_base = np.zeros(max(ids) + 1 if ids else 0, dtype=np.int64)
        base = 0
        for c in ids:
            self._est_base[c] = base
            base += len(self._est_lengths[c])
        self.sweep_samples = int(self._est_flat.sum())
        if self.sweep_samples == 0 and sum(self._described.values()) == 0:
            raise ValueError("the data holds no sequences")
        self._partition = None
        self._sweep: _Sweep | None = None
        self._cursor = 0
        self._exhausted = False
        self.samples_delivered = 0
        self.minibatches_delivered = 0
        self._loaded: dict[int, ChunkData] = {}
        self._lookups: dict[int, np.ndarray] = {}
        self._futures: dict = {}
        self._prefetch_chunks = max(0, int(prefetch_chunks))
        self._threads = max(1, int(threads))
        self._load_takes_threads = None  # asked of the deserializer on the first load
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="recordkit-prefetch") \
            if self._prefetch_chunks else None
        self._bptt = None  # truncated BPTT slots (engine/bptt.py)
        self._last_size = 1
        # elastic resume (engine/elastic.py): the job's plan, this partition's run of it, and the
        # group of the run being delivered (None once the ordinary sweeps have begun)
        self._plan = None
        self._run = None
        self._group = None
        self._elastic_from = None  # (states, partition) of an elastic restore, until the first minibatch

    # -- setup -------------------------------------------------------------------------------------
    def _choose_memory(self, max_memory, randomize, window, sample_based, seed, prefetch, threads, cache):
        """Fit the window (and prefetch) to the memory bound; warn where the choice changes what
        was asked for, or where an unbounded plan needs more memory than is available."""
        from recordkit.engine import plan
        from recordkit.errors import RecordkitWarning
        if isinstance(max_memory, str) and max_memory.strip().lower() == "auto":
            # DataLoader workers each build a source: they share the machine's quarter
            bound, frm = plan.machine_memory_bound() // _torch_worker_count(), "machine"
        elif max_memory is None:
            bound, frm = None, "none"
        else:
            bound, frm = plan.parse_size(max_memory), "argument"
        nbytes = plan.chunk_bytes(self.deserializer)
        choice = plan.choose_window(self._chunks, nbytes, plan.load_bytes(self.deserializer, nbytes),
                                    max_memory=bound, bound_from=frm, randomize=randomize, window=window,
                                    sample_based=sample_based, seed=seed, prefetch=prefetch, threads=threads,
                                    cache=cache)
        if choice.capped or not choice.fits:
            warnings.warn(choice.describe(), RecordkitWarning, stacklevel=3)
        elif bound is None and choice.estimated_bytes > plan.available_memory():
            warnings.warn(f"this reader's plan needs about {plan.format_size(choice.estimated_bytes)} of chunks at "
                          f"once ({choice.window_text()} window), more than the "
                          f"{plan.format_size(plan.available_memory())} of memory available; set a smaller "
                          f"randomization window", RecordkitWarning, stacklevel=3)
        return choice

    def _estimate_lengths(self) -> dict:
        return estimate_lengths(self.deserializer, self._chunks)

    def _resolve_partition(self, num_data_partitions, partition_index) -> tuple[int, int]:
        n, i = num_data_partitions, partition_index
        if n is None and i is None:
            n, i = self._default_partitions
        if n is None and i is None:
            n, i = _torch_distributed_partition()
        n = 1 if n is None else int(n)
        i = 0 if i is None else int(i)
        if n < 1 or not 0 <= i < n:
            raise ValueError(f"partition_index must be in [0, num_data_partitions): got {i} of {n}")
        return n, i

    def _order_cum(self, index: int):
        """Sweep ``index``'s order and the index estimate of the sample each position starts at."""
        order = self.randomizer.sweep(index)
        est = self._est_flat[self._est_base[order.chunk] + order.index] if len(order) else np.zeros(0, np.int64)
        cum = np.zeros(len(order) + 1, dtype=np.int64)
        np.cumsum(est, out=cum[1:])
        return order, cum

    def _make_sweep(self, index: int) -> _Sweep:
        from recordkit.engine.elastic import share_bounds
        order, cum = self._order_cum(index)
        n, i = self._partition
        # contiguous runs of about total/n samples; run i covers positions whose start is in [i*S/n, (i+1)*S/n)
        lo, hi = share_bounds(cum, n, i)
        return self._build_sweep(index, order.chunk, order.index, cum, lo, hi)

    def _make_run_sweep(self, index: int, positions: np.ndarray, chunk=None, seq=None) -> _Sweep:
        """An elastic run's stretch of sweep ``index``: only ``positions`` (sorted), all this
        worker's; ``cum`` keeps each one's place in the whole sweep, so sample limits, epochs and
        positions in minibatches and checkpoints mean what they mean in an ordinary sweep.
        ``chunk``/``seq`` given (a ChunkPartition's run: other partitions' orders): the sequences
        themselves, ``positions`` their places in the run."""
        if chunk is not None:
            est = self._est_flat[self._est_base[chunk] + seq]
            cum = np.zeros(len(est) + 1, dtype=np.int64)
            np.cumsum(est, out=cum[1:])
            sweep = self._build_sweep(index, chunk, seq, cum, 0, len(chunk))
            sweep.orig = positions
            return sweep
        order, cum = self._order_cum(index)
        run_cum = np.append(cum[positions], cum[positions[-1] + 1])
        sweep = self._build_sweep(index, order.chunk[positions], order.index[positions], run_cum, 0, len(positions))
        sweep.orig = positions
        return sweep

    def _build_sweep(self, index, chunk, seq, cum, lo, hi) -> _Sweep:
        share = chunk[lo:hi]
        last_use = {}
        by_chunk = {}
        if len(share):
            srt = np.argsort(share, kind="stable")
            keys, starts = np.unique(share[srt], return_index=True)
            bounds = list(starts) + [len(srt)]
            by_chunk = {int(c): srt[bounds[k]:bounds[k + 1]] for k, c in enumerate(keys)}
            uniq, first = np.unique(share, return_index=True)
            rev_first = len(share) - 1 - np.unique(share[::-1], return_index=True)[1]
            last_use = {int(c): lo + int(p) for c, p in zip(uniq, rev_first)}
            by_first = np.argsort(first, kind="stable")
            first_use, first_pos = uniq[by_first], lo + first[by_first]
        else:
            first_use = first_pos = np.zeros(0, dtype=np.int64)
        sweep = _Sweep(index, chunk, seq, cum, lo, hi, last_use, first_use, first_pos, by_chunk,
                       np.full(hi - lo, -2, dtype=np.int64), np.zeros(hi - lo, dtype=np.int64))
        for cid in self._loaded:
            self._resolve(sweep, cid)
        return sweep

    def _resolve(self, sweep: _Sweep, cid: int) -> None:
        """Record, for the share's positions that use chunk ``cid``, where each sequence is and its length."""
        rel = sweep.by_chunk.get(cid)
        if rel is None:
            return
        js = self._lookups[cid][sweep.seq[sweep.lo + rel]]
        sweep.pos_j[rel] = js
        chunk = self._loaded[cid]
        if self.truncation_length:  # BPTT counts steps (the first stream's samples: engine/bptt.py)
            from recordkit.engine.bptt import _step_counts
            lengths = _step_counts(chunk, self.streams)[0]
        else:
            lengths = chunk.lengths
        # a chunk whose every sequence was dropped has no lengths at all (js all -1)
        sweep.pos_len[rel] = np.where(js >= 0, lengths[np.maximum(js, 0)], 0) if len(lengths) else 0

    # -- chunks ----------------------------------------------------------------------------------
    def _chunk(self, cid: int) -> ChunkData:
        data = self._loaded.get(cid)
        if data is None:
            fut = self._futures.pop(cid, None)
            data = fut.result() if fut is not None else self._load_now(cid)
            self._loaded[cid] = data
            self._lookups[cid] = data.position_lookup(self._described[cid])
            if self._sweep is not None:
                self._resolve(self._sweep, cid)
        return data

    def _load_now(self, cid: int) -> ChunkData:
        """A chunk the caller is waiting for: let the reader use every thread on it if it can."""
        if self._load_takes_threads is None:
            self._load_takes_threads = accepts_keyword(self.deserializer.load_chunk, "threads")
        if self._load_takes_threads:
            return self.deserializer.load_chunk(cid, threads=self._threads)
        return self.deserializer.load_chunk(cid)  # load_chunk(chunk_id) is all the protocol asks

    def _ensure(self, cids: list) -> None:
        """Load these chunks, all at once on the background threads when there are several."""
        if self._pool is not None and len(cids) > 1:
            for cid in cids:
                if cid not in self._loaded and cid not in self._futures:
                    self._futures[cid] = self._pool.submit(self.deserializer.load_chunk, cid)
        for cid in cids:
            self._chunk(cid)

    def _evict(self, size: int = 1) -> None:
        """Drop loaded chunks that no position from the cursor on still needs, and those not
        needed soon: a chunk carried over from the previous sweep whose first use in this one
        is neither in the next minibatch's reach nor among the chunks the prefetch wants
        (kept, it would add to the window until that use; reloaded, it costs one parse)."""
        sw = self._sweep
        soon = set(self._wanted_ahead())
        reach = self._reach(size)
        if sw.first_at is None:
            sw.first_at = dict(zip(sw.first_use.tolist(), sw.first_pos.tolist()))
        first_at = sw.first_at
        for cid in list(self._loaded):
            if sw.last_use.get(cid, -1) < self._cursor or (first_at.get(cid, -1) >= reach and cid not in soon):
                del self._loaded[cid]
                del self._lookups[cid]
                if cid in sw.by_chunk:
                    rel = sw.by_chunk[cid]
                    sw.pos_j[rel] = -2
                    sw.pos_len[rel] = 0

    def _reach(self, samples: int) -> int:
        """The end of the stretch from the cursor that ``samples`` samples cover by the index lengths
        (at least one position): what a minibatch with that much room left can still take."""
        cum = self._sweep.cum
        end = int(np.searchsorted(cum, cum[self._cursor] + max(int(samples), 1), side="right")) - 1
        return max(end, self._cursor + 1)

    def _wanted_ahead(self) -> list:
        """The chunks the prefetch wants now: the one in use and the next ones in order of first use."""
        sw = self._sweep
        if not self._pool:
            return []
        k = int(np.searchsorted(sw.first_pos, self._cursor, side="left"))
        return [int(c) for c in sw.first_use[max(0, k - 1):k + self._prefetch_chunks + 1]]

    def _prefetch(self) -> None:
        """Start loading the next chunks, in order of first use, on the background threads."""
        if not self._pool:
            return
        # chunks already in use stay; schedule the next ones in order of first use
        for cid in self._wanted_ahead():
            if cid not in self._loaded and cid not in self._futures:
                self._futures[cid] = self._pool.submit(self.deserializer.load_chunk, cid)

    # -- positions -------------------------------------------------------------------------------
    def _global_start(self, pos: int) -> int:
        return self._sweep.index * self.sweep_samples + int(self._sweep.cum[pos])

    def _following_sweep(self) -> int:
        """The index of the sweep that comes after the current one (or after the current group of an
        elastic run: its next group, then the plan's first ordinary sweep)."""
        if self._group is not None:
            g = self._group + 1
            return self._run.groups[g][0] if g < len(self._run.groups) else self._plan.resume_sweep
        return self._sweep.index + 1

    def _advance_sweep(self) -> None:
        if self._group is not None:
            self._enter_group(self._group + 1)
        else:
            self._start_sweep(self._sweep.index + 1)

    def _enter_group(self, group: int, at: int = 0) -> None:
        """Deliver group ``group`` of this partition's elastic run from ``at`` on; past the last
        group, the ordinary sweeps of the new partitioning begin at the plan's ``resume_sweep``."""
        for fut in self._futures.values():
            fut.cancel()
        self._futures.clear()
        if group >= len(self._run.groups):
            self._group = None
            self._start_sweep(self._plan.resume_sweep)
            return
        self._group = group
        self._sweep = self._make_run_sweep(*self._run.groups[group])
        for cid in self._loaded:
            self._resolve(self._sweep, cid)
        self._cursor = min(max(int(at), 0), self._sweep.hi)
        if self.trace_level >= 2:
            self._trace_sweep(self._sweep)

    def _run_position(self) -> int | None:
        """How far into its elastic run this partition is (None: in the ordinary sweeps)."""
        if self._group is None:
            return None
        return self._run.offsets[self._group] + int(self._cursor) if self._group < len(self._run.groups) \
            else self._run.length

    def _start_sweep(self, index: int, at: int | None = None) -> None:
        for fut in self._futures.values():
            fut.cancel()
        self._futures.clear()
        self._sweep = self._make_sweep(index)
        self._cursor = self._sweep.lo if at is None else min(max(at, self._sweep.lo), self._sweep.hi)
        if self.trace_level >= 2:
            self._trace_sweep(self._sweep)

    def _trace_sweep(self, sw: _Sweep) -> None:
        from recordkit.errors import RecordkitInfo, warn
        r = self.randomizer
        if isinstance(r, BlockRandomizer):
            window = "the whole data set" if r.window is None else \
                f"{r.window} {'samples' if r.sample_based else 'chunks'}"
            order = f"randomized (seed {r.seed + sw.index}, window {window})"
        else:
            order = "file order"
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
        if self.max_sweeps is not None and self._sweep.index >= self.max_sweeps:
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
        part = self._resolve_partition(num_data_partitions, partition_index)
        if part != self._partition:
            self._reconfigure(part)
        self._elastic_from = None
        if self._exhausted and not (self._bptt is not None and self._bptt.busy()):
            return None
        if self.truncation_length:
            from recordkit.engine.bptt import next_bptt_minibatch
            return next_bptt_minibatch(self, size)
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
        sweep_index = self._sweep.index
        limit_seqs = max_sequences if max_sequences is not None else None
        empty_sweeps = 0
        end_of_epoch = False
        mb_epoch = self._epoch
        while True:
            sw = self._sweep
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
                cids.append(sw.chunk[sw.lo + sel])
                js.append(sw.pos_j[sel])
                lens.append(sw.pos_len[sel])
                sweeps.append(np.full(len(sel), sw.index, dtype=np.int64))
                positions.append(sw.lo + sel if sw.orig is None else sw.orig[sel])
                count += len(sel)
            if status == 1:  # chunks not loaded yet: load those the next stretch needs, in parallel
                end = min(stop, self._reach(size - total if count else size))
                if max_sequences is not None:  # a BPTT refill: no further than the sequences it takes
                    end = min(end, self._cursor + max(max_sequences, 1) + 1)
                a, b = self._cursor - sw.lo, end - sw.lo
                missing = np.unique(sw.chunk[self._cursor:end][sw.pos_j[a:b] == -2])
                self._ensure([int(c) for c in missing])
                continue
            if status == 2:
                break
        if self._cursor >= self._sweep.hi:
            end_of_sweep = True
        self._prefetch()
        picked = (np.concatenate(cids) if cids else np.zeros(0, np.int64),
                  np.concatenate(js) if js else np.zeros(0, np.int64),
                  np.concatenate(lens) if lens else np.zeros(0, np.int64),
                  np.concatenate(sweeps) if sweeps else np.zeros(0, np.int64),
                  np.concatenate(positions) if positions else np.zeros(0, np.int64))
        self._last_epoch = (mb_epoch, end_of_epoch)
        return picked, end_of_sweep, sweep_index

    def _assemble(self, picked, end_of_sweep: bool, sweep_index: int) -> Minibatch:
        cids, js, _, sweeps, _ = picked
        if len(cids) and cids[0] == cids[-1] and not (cids != cids[0]).any():  # all from one chunk: no sort
            uniq, slot = cids[:1], np.zeros(len(cids), dtype=np.int64)
        else:
            uniq, slot = np.unique(cids, return_inverse=True)
        chunks = [self._chunk(int(c)) for c in uniq]
        streams, keys, lengths = pack_from_chunks(chunks, slot, js, self.streams, frame_mode=self.frame_mode)
        del chunks
        self._evict(self._last_size)
        mb = Minibatch(streams, keys, lengths, end_of_sweep, sweep_index, sweeps=sweeps)
        if self.epoch_size is not None:
            mb.epoch, mb.end_of_epoch = self._last_epoch
        self.samples_delivered += mb.num_samples
        self.minibatches_delivered += 1
        return mb

    def _reconfigure(self, part) -> None:
        """A new worker split: keep the sweep and global position, move into the new share."""
        if self._plan is not None and self._group is not None:
            self._reconfigure_run(part)
            return
        first = self._partition is None
        self._partition = part
        sweep = 0 if self._sweep is None else self._sweep.index
        at = None if first else self._cursor
        self._start_sweep(sweep, at)
        if self._bptt is not None:
            self._bptt = None

    # -- checkpoints -------------------------------------------------------------------------------
    def get_checkpoint_state(self) -> dict:
        """A small JSON-able dict: restoring it continues with exactly the next minibatches."""
        if self._bptt is not None and self._bptt.busy():
            bptt = self._bptt.state()
        else:
            bptt = None
        return {
            "recordkit_state": STATE_VERSION,
            "sweep": 0 if self._sweep is None else self._sweep.index,
            "position": int(self._cursor),
            "partition": None if self._partition is None else list(self._partition),
            "exhausted": self._exhausted,
            "epoch": self._epoch,
            "samples_delivered": self.samples_delivered,
            "minibatches_delivered": self.minibatches_delivered,
            "bptt": bptt,
            "fingerprint": self._fingerprint(),
            **({} if self._chunk_partition() is None else
               {"chunk_partition": [self.deserializer.num_partitions, self.deserializer.index]}),
            **({} if self._plan is None else {"elastic": {**self._plan.to_json(),
                                                          "run_position": self._run_position()}}),
        }

    def restore_from_checkpoint(self, state, *, num_data_partitions: int | None = None,
                                partition_index: int | None = None) -> None:
        """Continue from ``state`` (``get_checkpoint_state()``). The state is untrusted input:
        every field is checked first (``engine/checkpoint.py``); a bad one is a ValueError
        naming the field and leaves this source as it was.

        Elastic resume: ``state`` may be the list of *every* partition's state of a job, in
        partition order (None for a partition that had taken nothing), taken with the workers
        anywhere. This source then reads as partition ``partition_index`` of
        ``num_data_partitions`` (default: as ``next_minibatch`` would: the constructor's, else
        torch.distributed's, else 1/0), any number of partitions: what no old partition
        delivered of the sweeps they were in is cut into equal runs of the new partitions,
        delivered exactly once, and then ordinary sweeps of the new partitioning follow
        (``engine/elastic.py``). With as many partitions as the job had, it is the exact resume
        of this partition's own state.

        A checkpoint whose randomization window differs from this source's only because a
        memory bound chose one of them (a machine with other memory, another ``max_memory``)
        is continued with the checkpoint's window, so the resumed order is the one it was
        made with; a warning says so when that window exceeds this source's bound."""
        if isinstance(state, (list, tuple)):
            part = self._resolve_partition(num_data_partitions, partition_index)
            self._restore_with_window(next((s for s in state if s is not None), None),
                                      lambda: self._restore_many(list(state), part))
            self._elastic_from = (list(state), part)  # kept until the first minibatch (see _reconfigure_run)
            return
        self._restore_with_window(state, lambda: self._restore(state))

    def _restore_with_window(self, state, restore) -> None:
        adopted = self._checkpoint_window(state) if state is not None else None
        saved = self.randomizer
        if adopted is not None:
            self.randomizer = BlockRandomizer(self._chunks, window=adopted[0], sample_based=self.memory.sample_based,
                                              seed=self.randomizer.seed)
        try:
            restore()
        except BaseException:
            self.randomizer = saved
            raise
        if adopted is not None:
            self._adopt_window(adopted[0])

    def _checkpoint_window(self, state):
        """(the checkpoint's window,) when it is the only difference and a memory bound explains it
        (no larger than the window asked for here), else None (then the usual check refuses it)."""
        mine = self._fingerprint()
        fp = state.get("fingerprint") if isinstance(state, dict) else None
        if not mine[0] or not isinstance(fp, list) or len(fp) != len(mine) or fp[1] == mine[1]:
            return None
        if any(a != b for k, (a, b) in enumerate(zip(fp, mine)) if k != 1):
            return None
        w, asked = fp[1], self.memory.window_requested
        if w is None:  # the whole data set: a bound elsewhere let it be
            return (None,) if asked is None else None
        if isinstance(w, bool) or not isinstance(w, int) or w < 0:
            return None
        return (w,) if asked is None or w <= asked else None

    def _adopt_window(self, window) -> None:
        from recordkit.engine import plan
        from recordkit.errors import RecordkitWarning
        m = self.memory
        nbytes = plan.chunk_bytes(self.deserializer)
        est = plan.choose_window(self._chunks, nbytes, plan.load_bytes(self.deserializer, nbytes), max_memory=None,
                                 randomize=True, window=window, sample_based=m.sample_based,
                                 seed=self.randomizer.seed, prefetch=m.prefetch).estimated_bytes
        fits = m.max_memory is None or est <= m.max_memory
        self.memory = dataclasses.replace(m, window=window, capped=window != m.window_requested, fits=fits,
                                          estimated_bytes=est)
        if not fits:
            warnings.warn(f"the checkpoint's randomization window ({self.memory.window_text()}) "
                          f"is kept so the order continues as it "
                          f"was: about {plan.format_size(est)} of chunks at once, beyond the memory bound "
                          f"{plan.format_size(m.max_memory)}", RecordkitWarning, stacklevel=3)

    def _chunk_partition(self):
        """The ChunkPartition this source reads, or None."""
        from recordkit.engine.chunk_partition import ChunkPartition
        return self.deserializer if isinstance(self.deserializer, ChunkPartition) else None

    def _facts(self) -> SourceFacts:
        return SourceFacts(self._fingerprint(), len(self._est_flat), self.sweep_samples,
                           int(self._est_flat.max()) if len(self._est_flat) else 0, self.max_sweeps, self.max_samples)

    def _checked_plan(self, state: dict, facts: SourceFacts):
        """(the elastic plan a checkpoint runs on, its run position) or (None, None)."""
        data = state.get("elastic")
        if data is None:
            return None, None
        from recordkit.engine.checkpoint import last_sweep
        from recordkit.engine.elastic import ChunkPlan, ElasticPlan
        if isinstance(data, dict) and data.get("kind") == "chunks":
            plan = ChunkPlan.from_json(data, last_sweep(facts))
        else:
            plan = ElasticPlan.from_json(data, facts.num_sequences, last_sweep(facts))
        run_position = data.get("run_position")
        if run_position is not None and (isinstance(run_position, bool) or not isinstance(run_position, int)
                                         or run_position < 0):
            raise ValueError(f"checkpoint field 'elastic': run_position {run_position!r} is not a count")
        return plan, run_position

    def _sweep_cum(self, index: int) -> np.ndarray:
        return self._order_cum(index)[1]

    def _cut(self, plan, part):
        from recordkit.engine.elastic import ChunkPlan, cut_chunk_run, cut_run
        if isinstance(plan, ChunkPlan):
            cp = self._chunk_partition()
            if cp is None or plan.partitions != cp.num_partitions:
                raise ValueError(f"checkpoint field 'elastic': the plan is for {plan.partitions} ChunkPartition "
                                 f"readers, this source reads "
                                 f"{'no ChunkPartition' if cp is None else f'partition {cp.index} of {cp.num_partitions}'}")
            return cut_chunk_run(plan, self._shadow_order, self._owners, cp.index, self._local_ids())
        if plan.partitions != part[0]:
            raise ValueError(f"checkpoint field 'elastic': the plan is cut for {plan.partitions} partitions, this "
                             f"source reads partition {part[1]} of {part[0]}")
        return cut_run(plan, self._sweep_cum, part[1])

    def _clear_chunks(self) -> None:
        for fut in self._futures.values():
            fut.cancel()
        self._futures.clear()
        self._loaded.clear()
        self._lookups.clear()

    def _restore(self, state: dict) -> None:
        facts = self._facts()
        cp, said = self._chunk_partition(), state.get("chunk_partition") if isinstance(state, dict) else None
        if cp is not None and said is not None and said != [cp.num_partitions, cp.index]:
            where = f"{said[1]} of {said[0]}" if isinstance(said, list) and len(said) == 2 else repr(said)
            raise ValueError(f"checkpoint field 'chunk_partition': the checkpoint is of ChunkPartition {where}, "
                             f"this source reads {cp.index} of {cp.num_partitions}; to change the number of "
                             f"readers, restore from the list of every reader's state")
        st = check_state(state, facts)
        n, i = self._default_partitions
        if st.partition is not None and n is not None and tuple(st.partition) != (int(n), int(i or 0)):
            raise ValueError(f"checkpoint field 'partition': the checkpoint is of partition {st.partition[1]} of "
                             f"{st.partition[0]}, this source reads partition {i or 0} of {n}")
        plan, run_position = self._checked_plan(state, facts)
        sweep = run = None
        if st.partition is not None:
            saved = self._partition
            self._partition = st.partition
            try:
                if plan is not None and run_position is not None:  # within its elastic run
                    run = self._cut(plan, st.partition)
                    if run_position > run.length:
                        raise ValueError(f"checkpoint field 'elastic': run_position {run_position} is beyond this "
                                         f"partition's run of {run.length} positions")
                else:
                    sweep = self._make_sweep(st.sweep)
                    check_position(st.position, sweep.lo, sweep.hi)
            finally:
                self._partition = saved
        self._clear_chunks()
        self._partition = st.partition
        self._exhausted = st.exhausted
        self._epoch = st.epoch
        self.samples_delivered = st.samples_delivered
        self.minibatches_delivered = st.minibatches_delivered
        self._bptt = None
        self._plan, self._run, self._group = plan, run, None
        if st.partition is None:
            self._sweep = None
            self._cursor = 0
            return
        if run is not None:
            self._enter_group(*run.locate(run_position))
        else:
            sweep.pos_j.fill(-2)  # built while other chunks were loaded: nothing is loaded now
            sweep.pos_len.fill(0)
            self._sweep = sweep
            self._cursor = st.position
        if st.bptt:
            from recordkit.engine.bptt import BpttSlots
            self._bptt = BpttSlots.from_state(self, st.bptt)

    def _restore_many(self, states: list, part: tuple) -> None:
        """Elastic resume from every old partition's state (see ``restore_from_checkpoint``)."""
        if self._chunk_partition() is not None and any(isinstance(s, dict) and "chunk_partition" in s
                                                       for s in states):
            self._restore_many_chunks(states)
            return
        from recordkit.engine.checkpoint import _fail
        from recordkit.engine.elastic import OldPartition, plan_resume
        if not states:
            raise ValueError("an elastic resume needs the states of all the job's partitions, got an empty list")
        facts = self._facts()
        n_old = len(states)
        checked, plans = [], []
        for k, state in enumerate(states):
            if state is None:
                checked.append(None)
                continue
            try:
                st = check_state(state, facts)
                if st.partition is not None and st.partition != (n_old, k):
                    raise _fail("partition", f"it is partition {st.partition[1]} of {st.partition[0]}, but sits at "
                                             f"place {k} of a list of {n_old}: give the states of all partitions "
                                             f"in partition order (None for one that took nothing)")
                plan, run_position = self._checked_plan(state, facts)
            except ValueError as exc:
                raise ValueError(f"state {k} of {n_old}: {exc}") from None
            checked.append((st, run_position))
            plans.append(plan)
        if any(p is None for p in plans) and any(p is not None for p in plans) or any(
                p is not None and not p.same_job(plans[0]) for p in plans):
            raise ValueError("the states are of different jobs (their elastic plans differ): give the states all "
                             "partitions of one job saved at one checkpoint")
        old_plan = plans[0] if plans else None
        if old_plan is not None and old_plan.partitions != n_old:
            raise ValueError(f"the states' job had {old_plan.partitions} partitions, the list has {n_old} states")
        if n_old == part[0] and checked[part[1]] is not None:  # same partitioning: this partition's exact resume
            self._restore(states[part[1]])
            return
        if n_old == part[0] or all(c is None for c in checked):
            plan = old_plan  # this partition had taken nothing: it starts its run (or the job) from the start
        else:
            old = []
            for c in checked:
                if c is None or c[0].partition is None:
                    old.append(OldPartition(0, 0, None, False, [], None))
                    continue
                st, run_position = c
                slots = (st.bptt or {}).get("slots") or []
                waiting = [tuple(e) for q in slots for e in q]
                old.append(OldPartition(st.sweep, st.position, run_position, True, waiting, len(slots) or None))
            plan = plan_resume(old, old_plan, n_old, part[0], self._sweep_cum, num_sequences=facts.num_sequences,
                               sweep_samples=self.sweep_samples, max_sweeps=self.max_sweeps,
                               max_samples=self.max_samples)
        self._start_run(plan, part)

    # -- elastic resume of ChunkPartition readers -------------------------------------------------
    def _shadow(self, n: int, k: int):
        """Partition k of n of this source's data, as a ChunkPartition reader with this source's
        randomization would have read it: (its chunks' ids in the data, its randomizer, facts)."""
        cache = self.__dict__.setdefault("_shadows", {})
        if (n, k) not in cache:
            from recordkit.engine.chunk_partition import ChunkPartition
            part = ChunkPartition(self.deserializer.inner, n, k)
            chunks = part.chunks
            r = self.randomizer
            rnd = BlockRandomizer(chunks, window=r.window, sample_based=r.sample_based, seed=r.seed) \
                if isinstance(r, BlockRandomizer) else NoRandomizer(chunks)
            est = estimate_lengths(part, chunks)
            flat = np.concatenate([est[c.id] for c in chunks]) if chunks else np.zeros(0, np.int64)
            d = rnd.describe()
            fp = [d.get("randomize"), d.get("window"), d.get("sample_based"), d.get("seed"), len(chunks),
                  int(sum(c.num_sequences for c in chunks)), int(flat.sum())]
            facts = SourceFacts(fp, len(flat), int(flat.sum()), int(flat.max()) if len(flat) else 0,
                                self.max_sweeps, self.max_samples)
            cache[(n, k)] = (np.asarray(part.inner_chunk_ids, dtype=np.int64), rnd, facts)
        return cache[(n, k)]

    def _shadow_order(self, n: int, k: int, sweep: int):
        ids, rnd, _ = self._shadow(n, k)
        order = rnd.sweep(sweep)
        return ids[order.chunk], np.asarray(order.index, dtype=np.int64)

    def _owners(self, n: int) -> np.ndarray:
        from recordkit.engine.chunk_partition import assign_chunks
        cache = self.__dict__.setdefault("_owner_cache", {})
        if n not in cache:
            cache[n] = assign_chunks(self.deserializer.inner.chunks, n)
        return cache[n]

    def _local_ids(self) -> np.ndarray:
        """Inner chunk id -> this partition's chunk id (-1: not this partition's)."""
        cp = self._chunk_partition()
        local = np.full(len(cp.inner.chunks), -1, dtype=np.int64)
        local[np.asarray(cp.inner_chunk_ids, dtype=np.int64)] = np.arange(len(cp.inner_chunk_ids))
        return local

    def _restore_many_chunks(self, states: list) -> None:
        """Elastic resume of ChunkPartition readers: ``states`` are every old reader's, in order."""
        from recordkit.engine.checkpoint import _fail
        from recordkit.engine.elastic import OldPartition, plan_chunk_resume
        cp = self._chunk_partition()
        n_old, m_new, j = len(states), cp.num_partitions, cp.index
        if self.max_samples is not None or self.epoch_size is not None or self.truncation_length:
            raise ValueError("an elastic resume of ChunkPartition readers counts no job-wide samples: it "
                             "works with max_sweeps, not with max_samples, epoch_size or truncated BPTT "
                             "(resume with the same number of readers, or partition by samples instead)")
        checked, plans = [], []
        for k, state in enumerate(states):
            if state is None:
                checked.append(None)
                continue
            try:
                if not isinstance(state, dict) or state.get("chunk_partition") != [n_old, k]:
                    raise _fail("chunk_partition", f"expected [{n_old}, {k}] (the states of all ChunkPartition "
                                                   f"readers in order, None for one that took nothing), found "
                                                   f"{state.get('chunk_partition') if isinstance(state, dict) else state!r}")
                facts = self._shadow(n_old, k)[2]
                st = check_state(state, facts)
                if st.partition not in (None, (1, 0)):
                    raise _fail("partition", "a ChunkPartition reader's source must not be partitioned again")
                plan, run_position = self._checked_plan(state, facts)
            except ValueError as exc:
                raise ValueError(f"state {k} of {n_old}: {exc}") from None
            checked.append((st, run_position))
            plans.append(plan)
        if any(p is None for p in plans) and any(p is not None for p in plans) or any(
                p is not None and not p.same_job(plans[0]) for p in plans):
            raise ValueError("the states are of different jobs (their elastic plans differ): give the states of "
                             "all the readers of one job saved at one checkpoint")
        old_plan = plans[0] if plans else None
        if old_plan is not None and old_plan.partitions != n_old:
            raise ValueError(f"the states' job had {old_plan.partitions} readers, the list has {n_old} states")
        if n_old == m_new and checked[j] is not None:
            self._restore(states[j])
            return
        if n_old == m_new or all(c is None for c in checked):
            plan = old_plan
        else:
            old = [OldPartition(0, 0, None, False, [], None) if c is None or c[0].partition is None else
                   OldPartition(c[0].sweep, c[0].position, c[1], True, [], None) for c in checked]
            plan = plan_chunk_resume(old, old_plan, n_old, m_new, self._shadow_order, self._owners,
                                     max_sweeps=self.max_sweeps)
        self._start_run(plan, (1, 0))

    def _start_run(self, plan, part) -> None:
        """Begin as partition ``part`` with nothing delivered: the plan's run (then its ordinary
        sweeps), or with no plan the job's first sweep."""
        run = self._cut(plan, part) if plan is not None else None
        if run is not None and run.carry and not self.truncation_length:
            raise ValueError("the states hold sequences that truncated BPTT had split across minibatches: "
                             "resume with the same truncation_length")
        self._clear_chunks()
        self._partition = part
        self._exhausted = False
        self.samples_delivered = 0
        self.minibatches_delivered = 0
        self._bptt = None
        self._plan, self._run, self._group = plan, run, None
        if run is None:
            self._start_sweep(0)
        else:
            self._enter_group(0)
        self._epoch = 0
        if self.epoch_size is not None and self._cursor < self._sweep.hi:
            self._epoch = self._global_start(self._cursor) // self.epoch_size
        if run is not None and run.carry:
            from recordkit.engine.bptt import BpttSlots
            width = max(1, plan.bptt_slots or 1)
            slots = [[] for _ in range(width)]
            for q, entry in enumerate(run.carry):
                slots[q % width].append(list(entry))
            self._bptt = BpttSlots.from_state(self, {"slots": slots})

    def _reconfigure_run(self, part) -> None:
        """Another partitioning asked of a source resumed elastically: fine before it has delivered
        anything (the plan is made again for it), refused after."""
        held = getattr(self, "_elastic_from", None)
        if held is None:
            n, i = self._partition
            raise ValueError(f"this source resumed elastically as partition {i} of {n} and has delivered since; "
                             f"it cannot move to partition {part[1]} of {part[0]}")
        self._restore_many(held[0], part)
        self._elastic_from = (held[0], part)

    def _fingerprint(self) -> list:
        r = self.randomizer.describe()
        return [r.get("randomize"), r.get("window"), r.get("sample_based"), r.get("seed"),
                len(self._chunks), int(sum(self._described.values())), self.sweep_samples]

    # -- conveniences ------------------------------------------------------------------------------
    def __iter__(self):
        raise TypeError("iterate with next_minibatch(size) or MinibatchSource.minibatches(size)")

    def minibatches(self, size: int, **partition):
        """Iterate ``next_minibatch(size)`` until the data is exhausted."""
        while True:
            mb = self.next_minibatch(size, **partition)
            if mb is None:
                return
            yield mb

    def close(self) -> None:
        if self._pool is not None:
            for fut in self._futures.values():
                fut.cancel()
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def estimate_lengths(deserializer, chunks) -> dict:
    """Chunk id -> the index's estimate of each sequence's samples (what positions are counted in)."""
    get = getattr(deserializer, "sequence_lengths", None)
    out = {}
    for c in chunks:
        if get is not None:
            out[c.id] = np.asarray(get(c.id), dtype=np.int64)
        else:  # spread the chunk's samples evenly over its sequences
            base, extra = divmod(c.num_samples, max(c.num_sequences, 1))
            est = np.full(c.num_sequences, base, dtype=np.int64)
            est[:extra] += 1
            out[c.id] = est
    return out


def _torch_worker_count() -> int:
    """The number of DataLoader workers when this runs in one (torch is never imported here), else 1."""
    torch = sys.modules.get("torch")
    try:
        info = torch.utils.data.get_worker_info() if torch is not None else None
    except Exception:
        info = None
    return max(1, int(getattr(info, "num_workers", 1) or 1))


def _torch_distributed_partition():
    """(world size, rank) when torch.distributed is initialized; torch is never imported here."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None, None
    dist = getattr(torch, "distributed", None)
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_world_size(), dist.get_rank()
    except Exception:
        pass
    return None, None
