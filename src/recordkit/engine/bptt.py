"""Truncated back-propagation through time: long sequences cut across minibatches.

CNTK's TruncatedBPTTPacker: a minibatch of size N with truncation length L has
``max(1, N // L)`` parallel slots of L time steps. Each slot carries a stream of
sequences: a sequence longer than what is left in the slot continues in the same
slot in the next minibatch, and when one ends the next sequence starts right after
it. ``Minibatch.extra`` tells the model where state must be carried over:
``continues[s]`` (slot s starts with the rest of a sequence from the previous
minibatch) and ``sequence_start[s, t]`` (a new sequence begins at step t).
All streams must have the same length in every sequence; sparse streams are
delivered dense here, as CNTK's composite reader does in this mode.

Why it is built this way: pulling one sequence per pick (``take_sequences``) and
copying each through NumPy/SciPy cost ~100 us a sequence, 28x the plain minibatch path. The
slots are now flat arrays of pending entries (chunk, sequence, offset, length, key, sweep,
position), sorted by slot. A refill asks ``_gather.bptt_need`` how many sequences the slots
will take (computed from the upcoming positions' lengths), pulls exactly that many in one
``take_sequences`` (so the source's cursor, sweeps and exhaustion end where one-at-a-time pulls would
leave them) and deals them with ``bptt_assign``; assembly is ``bptt_plan`` (flags, keys,
offsets) plus one copy kernel per stream straight from the chunks' columns. The per-sequence
path it replaced is kept in tests/bptt_reference.py, and the tests compare the two.
"""
from __future__ import annotations

import numpy as np

from recordkit.engine import _gather
from recordkit.engine.minibatch import Minibatch, StreamBatch, prepared_views

_FIELDS = ("slot", "cid", "j", "off", "len", "key", "sweep", "pos")
SLOT, CID, J, OFF, LEN, KEY, SWEEP, POS = range(len(_FIELDS))


