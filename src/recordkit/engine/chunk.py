"""Columnar chunk data: how every deserializer hands sequences to the engine.

A chunk holds many sequences. Storing each sequence as its own Python object would
put per-value (or per-sequence) Python work on the hot path, so a chunk is kept as
one contiguous column per stream plus offsets:

* ``DenseColumn``: ``values`` of shape (total samples, dim); sequence ``i`` owns rows
  ``seq_offsets[i]:seq_offsets[i+1]``.
* ``SparseColumn``: CSR over samples (``indptr`` per sample into ``indices``/``values``)
  plus the same ``seq_offsets`` over samples.
* ``BytesColumn``: one ``bytes`` object per sequence (an encoded image, a text as UTF-8), in a
  NumPy object array.

``ChunkData.sequence(i)`` materialises one sequence when a caller wants one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # annotations only: SciPy is imported where a CSR matrix is made
    import scipy.sparse


@dataclass
class DenseColumn:
    values: np.ndarray       # (samples, dim), float32 or float64
    seq_offsets: np.ndarray  # (sequences + 1,), int64

    is_sparse = False
    is_bytes = False

    @property
    def dim(self) -> int:
        return self.values.shape[1]

    @property
    def num_samples(self) -> int:
        return self.values.shape[0]

    def sample_counts(self) -> np.ndarray:
        return np.diff(self.seq_offsets)

    def sequence(self, i: int) -> np.ndarray:
        return self.values[self.seq_offsets[i]:self.seq_offsets[i + 1]]

    def take(self, seqs: np.ndarray) -> "DenseColumn":
        """The column of sequences ``seqs`` (in that order)."""
        rows, offsets = _sample_rows(self.seq_offsets, seqs)
        return DenseColumn(self.values[rows], offsets)


@dataclass
class SparseColumn:
    values: np.ndarray       # (nnz,), float32 or float64
    indices: np.ndarray      # (nnz,), int32, in file order (not sorted, duplicates kept)
    indptr: np.ndarray       # (samples + 1,), int64
    seq_offsets: np.ndarray  # (sequences + 1,), int64 over samples
    dim: int

    is_sparse = True
    is_bytes = False

    @property
    def num_samples(self) -> int:
        return len(self.indptr) - 1

    def sample_counts(self) -> np.ndarray:
        return np.diff(self.seq_offsets)

    def sequence(self, i: int) -> "scipy.sparse.csr_matrix":
        """Sequence ``i`` as a (samples, dim) CSR matrix (indices as stored in the file)."""
        a, b = int(self.seq_offsets[i]), int(self.seq_offsets[i + 1])
        lo, hi = int(self.indptr[a]), int(self.indptr[b])
        indptr = self.indptr[a:b + 1] - lo
        import scipy.sparse as sp  # lazily: SciPy costs more start-up time than the rest together
        return sp.csr_matrix((self.values[lo:hi], self.indices[lo:hi], indptr), shape=(b - a, self.dim))

    def take(self, seqs: np.ndarray) -> "SparseColumn":
        """The column of sequences ``seqs`` (in that order)."""
        rows, offsets = _sample_rows(self.seq_offsets, seqs)
        nnz_rows, ptr = _sample_rows(self.indptr, rows)
        return SparseColumn(self.values[nnz_rows], self.indices[nnz_rows], ptr, offsets, self.dim)

    def sample(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """(indices, values) of sample ``j`` of this column."""
        lo, hi = self.indptr[j], self.indptr[j + 1]
        return self.indices[lo:hi], self.values[lo:hi]


@dataclass
class BytesColumn:
    """A bytes stream: ``values[i]`` is sequence i's one value (``bytes``), so every sequence has one
    sample. An object array rather than a list: ``take`` and the minibatch gather index it with
    the same integer arrays as the numeric columns, without a loop of their own."""
    values: np.ndarray       # (sequences,), dtype object, each a bytes

    is_sparse = False
    is_bytes = True
    dim = 1

    def __post_init__(self):
        if not isinstance(self.values, np.ndarray) or self.values.dtype != object or self.values.ndim != 1:
            self.values = object_array(self.values)

    @property
    def seq_offsets(self) -> np.ndarray:
        return np.arange(len(self.values) + 1, dtype=np.int64)

    @property
    def num_samples(self) -> int:
        return len(self.values)

    def sample_counts(self) -> np.ndarray:
        return np.ones(len(self.values), dtype=np.int64)

    def sequence(self, i: int) -> bytes:
        return self.values[i]

    def take(self, seqs: np.ndarray) -> "BytesColumn":
        return BytesColumn(self.values[np.asarray(seqs, dtype=np.int64)])


def column_kind(col) -> str:
    """'dense', 'sparse' or 'bytes': what a chunk's column holds (the stream format it fits)."""
    return "bytes" if col.is_bytes else "sparse" if col.is_sparse else "dense"


