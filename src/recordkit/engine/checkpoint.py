"""MinibatchSource checkpoints as untrusted input.

A checkpoint is JSON that users keep on disk, copy between jobs and sometimes edit; what it
says ends up as positions that the compiled pick and gather kernels index with. So every
field is checked for type and range before anything is restored, and a bad one is a
``ValueError`` naming the field, never a wrong minibatch, a silent end of the data or a
crash. (The kernels check their inputs too: this is the first line, that the second.)

``check_state`` knows the schema; ``MinibatchSource.restore_from_checkpoint`` calls it with the
facts of the source being restored (its sweep size, limits, sequence count).
"""
from __future__ import annotations

from dataclasses import dataclass

STATE_VERSION = 1

# No real job gets near these; they keep arithmetic on restored values far from overflow.
MAX_SWEEP = 1 << 40
MAX_COUNT = 1 << 62
MAX_BPTT_SLOTS = 1 << 20


@dataclass(frozen=True)
class SourceFacts:
    """What a restore needs to know about the source to judge a checkpoint's numbers."""
    fingerprint: list
    num_sequences: int          # positions per sweep
    sweep_samples: int
    longest_sequence: int       # index estimate, bounds a BPTT offset
    max_sweeps: int | None
    max_samples: int | None


@dataclass(frozen=True)
class CheckedState:
    sweep: int
    position: int
    partition: tuple[int, int] | None
    exhausted: bool
    epoch: int
    samples_delivered: int
    minibatches_delivered: int
    bptt: dict | None


def _fail(field: str, what: str) -> ValueError:
    return ValueError(f"checkpoint field '{field}': {what}")


def _int(state: dict, field: str, lo: int, hi: int, default=None) -> int:
    value = state.get(field, default)
    if value is None and default is not None:
        value = default
    # bool is an int subclass; 1.5 and "3" are not counts
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(field, f"expected an integer, found {value!r}")
    if not lo <= value <= hi:
        raise _fail(field, f"{value} is out of range [{lo}, {hi}]")
    return value


def check_state(state, facts: SourceFacts) -> CheckedState:
    """Every field of ``state`` typed and in range for this source (positions within the sweep
    are checked again against the worker's share once the sweep is built: ``check_position``)."""
    if not isinstance(state, dict):
        raise ValueError(f"a checkpoint must be a dict, not {type(state).__name__}")
    if state.get("recordkit_state") != STATE_VERSION:
        raise ValueError("not a recordkit MinibatchSource checkpoint (or from another version)")
    if state.get("fingerprint") != facts.fingerprint:
        raise ValueError("the checkpoint was made with other data or another randomization setting")
    for field in ("sweep", "position", "partition", "exhausted"):
        if field not in state:
            raise _fail(field, "missing")
    exhausted = state["exhausted"]
    if not isinstance(exhausted, bool):
        raise _fail("exhausted", f"expected true or false, found {exhausted!r}")
    partition = state["partition"]
    if partition is not None:
        if (not isinstance(partition, (list, tuple)) or len(partition) != 2
                or any(isinstance(v, bool) or not isinstance(v, int) for v in partition)):
            raise _fail("partition", f"expected [num_partitions, index], found {partition!r}")
        n, i = partition
        if not 1 <= n <= MAX_COUNT or not 0 <= i < n:
            raise _fail("partition", f"index {i} of {n} partitions is out of range")
        partition = (n, i)
    last = last_sweep(facts)
    sweep = _int(state, "sweep", 0, last)
    position = _int(state, "position", 0, facts.num_sequences)
    epoch = _int(state, "epoch", 0, MAX_COUNT, default=0)
    samples = _int(state, "samples_delivered", 0, MAX_COUNT, default=0)
    minibatches = _int(state, "minibatches_delivered", 0, MAX_COUNT, default=0)
    bptt = state.get("bptt")
    if bptt is not None:
        bptt = _check_bptt(bptt, facts, last)
    return CheckedState(sweep, position, partition, exhausted, epoch, samples, minibatches, bptt)


def last_sweep(facts: SourceFacts) -> int:
    """The highest sweep index a checkpoint of this source can name."""
    last = MAX_SWEEP
    if facts.max_sweeps is not None:
        last = facts.max_sweeps
    if facts.max_samples is not None and facts.sweep_samples > 0:
        last = min(last, facts.max_samples // facts.sweep_samples + 1)
    return last


def check_position(position: int, lo: int, hi: int) -> int:
    """A restored position must lie in the restoring worker's share ``[lo, hi]`` of its sweep."""
    if not lo <= position <= hi:
        raise _fail("position", f"{position} is outside this partition's share [{lo}, {hi}] of the sweep")
    return position


def _check_bptt(bptt, facts: SourceFacts, last_sweep: int) -> dict:
    """``{"slots": [[[sweep, position, offset], ...], ...]}``: the sequences each BPTT slot holds."""
    slots = bptt.get("slots") if isinstance(bptt, dict) else None
    if not isinstance(slots, list) or not 0 < len(slots) <= MAX_BPTT_SLOTS:
        raise _fail("bptt", f"expected {{'slots': [...]}} with 1..{MAX_BPTT_SLOTS} slots")
    for s, entries in enumerate(slots):
        if not isinstance(entries, list):
            raise _fail("bptt", f"slot {s} is not a list")
        for e, entry in enumerate(entries):
            where = f"slot {s}, entry {e}"
            if (not isinstance(entry, (list, tuple)) or len(entry) != 3
                    or any(isinstance(v, bool) or not isinstance(v, int) for v in entry)):
                raise _fail("bptt", f"{where}: expected [sweep, position, offset], found {entry!r}")
            sweep, position, offset = entry
            if not 0 <= sweep <= last_sweep:
                raise _fail("bptt", f"{where}: sweep {sweep} is out of range [0, {last_sweep}]")
            if not 0 <= position < facts.num_sequences:
                raise _fail("bptt", f"{where}: position {position} is out of range [0, {facts.num_sequences})")
            # an entry past a slot's head may hold a begun sequence after an elastic resume
            if not 0 <= offset <= max(facts.longest_sequence, 0):
                raise _fail("bptt", f"{where}: offset {offset} is out of range")
    return bptt