class BpttSlots:
    """The sequences (or their remainders) waiting in each of ``slots`` slots.

    ``_e``: an int64 array (fields of ``_FIELDS``, entries): entries sorted by slot and, within
    a slot, in queue order (keys are uint64 stored as int64); one array, so that keeping,
    merging and sorting entries is one NumPy call each. ``_chunks``: the chunks those entries
    live in, held here so the source may drop them from its own cache."""

    def __init__(self, source, slots: int):
        bytes_streams = [s.name for s in source.streams if s.is_bytes]
        if bytes_streams:  # a bytes stream is one value a sequence: nothing to cut into steps
            from recordkit.errors import UsageError
            raise UsageError(f"truncated BPTT cuts sequences into steps, but bytes stream '{bytes_streams[0]}' "
                             "holds one value per sequence: read it without truncation_length")
        self.source = source
        self.num_slots = int(slots)
        self._e = np.zeros((len(_FIELDS), 0), dtype=np.int64)
        self._chunks: dict = {}

    @property
    def slots(self) -> list:
        """Per slot, its pending entries as (sweep, position, offset) tuples."""
        e = self._e
        out: list[list] = [[] for _ in range(self.num_slots)]
        for s, sw, p, o in zip(e[SLOT].tolist(), e[SWEEP].tolist(), e[POS].tolist(), e[OFF].tolist()):
            out[s].append((sw, p, o))
        return out

    def busy(self) -> bool:
        return self._e.shape[1] > 0

    def state(self) -> dict:
        return {"slots": [[list(t) for t in q] for q in self.slots]}

    @classmethod
    def from_state(cls, source, state) -> "BpttSlots":
        """Slots from a checked checkpoint (``engine/checkpoint.py`` typed and bounded every
        number); what only the data can tell is checked here: the sequence a (sweep, position)
        names must exist (not dropped) and hold more samples than the offset."""
        self = cls(source, len(state["slots"]))
        rows = []
        for s, entries in enumerate(state["slots"]):
            for e, (sweep, position, offset) in enumerate(entries):
                order = source.randomizer.sweep(int(sweep))
                cid, idx = int(order.chunk[position]), int(order.index[position])
                chunk = source.chunk(cid)
                j = source.sequence_index(cid, idx)
                where = f"checkpoint field 'bptt': slot {s}, entry {e}"
                if j < 0:
                    raise ValueError(f"{where}: the sequence at position {position} of sweep {sweep} was dropped "
                                     f"by the reader")
                steps, _ = step_counts(chunk, source.streams)
                _check_equal(chunk, source.streams, np.array([j]))
                if not (0 <= offset < steps[j] or offset == 0):  # a 0-sample sequence waits at offset 0
                    raise ValueError(f"{where}: offset {offset} is not within the sequence's {int(steps[j])} samples")
                self._chunks[cid] = chunk
                rows.append((s, cid, j, int(offset), int(steps[j]), int(chunk.keys.view(np.int64)[j]), int(sweep),
                             int(position)))
        if rows:
            self._e = np.ascontiguousarray(np.array(rows, dtype=np.int64).T)
        return self

    # -- refill ------------------------------------------------------------------------------------
    def _pending(self, length: int) -> np.ndarray:
        e = self._e
        return np.bincount(e[SLOT], weights=e[LEN] - e[OFF], minlength=self.num_slots).astype(np.int64)

    def _refill(self, length: int) -> None:
        """Top every slot up, in slot order, until it holds more than ``length`` samples (or the
        data ends): the sequences one-at-a-time pulls would take, pulled in as few picks as the
        loaded chunks allow."""
        src = self.source
        rem = self._pending(length)
        new = []
        while not src.exhausted:
            need = _gather.bptt_need(rem, length, *src.share_ahead())
            if need == 0:
                break
            picked = src.take_sequences(need)
            cids, js, _, sweeps, positions = picked
            if len(cids) == 0:
                break
            n = len(cids)
            rows = np.empty((len(_FIELDS), n), dtype=np.int64)
            rows[CID], rows[J], rows[OFF], rows[SWEEP], rows[POS] = cids, js, 0, sweeps, positions
            equal = np.empty(n, dtype=bool)
            for cid in dict.fromkeys(cids.tolist()):  # usually one chunk
                at = slice(None) if cids[0] == cids[-1] and (cids == cid).all() else np.flatnonzero(cids == cid)
                chunk = src.chunk(cid)
                counts, eq = step_counts(chunk, src.streams)
                rows[LEN, at] = counts[js[at]]
                rows[KEY, at] = chunk.keys.view(np.int64)[js[at]]
                equal[at] = eq[js[at]]
                self._chunks[cid] = chunk
            if not equal.all():
                i = int(np.argmin(equal))  # the first pulled sequence whose streams differ in length
                _check_equal(self._chunks[int(cids[i])], src.streams, js[i:i + 1])
            rows[SLOT] = _gather.bptt_assign(rem, length, rows[LEN])
            new.append(rows)
        if new:
            e = np.concatenate([self._e] + new, axis=1)
            self._e = np.ascontiguousarray(e[:, np.argsort(e[SLOT], kind="stable")])  # by slot, queue order kept
        src.release_chunks()

    # -- assembly ----------------------------------------------------------------------------------
    def next(self, length: int) -> Minibatch | None:
        src = self.source
        self._refill(length)
        if not self.busy():
            return None
        S = self.num_slots
        e = self._e
        e_t, e_n, new_off, keep, mask, starts, keys, continues, touched = _gather.bptt_plan(
            e[SLOT], e[LEN], e[OFF], e[KEY], S, length)
        held = sorted(self._chunks)  # exactly the chunks of the entries
        chunks = [self._chunks[c] for c in held]
        k = np.zeros(e.shape[1], dtype=np.int64) if len(held) == 1 else np.searchsorted(np.array(held), e[CID])
        data = {spec.name: _fill(spec, src.streams, chunks, k, e, e_t, e_n, S, length, _dtype(src, spec))
                for spec in src.streams}
        e[OFF] = new_off
        self._e = np.ascontiguousarray(e[:, keep])
        still = set(self._e[CID].tolist())
        self._chunks = {c: v for c, v in self._chunks.items() if c in still}
        lengths = mask.sum(axis=1)
        streams = {s.name: StreamBatch(s.name, False, s.dim, lengths, data=data[s.name], mask=mask)
                   for s in src.streams}
        mb = Minibatch(streams, touched.view(np.uint64), lengths, src.at_sweep_end, src.sweep_index,
                       extra={"continues": continues, "sequence_start": starts, "keys": keys.view(np.uint64)})
        src.count_delivered(mb)
        return mb


