"""Elastic resume: continue a job's data on another number of partitions.

A job of N partitions checkpoints each partition on its own (``get_checkpoint_state``), the
workers at different places, some perhaps already in the next sweep. Resuming with M
partitions cannot continue each old share: the shares of M partitions are other stretches of
the sweep. So the checkpoints are turned into what the job as a whole has *not yet
delivered* (``pending``: stretches of sweep positions, in sweep order), that is cut again
into M runs of about equal samples, and after it every partition goes on with ordinary
sweeps of the new partitioning from ``resume_sweep`` on. Within the interrupted sweep(s)
every sequence no old partition delivered is delivered exactly once, none twice
(MosaicML Streaming's promise for a resize, on CNTK's sweep orders).

Everything here is a pure function of the checkpoints and the sweep orders (the positions'
sample counts come from ``cum_of(sweep)``, the index estimate the source uses for every
position), so every new partition computes the same plan on its own, and a partition's
place in its run is one number that goes into its own checkpoint; an elastic job can be
resized again (its checkpoints carry the plan they run on).

Truncated BPTT: a sequence an old partition had begun (offset > 0 in one of its slots) is
continued from that offset by one new partition (``carry``: dealt round-robin), so its
steps too are delivered once; sequences waiting in a slot with nothing delivered go back to
``pending``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from recordkit.engine.sweep import share_bounds  # noqa: F401  (re-exported: the plans use it)


@dataclass
class ElasticPlan:
    """What a resized job delivers before its ordinary sweeps; the same for every partition.

    pending: (sweep, start, stop) stretches of sweep positions, in delivery order (by sweep,
    then position); resume_sweep: the first ordinary sweep; partitions: M, the number of
    runs ``pending`` is cut into; carry: (sweep, position, offset) of begun BPTT sequences;
    bptt_slots: the slot count the carried sequences were in."""
    pending: list
    resume_sweep: int
    partitions: int
    carry: list = field(default_factory=list)
    bptt_slots: int | None = None

    def to_json(self) -> dict:
        return {"pending": [list(p) for p in self.pending], "resume_sweep": self.resume_sweep,
                "partitions": self.partitions, "carry": [list(c) for c in self.carry],
                "bptt_slots": self.bptt_slots}

    @classmethod
    def from_json(cls, data, num_sequences: int, max_sweep: int) -> "ElasticPlan":
        """A plan from a checkpoint (untrusted): every number typed and in range."""
        def fail(what):
            return ValueError(f"checkpoint field 'elastic': {what}")

        def ints(v, n, what):
            if (not isinstance(v, (list, tuple)) or len(v) != n
                    or any(isinstance(x, bool) or not isinstance(x, int) for x in v)):
                raise fail(f"{what}: expected {n} integers, found {v!r}")
            return tuple(int(x) for x in v)

        if not isinstance(data, dict):
            raise fail(f"expected a dict, found {type(data).__name__}")
        pending: list = []
        for k, p in enumerate(data.get("pending") or []):
            s, a, b = ints(p, 3, f"pending[{k}]")
            if not (0 <= s <= max_sweep and 0 <= a < b <= num_sequences):
                raise fail(f"pending[{k}] = {list(p)} is out of range")
            if pending and ((s, a) < pending[-1][:2] or (s == pending[-1][0] and a < pending[-1][2])):
                raise fail(f"pending[{k}] is out of order or overlaps the one before")
            pending.append((s, a, b))
        (k_sweep,) = ints([data.get("resume_sweep")], 1, "resume_sweep")
        (m,) = ints([data.get("partitions")], 1, "partitions")
        if not 0 <= k_sweep <= max_sweep + 1 or m < 1 or (pending and pending[-1][0] >= k_sweep):
            raise fail(f"resume_sweep {k_sweep} / partitions {m} out of range")
        carry = [ints(c, 3, f"carry[{k}]") for k, c in enumerate(data.get("carry") or [])]
        for k, (s, p, o) in enumerate(carry):
            if not (0 <= s <= max_sweep and 0 <= p < num_sequences and o >= 0):
                raise fail(f"carry[{k}] = {[s, p, o]} is out of range")
        slots = data.get("bptt_slots")
        if slots is not None:
            (slots,) = ints([slots], 1, "bptt_slots")
            if slots < 1:
                raise fail("bptt_slots must be >= 1")
        return cls(pending, k_sweep, m, carry, slots)

    def same_job(self, other: "ElasticPlan") -> bool:
        return self.to_json() == other.to_json()


@dataclass
class Run:
    """Partition j's part of ``pending``: per sweep, the original positions it delivers."""
    groups: list          # [(sweep, positions array)], in delivery order
    offsets: list         # run position at which each group starts
    carry: list           # the (sweep, position, offset) this partition continues

    @property
    def length(self) -> int:
        return self.offsets[-1] + len(self.groups[-1][1]) if self.groups else 0

    def locate(self, run_position: int) -> tuple[int, int]:
        """(group, index in the group) of a run position; (len(groups), 0) at the end."""
        for g in range(len(self.groups)):
            if run_position < self.offsets[g] + len(self.groups[g][1]):
                return g, run_position - self.offsets[g]
        return len(self.groups), 0


