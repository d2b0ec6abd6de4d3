"""MinibatchSource checkpoints as untrusted input.

A checkpoint is JSON that users keep on disk, copy between jobs and sometimes edit; what it
says ends up as positions that the compiled pick and gather kernels index with. So every
field is checked for type and range before anything is restored, and a bad one is a
``ValueError`` naming the field, never a wrong minibatch, a silent end of the data or a
crash. (The kernels check their inputs too: this is the first line, that the second.)

``check_state`` knows the schema; ``MinibatchSource.restore_from_checkpoint`` calls it with the
facts of the source being restored (its sweep size, limits, sequence count).

A checkpoint is also bound to what made it: the fingerprint (data sizes, randomization), the
ChunkPartition reader, the truncated-BPTT length and a mixture's data sets in order must be
the restoring source's, and the partition it was taken on must be the one the source reads
(``partition_mismatch``; checked once that is known). Any of them otherwise would continue a
different run from the checkpoint's positions: skip the rest of a sweep, drop the sequences
BPTT had begun, or draw another data set's proportions. Such a mismatch is a ``UsageError``
naming the field. States written before a field existed are accepted where the old fields
decide (see ``_check_bptt_setting`` and ``_check_members``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from recordkit.errors import UsageError

STATE_VERSION = 1

# No real job gets near these; they keep arithmetic on restored values far from overflow.
MAX_SWEEP = 1 << 40
MAX_COUNT = 1 << 62
MAX_BPTT_SLOTS = 1 << 20
MAX_MEMBERS = 1 << 16
MAX_NAME = 4096


@dataclass(frozen=True)
class SourceFacts:
    """What a restore needs to know about the source to judge a checkpoint's numbers."""
    fingerprint: list
    num_sequences: int          # positions per sweep
    sweep_samples: int
    longest_sequence: int       # index estimate, bounds a BPTT offset
    max_sweeps: int | None
    max_samples: int | None
    truncation_length: int = 0
    chunk_partition: tuple[int, int] | None = None  # (readers, index) of a ChunkPartition reader
    members: list | None = None                     # a mixture's data sets (``Mixture.members``)


@dataclass(frozen=True)
class ReadPosition:
    """Where a source is in its data, as a value: the sweep, the cursor (position in the sweep),
    the partition it reads (None before its first minibatch), whether its data has ended, the
    epoch, and what it delivered. ``save_position`` and ``restore_position`` turn it into a
    checkpoint's fields and back; the source only reads and sets it (``MinibatchSource.read_position``)."""
    sweep: int
    position: int
    partition: tuple[int, int] | None
    exhausted: bool
    epoch: int
    samples_delivered: int
    minibatches_delivered: int


def save_position(pos: ReadPosition) -> dict:
    """The checkpoint fields of a read position (JSON-able)."""
    return {"sweep": int(pos.sweep), "position": int(pos.position),
            "partition": None if pos.partition is None else [int(pos.partition[0]), int(pos.partition[1])],
            "exhausted": bool(pos.exhausted), "epoch": int(pos.epoch),
            "samples_delivered": int(pos.samples_delivered), "minibatches_delivered": int(pos.minibatches_delivered)}


def restore_position(state: dict, facts: SourceFacts) -> ReadPosition:
    """The read position a checkpoint holds, every field typed and in range for this source (the
    position within the sweep is checked again against the worker's share: ``check_position``)."""
    for field in ("sweep", "position", "partition", "exhausted"):
        if field not in state:
            raise invalid_field(field, "missing")
    exhausted = state["exhausted"]
    if not isinstance(exhausted, bool):
        raise invalid_field("exhausted", f"expected true or false, found {exhausted!r}")
    partition = state["partition"]
    if partition is not None:
        partition = _pair(partition, "partition")
    return ReadPosition(_int(state, "sweep", 0, last_sweep(facts)), _int(state, "position", 0, facts.num_sequences),
                        partition, exhausted, _int(state, "epoch", 0, MAX_COUNT, default=0),
                        _int(state, "samples_delivered", 0, MAX_COUNT, default=0),
                        _int(state, "minibatches_delivered", 0, MAX_COUNT, default=0))


@dataclass(frozen=True)
class CheckedState(ReadPosition):
    """A checkpoint's read position and BPTT slots, checked."""
    bptt: dict | None = None


def invalid_field(field: str, what: str) -> ValueError:
    return ValueError(f"checkpoint field '{field}': {what}")


def _mismatch(field: str, what: str) -> UsageError:
    """A well-formed checkpoint of another setting than the restoring source's."""
    return UsageError(f"checkpoint field '{field}': {what}")


