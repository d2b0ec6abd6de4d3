"""``recordkit stats`` as a library: per-stream totals over every chunk of a reader.

``stream_totals(reader)`` -> ``{"sequences": N, "streams": {NAME: {samples, nnz, sum, min, max}}}``,
one vectorized update per chunk column (``StreamTotals``); a bytes stream counts its values and the
non-empty ones, with no sum, min or max.
"""
from __future__ import annotations

import numpy as np


class StreamTotals:
    """Running totals of one stream, updated a chunk column at a time (vectorized)."""

    def __init__(self):
        self.samples = 0
        self.nnz = 0
        self.sum = 0.0
        self.min = None
        self.max = None

    def add(self, column) -> None:
        self.samples += column.num_samples
        vals = column.values
        if column.is_bytes:  # no numbers: the values that are not empty count as non-zeros
            self.nnz += sum(1 for v in vals if len(v))
            self.sum = None
            return
        self.nnz += len(vals) if column.is_sparse else int(np.count_nonzero(vals))
        if vals.size and self.sum is not None:
            self.sum += float(vals.sum(dtype=np.float64))
            lo, hi = float(vals.min()), float(vals.max())
            self.min = lo if self.min is None else min(self.min, lo)
            self.max = hi if self.max is None else max(self.max, hi)

    def as_dict(self) -> dict:
        return {"samples": self.samples, "nnz": self.nnz, "sum": self.sum, "min": self.min, "max": self.max}


def stream_totals(reader, progress=None) -> dict:
    """Totals of every stream over every chunk (``progress.update(bytes)`` after each chunk)."""
    totals = {s.name: StreamTotals() for s in reader.streams}
    sequences = 0
    for chunk, info in zip(reader.iter_chunks(threads=2), reader.chunks):
        sequences += len(chunk)
        for name, col in chunk.columns.items():
            totals[name].add(col)
        if progress is not None:
            progress.update(info.size)
    return {"sequences": sequences, "streams": {k: v.as_dict() for k, v in totals.items()}}