def _virtual(pending: list, cum_of) -> tuple[list, np.ndarray, int]:
    """The pending positions laid end to end: per stretch (sweep, positions) and the sample
    each position starts at in that virtual order."""
    parts, starts, base = [], [], 0
    for s, a, b in pending:
        cum = cum_of(s)
        pos = np.arange(a, b, dtype=np.int64)
        parts.append((s, pos))
        starts.append(base + (cum[a:b] - cum[a]))
        base += int(cum[b] - cum[a])
    return parts, (np.concatenate(starts) if starts else np.zeros(0, np.int64)), base


def cut_run(plan: ElasticPlan, cum_of, j: int) -> Run:
    """Partition j's run: the pending positions whose virtual first sample falls in
    [j*T/M, (j+1)*T/M) (by count when nothing has samples), grouped by sweep."""
    m = plan.partitions
    parts, starts, total = _virtual(plan.pending, cum_of)
    count = len(starts)
    if total == 0:
        lo, hi = count * j // m, count * (j + 1) // m
    else:
        lo = int(np.searchsorted(starts, j * total / m, side="left")) if j else 0
        hi = int(np.searchsorted(starts, (j + 1) * total / m, side="left")) if j + 1 < m else count
    groups: list = []
    offsets: list = []
    at = run = 0
    for s, pos in parts:
        a, b = max(lo - at, 0), min(hi - at, len(pos))
        at += len(pos)
        if a >= b:
            continue
        if groups and groups[-1][0] == s:
            groups[-1] = (s, np.concatenate([groups[-1][1], pos[a:b]]))
        else:
            groups.append((s, pos[a:b]))
            offsets.append(run)
        run += b - a
    carry = [tuple(c) for k, c in enumerate(plan.carry) if k % m == j]
    return Run(groups, offsets, carry)


@dataclass(frozen=True)
class OldPartition:
    """What one old partition's checkpoint says it delivered."""
    sweep: int
    position: int                # in the sweep's order (ordinary phase)
    run_position: int | None     # not None: still in the job's pending run, this far
    started: bool                # False: it had taken nothing (no partition yet)
    bptt: list                   # [(sweep, position, offset)] waiting in its slots
    bptt_slots: int | None