def _pair(value, field: str) -> tuple[int, int]:
    """``[count, index]`` with 0 <= index < count (a partition, a ChunkPartition reader)."""
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) for v in value)):
        raise invalid_field(field, f"expected [count, index], found {value!r}")
    n, i = value
    if not 1 <= n <= MAX_COUNT or not 0 <= i < n:
        raise invalid_field(field, f"index {i} of {n} partitions is out of range")
    return n, i


def _int(state: dict, field: str, lo: int, hi: int, default=None) -> int:
    value = state.get(field, default)
    if value is None and default is not None:
        value = default
    # bool is an int subclass; 1.5 and "3" are not counts
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_field(field, f"expected an integer, found {value!r}")
    if not lo <= value <= hi:
        raise invalid_field(field, f"{value} is out of range [{lo}, {hi}]")
    return value


def check_state(state, facts: SourceFacts) -> CheckedState:
    """Every field of ``state`` typed and in range for this source (positions within the sweep
    are checked again against the worker's share once the sweep is built: ``check_position``)."""
    if not isinstance(state, dict):
        raise ValueError(f"a checkpoint must be a dict, not {type(state).__name__}")
    if state.get("recordkit_state") != STATE_VERSION:
        raise ValueError("not a recordkit MinibatchSource checkpoint (or from another version)")
    # the named settings first: their message says what differs, the fingerprint's only that something does
    _check_chunk_partition(state.get("chunk_partition"), facts.chunk_partition)
    _check_members(state, facts.members)
    if state.get("fingerprint") != facts.fingerprint:
        raise ValueError("the checkpoint was made with other data or another randomization setting")
    pos = restore_position(state, facts)
    bptt = state.get("bptt")
    if bptt is not None:
        bptt = _check_bptt(bptt, facts, last_sweep(facts))
    _check_bptt_setting(state, bptt, facts.truncation_length)
    return CheckedState(**vars(pos), bptt=bptt)


