"""The truncated-BPTT slots as they were before the compiled refill, kept
verbatim as the reference that tests/test_engine_bptt.py compares engine/bptt.py against: one
sequence pulled per ``take_sequences(1)`` call and copied with NumPy/SciPy per sequence. Slow, obviously right.

``use_reference(monkeypatch)`` makes MinibatchSource use these classes.
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
    @property
    def num_slots(self) -> int:
        return len(self.slots)

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
        if src.exhausted:
            return None
        picked = src.take_sequences(1)
        cids, js, _, sweeps, positions = picked
        if len(cids) == 0:
            return None
        chunk = src.chunk(int(cids[0]))
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
        mb = Minibatch(streams, np.array(touched, dtype=np.uint64), lengths, src.at_sweep_end,
                       src.sweep_index, extra={"continues": continues, "sequence_start": starts, "keys": keys})
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


def use_reference(monkeypatch):
    """Route MinibatchSource's BPTT calls (next_minibatch, restore_from_checkpoint) to this module."""
    import recordkit.engine.bptt as bptt
    monkeypatch.setattr(bptt, "BpttSlots", BpttSlots)