def plan_resume(old: list, old_plan: ElasticPlan | None, n_old: int, m_new: int, cum_of, *,
                num_sequences: int, sweep_samples: int, max_sweeps: int | None,
                max_samples: int | None) -> ElasticPlan:
    """The plan for M partitions from the checkpoints of all N old ones (``old[i]`` is partition
    i's, in order). ``old_plan``: the plan the old job itself ran on (it was resized before)."""
    k_old = old_plan.resume_sweep if old_plan is not None else 0
    ordinary = [o.sweep for o in old if o.started and o.run_position is None]
    s_max = max(ordinary) if ordinary else k_old - 1
    sweeps = sorted({p[0] for p in (old_plan.pending if old_plan else [])} | set(range(k_old, s_max + 1)))
    todo = {s: np.zeros(num_sequences, dtype=bool) for s in sweeps}
    if old_plan is not None:
        for s, a, b in old_plan.pending:
            todo[s][a:b] = True
    for s in range(k_old, s_max + 1):
        todo[s][:] = True
    runs = [cut_run(old_plan, cum_of, i) if old_plan is not None else None for i in range(n_old)]
    carry = []
    for i, o in enumerate(old):
        run = runs[i]
        if o.started and run is not None:  # what of the run it delivered
            upto = run.length if o.run_position is None else o.run_position
            for (s, pos), off in zip(run.groups, run.offsets):
                todo[s][pos[:max(0, upto - off)]] = False
        if not o.started:  # it took nothing: its begun BPTT sequences are still to continue
            if run is not None:
                carry.extend(run.carry)
            continue
        if o.run_position is None:
            for s in range(k_old, o.sweep + 1):
                lo, hi = share_bounds(cum_of(s), n_old, i)
                todo[s][lo:(hi if s < o.sweep else o.position)] = False
        for s, p, off in o.bptt:
            if off > 0:
                carry.append((s, p, off))
            elif s in todo:
                todo[s][p] = True
    # a not-started partition's run is still pending (it was never marked delivered above)
    for s in sweeps:  # what the limits would never deliver
        if max_sweeps is not None and s >= max_sweeps:
            todo[s][:] = False
        if max_samples is not None:
            cum = cum_of(s)
            todo[s] &= (s * sweep_samples + cum[:-1]) < max_samples
    k_new = s_max + 1
    while k_new - 1 >= k_old and k_new - 1 in todo and todo[k_new - 1].all() and not any(
            c[0] == k_new - 1 for c in carry):
        k_new -= 1
    pending: list = []
    for s in sweeps:
        if s >= k_new:
            continue
        mask = todo[s]
        if not mask.any():
            continue
        edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.view(np.int8), [0]])))
        pending.extend((s, int(a), int(b)) for a, b in zip(edges[::2], edges[1::2]))
    carry.sort()
    slots = max((o.bptt_slots or 0 for o in old), default=0) or (old_plan.bptt_slots if old_plan else None)
    return ElasticPlan(pending, k_new, int(m_new), carry, slots or None)


# -- whole-chunk partitions (ChunkPartition) --------------------------------------------------------
#
# A job of N ``ChunkPartition`` readers has N independent sources, each sweeping its own chunks in
# its own order. Resized to M, the chunks belong to other partitions, so what is left cannot be
# stretches of one sweep order: it is the rest of each old partition's own sweep, kept as
# ``segments`` (n, k, sweep, start, stop, level) of partition k-of-n's order, and every new
# partition delivers the pending sequences of the chunks it now owns, in that order. A resize
# during that run adds a ``cut``: per partition of that time, how many of the sequences its run
# held it had delivered (runs are the pending sequences its chunks hold, so a rank in that list
# says which). After the run, ordinary sweeps of each new partition's own chunks from
# ``resume_sweep`` on; each old partition's sweeps up to it are owed in full, so partitions that
# were a sweep apart all end the same sweep.