def object_array(items) -> np.ndarray:
    """``items`` (bytes values) as a 1-D object array; ``np.array`` would make a 2-D or ``S`` array of
    equal-length values."""
    items = list(items)
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _sample_rows(offsets: np.ndarray, items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated ranges offsets[i]:offsets[i+1] for i in items, and the new offsets.

    Vectorized (no per-item Python): the ranges' positions are built with one repeat
    and one cumulative sum.
    """
    items = np.asarray(items, dtype=np.int64)
    starts = offsets[items]
    counts = offsets[items + 1] - starts
    new_offsets = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum(counts, out=new_offsets[1:])
    total = int(new_offsets[-1])
    if total == 0:
        return np.zeros(0, dtype=np.int64), new_offsets
    rows = np.arange(total, dtype=np.int64) - np.repeat(new_offsets[:-1] - starts, counts)
    return rows, new_offsets


@dataclass
class Sequence:
    """One sequence: its key and, per stream name, a (samples, dim) array or CSR matrix (a bytes
    stream: its one ``bytes`` value)."""
    key: int
    data: dict

    def __getitem__(self, name):
        return self.data[name]

    def __len__(self) -> int:
        return max((v.shape[0] if hasattr(v, "shape") else 1 for v in self.data.values()), default=0)


@dataclass
class ChunkData:
    """The sequences of one chunk, column by column.

    ``keys``: uint64 key per sequence; ``lengths``: the sequence length used for
    minibatch sizing (samples of the ``defines_mb_size`` stream, else the longest
    stream); ``columns``: stream name -> DenseColumn | SparseColumn | BytesColumn.
    """
    chunk_id: int
    keys: np.ndarray
    lengths: np.ndarray
    columns: dict
    # index in the chunk's description of each sequence here; None = 0..n-1. Differs when
    # sequences were dropped for errors (the chunk description counted them).
    positions: np.ndarray | None = None
    # True where the columns' arrays are this chunk's alone: made by the load that returned it,
    # writable, referred to by no read buffer, reader cache or other chunk, and not reused by the
    # deserializer while anything refers to them. The engine may then hand out a minibatch as
    # views of them (``_gather.lend_run``) instead of copying: a caller who writes into such a
    # minibatch writes into this chunk, which the engine therefore never delivers from again
    # (``ChunkCache.lend``).
    lendable: bool = field(default=False, repr=False, compare=False)
    # What the engine derives from a chunk once while it is held (the arrays do not change):
    # the gather kernels' views and checked columns (``minibatch.py``), the BPTT step counts
    # (``bptt.py``). Declared here, made on first use, never part of equality or repr.
    gather_views: dict | None = field(default=None, init=False, repr=False, compare=False)
    gather_columns: tuple | None = field(default=None, init=False, repr=False, compare=False)
    bptt_steps: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def num_sequences(self) -> int:
        return len(self.keys)

    @property
    def num_samples(self) -> int:
        return int(self.lengths.sum())

    def sequence(self, i: int) -> Sequence:
        return Sequence(int(self.keys[i]), {name: col.sequence(i) for name, col in self.columns.items()})

    def take(self, seqs) -> "ChunkData":
        """A ChunkData of the sequences at indexes ``seqs`` (in that order)."""
        seqs = np.asarray(seqs, dtype=np.int64)
        return ChunkData(self.chunk_id, self.keys[seqs], self.lengths[seqs],
                         {name: col.take(seqs) for name, col in self.columns.items()},
                         None if self.positions is None else self.positions[seqs])

    def position_lookup(self, num_described: int) -> np.ndarray:
        """For each described sequence index, its index here, or -1 if it was dropped."""
        out = np.full(num_described, -1, dtype=np.int64)
        pos = np.arange(len(self.keys)) if self.positions is None else self.positions
        out[pos] = np.arange(len(self.keys))
        return out

    def __iter__(self):
        for i in range(len(self.keys)):
            yield self.sequence(i)


def concat_chunks(chunks: list[ChunkData]) -> ChunkData:
    """One ChunkData holding the sequences of several, in order (columns concatenated)."""
    if len(chunks) == 1:
        return chunks[0]
    cols: dict[str, DenseColumn | SparseColumn | BytesColumn] = {}
    for name, first in chunks[0].columns.items():
        parts = [c.columns[name] for c in chunks]
        if first.is_bytes:
            cols[name] = BytesColumn(np.concatenate([p.values for p in parts]))
            continue
        counts = np.concatenate([np.diff(p.seq_offsets) for p in parts])
        offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        if first.is_sparse:
            ptrs, base = [], 0
            for p in parts:
                ptrs.append(p.indptr[:-1] + base)
                base += int(p.indptr[-1])
            ptr = np.concatenate(ptrs + [np.array([base], dtype=np.int64)])
            cols[name] = SparseColumn(np.concatenate([p.values for p in parts]),
                                      np.concatenate([p.indices for p in parts]), ptr, offsets, first.dim)
        else:
            cols[name] = DenseColumn(np.concatenate([p.values for p in parts]), offsets)
    return ChunkData(-1, np.concatenate([c.keys for c in chunks]), np.concatenate([c.lengths for c in chunks]), cols)