def last_sweep(facts: SourceFacts) -> int:
    """The highest sweep index a checkpoint of this source can name."""
    last = MAX_SWEEP
    if facts.max_sweeps is not None:
        last = facts.max_sweeps
    if facts.max_samples is not None and facts.sweep_samples > 0:
        last = min(last, facts.max_samples // facts.sweep_samples + 1)
    return last


def partition_mismatch(taken: tuple, reads: tuple) -> UsageError:
    """A checkpoint of partition ``taken`` (count, index) restored where the source reads ``reads``:
    its position lies in another share of the sweep, so reading on would skip this one's rest."""
    return _mismatch("partition", f"the checkpoint was taken on partition {taken[1]} of {taken[0]}, this source "
                                  f"reads partition {reads[1]} of {reads[0]}; restore that partition's own "
                                  f"state, or the list of every partition's state to resume on another split")


def _check_chunk_partition(said, mine) -> None:
    """The ChunkPartition reader a checkpoint was taken on must be this source's (1 of 1 is the
    whole data, the same as none)."""
    said = None if said is None else _pair(said, "chunk_partition")
    if said == mine or {said, mine} <= {None, (1, 0)}:
        return
    if said is None:
        raise _mismatch("chunk_partition", f"missing: the checkpoint does not say which ChunkPartition reader it "
                                           f"was taken on, this source reads {mine[1]} of {mine[0]}")
    where = "no ChunkPartition" if mine is None else f"{mine[1]} of {mine[0]}"
    hint = "" if mine is None else ("; to change the number of readers, restore from the list of every "
                                    "reader's state")
    raise _mismatch("chunk_partition", f"the checkpoint was taken on ChunkPartition {said[1]} of {said[0]}, "
                                       f"this source reads {where}{hint}")


def _check_bptt_setting(state: dict, bptt, truncation_length: int) -> None:
    """A checkpoint continues only under its own ``truncation_length``: slots hold sequences cut
    at its steps, and without truncated BPTT they would be dropped. A state from before the field
    was written says nothing of the length: refused only when it holds split sequences and this
    source has no truncated BPTT to continue them."""
    if "truncation_length" not in state:
        if bptt is not None and not truncation_length:
            raise _mismatch("bptt", "the checkpoint holds sequences that truncated BPTT split across "
                                    "minibatches, this source has no truncation_length")
        return
    taken = _int(state, "truncation_length", 0, MAX_COUNT)
    if taken != truncation_length:
        said = lambda n: f"truncation_length {n}" if n else "no truncated BPTT"
        raise _mismatch("truncation_length", f"the checkpoint was taken with {said(taken)}, this source has "
                                             f"{said(truncation_length)}")


def _member_text(m: dict) -> str:
    how = f"weight {m['weight']:.6g}" if "weight" in m else f"repeats {m['repeats']:.6g}"
    return f"{m['name']} ({how}, {m['sequences']} sequences, {m['per_sweep']} per sweep)"


def _check_member(m, k: int) -> dict:
    where = f"data set {k}"
    if not isinstance(m, dict) or set(m) not in ({"name", "sequences", "per_sweep", "weight"},
                                                 {"name", "sequences", "per_sweep", "repeats"}):
        raise invalid_field("mixture",
                            f"{where}: expected {{name, sequences, per_sweep, weight or repeats}}, found {m!r}")
    if not isinstance(m["name"], str) or len(m["name"]) > MAX_NAME:
        raise invalid_field("mixture", f"{where}: the name must be a string of at most {MAX_NAME} characters")
    for field in ("sequences", "per_sweep"):
        n = m[field]
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_COUNT:
            raise invalid_field("mixture", f"{where}: {field} must be an integer in [0, {MAX_COUNT}], found {n!r}")
    value = m.get("weight", m.get("repeats"))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise invalid_field("mixture", f"{where}: expected a finite number >= 0, found {value!r}")
    return m


def _check_members(state: dict, mine: list | None) -> None:
    """A mixture's checkpoint names its data sets in order, each with its weight (or repeats):
    two sets of the same sizes swapped, or other weights, pass the fingerprint but draw other
    data. A state from before the field was written is judged by the fingerprint alone."""
    if "mixture" not in state:
        return
    said = state["mixture"]
    if said is None:
        if mine is not None:
            raise _mismatch("mixture", f"the checkpoint was taken on no mixture, this source reads a mixture of "
                                       f"{len(mine)} data sets")
        return
    if not isinstance(said, list) or not 0 < len(said) <= MAX_MEMBERS:
        raise invalid_field("mixture", f"expected a list of 1..{MAX_MEMBERS} data sets")
    said = [_check_member(m, k) for k, m in enumerate(said)]
    if mine is None:
        raise _mismatch("mixture", f"the checkpoint was taken on a mixture of {len(said)} data sets, this source "
                                   f"reads no mixture")
    if len(said) != len(mine):
        raise _mismatch("mixture", f"the checkpoint's mixture has {len(said)} data sets, this source's has "
                                   f"{len(mine)}")
    for k, (a, b) in enumerate(zip(said, mine)):
        same = (a["name"], a["sequences"], a["per_sweep"]) == (b["name"], b["sequences"], b["per_sweep"]) and (
            a.keys() == b.keys() and math.isclose(a.get("weight", a.get("repeats")),
                                                  b.get("weight", b.get("repeats")), rel_tol=1e-9))
        if not same:
            raise _mismatch("mixture", f"data set {k} of the checkpoint's mixture is {_member_text(a)}, this "
                                       f"source's is {_member_text(b)}")


def check_position(position: int, lo: int, hi: int) -> int:
    """A restored position must lie in the restoring worker's share ``[lo, hi]`` of its sweep."""
    if not lo <= position <= hi:
        raise invalid_field("position", f"{position} is outside this partition's share [{lo}, {hi}] of the sweep")
    return position


def _check_bptt(bptt, facts: SourceFacts, last_sweep: int) -> dict:
    """``{"slots": [[[sweep, position, offset], ...], ...]}``: the sequences each BPTT slot holds."""
    slots = bptt.get("slots") if isinstance(bptt, dict) else None
    if not isinstance(slots, list) or not 0 < len(slots) <= MAX_BPTT_SLOTS:
        raise invalid_field("bptt", f"expected {{'slots': [...]}} with 1..{MAX_BPTT_SLOTS} slots")
    for s, entries in enumerate(slots):
        if not isinstance(entries, list):
            raise invalid_field("bptt", f"slot {s} is not a list")
        for e, entry in enumerate(entries):
            where = f"slot {s}, entry {e}"
            if (not isinstance(entry, (list, tuple)) or len(entry) != 3
                    or any(isinstance(v, bool) or not isinstance(v, int) for v in entry)):
                raise invalid_field("bptt", f"{where}: expected [sweep, position, offset], found {entry!r}")
            sweep, position, offset = entry
            if not 0 <= sweep <= last_sweep:
                raise invalid_field("bptt", f"{where}: sweep {sweep} is out of range [0, {last_sweep}]")
            if not 0 <= position < facts.num_sequences:
                raise invalid_field("bptt", f"{where}: position {position} is out of range [0, {facts.num_sequences})")
            # an entry past a slot's head may hold a begun sequence after an elastic resume
            if not 0 <= offset <= max(facts.longest_sequence, 0):
                raise invalid_field("bptt", f"{where}: offset {offset} is out of range")
    return bptt
