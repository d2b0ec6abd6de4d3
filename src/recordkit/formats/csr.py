"""Sparse row pointers read from a file, checked before anything is sliced with them.

WebDataset and MDS keep each sequence of a sparse stream as three arrays (``NAME.indices``,
``NAME.values``, ``NAME.offsets``), the offsets being CSR row pointers in whatever integer type
the writer chose. Row pointers that fall back (``[0, 3, 0, 3]``) hand one sample another
sample's entries, quietly. Neighbours are therefore compared (``off[1:] >= off[:-1]``), never
subtracted: the difference of two unsigned (or narrow signed) integers wraps around instead of
going negative, so ``np.diff(off) < 0`` passes ``[0, 3, 0, 3]`` stored as uint64.

``chunk_problem`` checks a whole decoded chunk the same way (every column's offsets, row
pointers and indices against its arrays): what ``validate`` asks of every chunk a reader hands
out, so a chunk that ``cat`` or a minibatch could not slice is a reported problem, not a pass.
"""
from __future__ import annotations

import numpy as np


def _falls_back(off: np.ndarray) -> int:
    """Index of the first offset below its predecessor, or -1 (compared, never subtracted)."""
    bad = np.flatnonzero(off[1:] < off[:-1])
    return int(bad[0]) + 1 if len(bad) else -1


def offsets_problem(off: np.ndarray, nnz: int) -> str | None:
    """Why ``off`` (one sequence's stored row pointers, any integer type) are not row pointers into
    its ``nnz`` stored entries, or None when they are: they must start at 0, never fall back, and
    end at ``nnz``."""
    if len(off) < 1:
        return "no offsets (even a sequence without samples stores [0])"
    if off[0] != 0:
        return f"the first offset is {int(off[0])}, not 0"
    k = _falls_back(off)
    if k >= 0:
        return f"offset {k} ({int(off[k])}) is below offset {k - 1} ({int(off[k - 1])}): offsets never fall back"
    if off[-1] != nnz:
        return f"the last offset is {int(off[-1])}, not the {nnz} stored entries"
    return None


def join_offsets(stored: np.ndarray, counts: np.ndarray, nnz: np.ndarray):
    """(indptr over all samples, samples per sequence) from every sequence's stored row pointers
    concatenated (``stored``; ``counts[i]`` of them for sequence i, which holds ``nnz[i]`` entries),
    or None when any sequence's are not row pointers (the caller's sequence-by-sequence path then
    finds and locates it)."""
    counts = np.asarray(counts, dtype=np.int64)
    nnz = np.asarray(nnz, dtype=np.int64)
    if np.any(counts < 1) or int(counts.sum()) != len(stored):
        return None
    last = np.cumsum(counts) - 1
    first = last - counts + 1
    rising = stored[1:] >= stored[:-1]
    rising[last[:-1]] = True  # from one sequence's last offset to the next one's first
    if not rising.all():
        return None
    # every offset now lies between its sequence's first and last: both checked in int64 range
    if np.any(stored[first] != 0) or np.any(stored[last] != nnz):
        return None
    rows = stored.astype(np.int64) + np.repeat(np.cumsum(nnz) - nnz, counts)
    keep = np.ones(len(rows), dtype=bool)
    keep[last] = False
    return np.concatenate([rows[keep], [int(nnz.sum())]]), counts - 1


def chunk_problem(chunk) -> str | None:
    """What is inconsistent in a decoded chunk (per column: sequence offsets over its samples, CSR
    row pointers over its entries, sparse indices within the dimension), or None."""
    n = len(chunk.keys)
    if len(chunk.lengths) != n:
        return f"{len(chunk.lengths)} sequence lengths for {n} sequences"
    for name, col in chunk.columns.items():
        so = np.asarray(col.seq_offsets)
        if len(so) != n + 1 or so[0] != 0 or _falls_back(so) >= 0 or so[-1] != col.num_samples:
            return f"stream '{name}': its sequence offsets do not cover its {col.num_samples} samples in order"
        if not col.is_sparse:
            continue
        ptr = np.asarray(col.indptr)
        if len(col.indices) != len(col.values) or len(ptr) < 1 or ptr[0] != 0 or _falls_back(ptr) >= 0 \
                or ptr[-1] != len(col.indices):
            return f"stream '{name}': its samples' row pointers do not cover its {len(col.indices)} entries in order"
        if len(col.indices) and (int(col.indices.min()) < 0 or int(col.indices.max()) >= col.dim):
            return f"stream '{name}': a sparse index outside [0, {col.dim})"
    return None
