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
        pending = []
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


def _virtual(pending: list, cum_of) -> tuple[list, np.ndarray]:
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
    groups, offsets, at, run = [], [], 0, 0
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
    pending = []
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
