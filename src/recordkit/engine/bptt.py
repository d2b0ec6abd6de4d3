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
"""
from __future__ import annotations

from collections import deque

import numpy as np

from recordkit.engine.minibatch import Minibatch, StreamBatch


class _Pending:
    """A sequence (or its remainder) waiting in a slot."""
    __slots__ = ("key", "arrays", "offset", "sweep", "position")

    def __init__(self, key, arrays, offset, sweep, position):
        self.key, self.arrays, self.offset, self.sweep, self.position = key, arrays, offset, sweep, position

    @property
    def remaining(self) -> int:
        return next(iter(self.arrays.values())).shape[0] - self.offset


class BpttSlots:
    def __init__(self, source, slots: int):
        self.source = source
        self.slots = [deque() for _ in range(slots)]

    def busy(self) -> bool:
        return any(self.slots)

    def state(self) -> dict:
        return {"slots": [[[p.sweep, p.position, p.offset] for p in q] for q in self.slots]}

    @classmethod
    def from_state(cls, source, state) -> "BpttSlots":
        self = cls(source, len(state["slots"]))
        for q, entries in zip(self.slots, state["slots"]):
            for sweep, position, offset in entries:
                order = source.randomizer.sweep(int(sweep))
                cid, idx = int(order.chunk[position]), int(order.index[position])
                chunk = source.deserializer.load_chunk(cid)
                j = int(chunk.position_lookup(source._described[cid])[idx])
                q.append(_Pending(int(chunk.keys[j]), _arrays(source, chunk.sequence(j).data), int(offset),
                                  int(sweep), int(position)))
        return self

    def _pull(self) -> _Pending | None:
        """The next sequence from the source, or None when the data is exhausted."""
        src = self.source
        if src._exhausted:
            return None
        picked, _, _ = src._pick(1, max_sequences=1)
        cids, js, _, sweeps, positions = picked
        if len(cids) == 0:
            return None
        chunk = src._chunk(int(cids[0]))
        seq = chunk.sequence(int(js[0]))
        return _Pending(seq.key, _arrays(src, seq.data), 0, int(sweeps[0]), int(positions[0]))

    def next(self, length: int) -> Minibatch | None:
        src = self.source
        for q in self.slots:
            # top the slot up one sequence at a time until it holds more than `length` samples
            while sum(p.remaining for p in q) <= length:
                p = self._pull()
                if p is None:
                    break
                q.append(p)
        if not self.busy():
            return None
        S = len(self.slots)
        data = {s.name: np.zeros((S, length, s.dim), dtype=_dtype(src, s)) for s in src.streams}
        mask = np.zeros((S, length), dtype=bool)
        starts = np.zeros((S, length), dtype=bool)
        keys = np.zeros((S, length), dtype=np.uint64)
        continues = np.zeros(S, dtype=bool)
        touched = []
        for s, q in enumerate(self.slots):
            t = 0
            while q and t < length:
                p = q[0]
                n = min(length - t, p.remaining)
                if t == 0 and p.offset > 0:
                    continues[s] = True
                if p.offset == 0:
                    starts[s, t] = True
                for name, arr in p.arrays.items():
                    data[name][s, t:t + n] = arr[p.offset:p.offset + n]
                mask[s, t:t + n] = True
                keys[s, t:t + n] = p.key
                if not touched or touched[-1] != p.key:
                    touched.append(p.key)
                p.offset += n
                t += n
                if p.remaining == 0:
                    q.popleft()
        lengths = mask.sum(axis=1)
        streams = {s.name: StreamBatch(s.name, False, s.dim, lengths, data=data[s.name], mask=mask)
                   for s in src.streams}
        mb = Minibatch(streams, np.array(touched, dtype=np.uint64), lengths, src._cursor >= src._sweep.hi,
                       src._sweep.index, extra={"continues": continues, "sequence_start": starts, "keys": keys})
        if src._sweep is not None:
            src._evict(len(self.slots))  # the slots hold copies: chunks behind the cursor can go
        src.samples_delivered += mb.num_samples
        src.minibatches_delivered += 1
        return mb


def _dtype(src, spec):
    if spec.dtype is not None:
        return spec.dtype
    return getattr(src.deserializer, "dtype", None) or np.float32


def _arrays(src, data: dict) -> dict:
    out = {}
    lengths = set()
    for spec in src.streams:
        v = data[spec.name]
        arr = v.toarray() if hasattr(v, "toarray") else np.asarray(v)
        out[spec.name] = arr
        lengths.add(arr.shape[0])
    if len(lengths) > 1:
        raise ValueError(f"truncated BPTT needs every stream to have the same length in a sequence; "
                         f"got lengths {sorted(lengths)} (CNTK: 'For BPTT sequences between different input "
                         f"stream should have the same length.')")
    return out


def next_bptt_minibatch(source, size: int) -> Minibatch | None:
    length = source.truncation_length
    slots = max(1, size // length)
    if source._bptt is None or len(source._bptt.slots) != slots:
        if source._bptt is not None and source._bptt.busy():
            raise ValueError("the minibatch size (number of BPTT slots) cannot change while sequences are "
                             "split across minibatches")
        source._bptt = BpttSlots(source, slots)
    return source._bptt.next(length)