def _fill(spec, specs, chunks, k, e, e_t, e_n, S, T, dtype) -> np.ndarray:
    """Stream ``spec`` of the minibatch, (S, T, dim), zeros where no sample is.

    Values are copied in the chunks' own dtype and cast afterwards, which is what assigning
    them into an array of ``dtype`` did (densified sparse samples are summed before the cast,
    as scipy's toarray + assignment did)."""
    preps = [prepared_views(c, specs)[spec.name] for c in chunks]  # cached per chunk for all streams
    have = {p[-1] for p in preps}
    if len(have) != 1:
        return _fill_mixed(spec, chunks, k, e, e_t, e_n, S, T, dtype)
    own = have.pop()
    if spec.is_sparse:
        out = np.zeros((S * T, spec.dim), dtype=own)
        _gather.bptt_scatter_sparse([p[0].view(own) for p in preps], [p[1] for p in preps], [p[2] for p in preps],
                                    [p[3] for p in preps], k, e[J], e[OFF], e_t, e_n, e[SLOT], out, T)
        out = out.reshape(S, T, spec.dim)
    else:
        row_bytes = spec.dim * own.itemsize
        out = np.zeros((S * T, row_bytes), dtype=np.uint8)
        _gather.bptt_copy_dense([p[0] for p in preps], [p[1] for p in preps], k, e[J], e[OFF], e_t, e_n,
                                e[SLOT], out, T)
        out = out.view(own).reshape(S, T, spec.dim)
    return out if own == dtype else out.astype(dtype)


def _fill_mixed(spec, chunks, k, e, e_t, e_n, S, T, dtype) -> np.ndarray:
    """Chunks of one stream in different dtypes (no reader makes them; a hand-built deserializer
    could): entry by entry in NumPy, as the per-sequence path did."""
    out = np.zeros((S, T, spec.dim), dtype=dtype)
    for i in np.flatnonzero(e_n > 0).tolist():
        v = chunks[int(k[i])].columns[spec.name].sequence(int(e[J, i]))
        arr = v.toarray() if hasattr(v, "toarray") else np.asarray(v)
        o, n, t = int(e[OFF, i]), int(e_n[i]), int(e_t[i])
        out[int(e[SLOT, i]), t:t + n] = arr[o:o + n]
    return out


def step_counts(chunk, specs) -> tuple[np.ndarray, np.ndarray]:
    """Per sequence of ``chunk``: its BPTT length (samples of the first stream) and whether every
    stream has that many samples (computed once per chunk)."""
    cached = chunk.bptt_steps
    if cached is None:
        counts = [np.diff(chunk.columns[s.name].seq_offsets) for s in specs]
        steps = counts[0] if counts else np.zeros(len(chunk.keys), dtype=np.int64)
        equal = np.ones(len(steps), dtype=bool)
        for c in counts[1:]:
            equal &= c == steps
        cached = chunk.bptt_steps = (np.ascontiguousarray(steps, dtype=np.int64), equal)
    return cached


def _check_equal(chunk, specs, js: np.ndarray) -> None:
    """The error the per-sequence path raised for the first of sequences ``js`` whose streams differ."""
    bad = js[~step_counts(chunk, specs)[1][js]]
    if len(bad):
        j = int(bad[0])
        lengths = {int(np.diff(chunk.columns[s.name].seq_offsets[j:j + 2])[0]) for s in specs}
        raise ValueError(f"truncated BPTT needs every stream to have the same length in a sequence; "
                         f"got lengths {sorted(lengths)} (CNTK: 'For BPTT sequences between different input "
                         f"stream should have the same length.')")


def _dtype(src, spec):
    if spec.dtype is not None:
        return spec.dtype
    return getattr(src.deserializer, "dtype", None) or np.float32