@dataclass
class ChunkPlan:
    """An elastic plan over ``ChunkPartition`` readers (see above); same interface as ElasticPlan."""
    segments: list
    cuts: list
    resume_sweep: int
    partitions: int
    carry: list = field(default_factory=list)
    bptt_slots: int | None = None

    def to_json(self) -> dict:
        return {"kind": "chunks", "segments": [list(s) for s in self.segments],
                "cuts": [[n, list(r)] for n, r in self.cuts], "resume_sweep": self.resume_sweep,
                "partitions": self.partitions}

    @classmethod
    def from_json(cls, data, max_sweep: int) -> "ChunkPlan":
        def fail(what):
            return ValueError(f"checkpoint field 'elastic': {what}")

        def count(v, what, lo=0):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise fail(f"{what}: expected an integer >= {lo}, found {v!r}")
            return v

        segments = []
        for i, seg in enumerate(data.get("segments") or []):
            if not isinstance(seg, (list, tuple)) or len(seg) != 6:
                raise fail(f"segments[{i}]: expected [n, k, sweep, start, stop, level], found {seg!r}")
            n, k, s, a, b, level = (count(v, f"segments[{i}]") for v in seg)
            if not (n >= 1 and k < n and s <= max_sweep and a < b):
                raise fail(f"segments[{i}] = {list(seg)} is out of range")
            segments.append((n, k, s, a, b, level))
        cuts = []
        for i, cut in enumerate(data.get("cuts") or []):
            if not isinstance(cut, (list, tuple)) or len(cut) != 2 or not isinstance(cut[1], (list, tuple)):
                raise fail(f"cuts[{i}]: expected [n, [delivered per partition]], found {cut!r}")
            n = count(cut[0], f"cuts[{i}]", 1)
            ranks = tuple(count(r, f"cuts[{i}]") for r in cut[1])
            if len(ranks) != n:
                raise fail(f"cuts[{i}]: {len(ranks)} counts for {n} partitions")
            cuts.append((n, ranks))
        if any(seg[5] > len(cuts) for seg in segments):
            raise fail("a segment's level is beyond the cuts")
        k_sweep = count(data.get("resume_sweep"), "resume_sweep")
        m = count(data.get("partitions"), "partitions", 1)
        return cls(segments, cuts, k_sweep, m)

    def same_job(self, other) -> bool:
        return isinstance(other, ChunkPlan) and self.to_json() == other.to_json()


def chunk_pending(plan: ChunkPlan, order_of, owner_of) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pending sequences of a chunk plan, in delivery order: (sweep, inner chunk id, index)."""
    empty = np.zeros(0, dtype=np.int64)
    sw, cid, idx = empty, empty, empty
    for level in range(len(plan.cuts) + 1):
        add = [(s, *order_of(n, k, s), a, b) for n, k, s, a, b, lv in plan.segments if lv == level]
        if add:
            sw = np.concatenate([sw] + [np.full(b - a, s, dtype=np.int64) for s, _, _, a, b in add])
            cid = np.concatenate([cid] + [c[a:b] for _, c, _, a, b in add])
            idx = np.concatenate([idx] + [i[a:b] for _, _, i, a, b in add])
        if level < len(plan.cuts) and len(cid):
            n, ranks = plan.cuts[level]
            owner = owner_of(n)[cid]
            rank = _rank_within(owner)
            keep = rank >= np.asarray(ranks, dtype=np.int64)[owner]
            sw, cid, idx = sw[keep], cid[keep], idx[keep]
    return sw, cid, idx


def _rank_within(owner: np.ndarray) -> np.ndarray:
    """For each element, how many earlier elements have the same owner."""
    order = np.argsort(owner, kind="stable")
    sorted_owner = owner[order]
    starts = np.flatnonzero(np.concatenate([[True], sorted_owner[1:] != sorted_owner[:-1]]))
    first = np.repeat(starts, np.diff(np.append(starts, len(owner))))
    rank = np.empty(len(owner), dtype=np.int64)
    rank[order] = np.arange(len(owner)) - first
    return rank


def cut_chunk_run(plan: ChunkPlan, order_of, owner_of, j: int, local_of=None) -> Run:
    """Partition j's run: the pending sequences of the chunks it owns, grouped by sweep; ``groups``
    hold (sweep, run positions, local chunk ids, indexes). ``local_of``: inner id -> its chunk id."""
    sw, cid, idx = chunk_pending(plan, order_of, owner_of)
    mine = owner_of(plan.partitions)[cid] == j if len(cid) else np.zeros(0, dtype=bool)
    sw, cid, idx = sw[mine], cid[mine], idx[mine]
    groups, offsets = [], []
    if len(sw):
        edges = np.flatnonzero(np.concatenate([[True], sw[1:] != sw[:-1], [True]]))
        for a, b in zip(edges[:-1], edges[1:]):
            local = cid[a:b] if local_of is None else local_of[cid[a:b]]
            groups.append((int(sw[a]), np.arange(a, b, dtype=np.int64), local, idx[a:b]))
            offsets.append(int(a))
    return Run(groups, offsets, [])


def plan_chunk_resume(old: list, old_plan: ChunkPlan | None, n_old: int, m_new: int, order_of, owner_of, *,
                      max_sweeps: int | None) -> ChunkPlan:
    """The chunk plan for M partitions from the checkpoints of all N old ``ChunkPartition``
    sources (``old[k]`` is partition k's; positions are in its own sweep orders)."""
    k_old = old_plan.resume_sweep if old_plan is not None else 0
    nxt = []
    for k, o in enumerate(old):
        if o.started and o.run_position is None:
            s, p = o.sweep, o.position
            if p >= len(order_of(n_old, k, s)[0]):
                s, p = s + 1, 0
            nxt.append((s, p))
        else:
            nxt.append((k_old, 0))
    k_new = max([k_old] + [s + (1 if p else 0) for s, p in nxt])
    if max_sweeps is not None:
        k_new = min(k_new, max(max_sweeps, k_old))
    cuts = list(old_plan.cuts) if old_plan is not None else []
    segments = list(old_plan.segments) if old_plan is not None else []
    if old_plan is not None:
        ranks = []
        for k, o in enumerate(old):
            if not o.started:
                ranks.append(0)
            elif o.run_position is not None:
                ranks.append(int(o.run_position))
            else:
                ranks.append(cut_chunk_run(old_plan, order_of, owner_of, k).length)
        cuts.append((n_old, tuple(ranks)))
    level = len(cuts)
    for k, (s0, p0) in enumerate(nxt):
        for s in range(s0, k_new):
            length = len(order_of(n_old, k, s)[0])
            a = p0 if s == s0 else 0
            if a < length:
                segments.append((n_old, k, s, a, length, level))
    return ChunkPlan(segments, cuts, k_new, int(m_new))


def order_states(states: list) -> list:
    """Every partition's state in partition order, whatever order they come in (files named
    ``state-10.json`` sort before ``state-2.json``): each sits at the index it names (its
    ``chunk_partition`` index for ChunkPartition readers, else its ``partition`` index), None where
    no state names a partition. A state with no partition (its source had taken nothing) names
    none and is left out. Two states for one partition, or states of different partition counts,
    are an error."""
    placed: dict = {}
    count = None
    for k, st in enumerate(states):
        if not isinstance(st, dict):
            raise ValueError(f"state {k}: a checkpoint must be a dict, not {type(st).__name__}")
        where = st.get("chunk_partition") or st.get("partition")
        if where is None:
            continue
        if (not isinstance(where, (list, tuple)) or len(where) != 2
                or any(isinstance(v, bool) or not isinstance(v, int) for v in where) or not 0 <= where[1] < where[0]):
            raise ValueError(f"state {k}: checkpoint field 'partition': expected [count, index], found {where!r}")
        n, i = where
        if count is not None and n != count:
            raise ValueError(f"state {k} is of a job of {n} partitions, an earlier one of {count}")
        count = n
        if i in placed:
            raise ValueError(f"states {placed[i][0]} and {k} are both of partition {i} of {n}")
        placed[i] = (k, st)
    if count is None:
        return [None]
    return [placed[i][1] if i in placed else None for i in range(count)]
