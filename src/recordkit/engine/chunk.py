"""Columnar chunk data: how every deserializer hands sequences to the engine.

A chunk holds many sequences. Storing each sequence as its own Python object would
put per-value (or per-sequence) Python work on the hot path, so a chunk is kept as
one contiguous column per stream plus offsets:

* ``DenseColumn``: ``values`` of shape (total samples, dim); sequence ``i`` owns rows
  ``seq_offsets[i]:seq_offsets[i+1]``.
* ``SparseColumn``: CSR over samples (``indptr`` per sample into ``indices``/``values``)
  plus the same ``seq_offsets`` over samples.

``ChunkData.sequence(i)`` materialises one sequence when a caller wants one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass
class DenseColumn:
    values: np.ndarray       # (samples, dim), float32 or float64
    seq_offsets: np.ndarray  # (sequences + 1,), int64

    is_sparse = False

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


@dataclass
class SparseColumn:
    values: np.ndarray       # (nnz,), float32 or float64
    indices: np.ndarray      # (nnz,), int32, in file order (not sorted, duplicates kept)
    indptr: np.ndarray       # (samples + 1,), int64
    seq_offsets: np.ndarray  # (sequences + 1,), int64 over samples
    dim: int

    is_sparse = True

    @property
    def num_samples(self) -> int:
        return len(self.indptr) - 1

    def sample_counts(self) -> np.ndarray:
        return np.diff(self.seq_offsets)

    def sequence(self, i: int) -> sp.csr_matrix:
        """Sequence ``i`` as a (samples, dim) CSR matrix (indices as stored in the file)."""
        a, b = int(self.seq_offsets[i]), int(self.seq_offsets[i + 1])
        lo, hi = int(self.indptr[a]), int(self.indptr[b])
        indptr = self.indptr[a:b + 1] - lo
        return sp.csr_matrix((self.values[lo:hi], self.indices[lo:hi], indptr), shape=(b - a, self.dim))

    def sample(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """(indices, values) of sample ``j`` of this column."""
        lo, hi = self.indptr[j], self.indptr[j + 1]
        return self.indices[lo:hi], self.values[lo:hi]


@dataclass
class Sequence:
    """One sequence: its key and, per stream name, a (samples, dim) array or CSR matrix."""
    key: int
    data: dict

    def __getitem__(self, name):
        return self.data[name]

    def __len__(self) -> int:
        return max((v.shape[0] for v in self.data.values()), default=0)


@dataclass
class ChunkData:
    """The sequences of one chunk, column by column.

    ``keys``: uint64 key per sequence; ``lengths``: the sequence length used for
    minibatch sizing (samples of the ``defines_mb_size`` stream, else the longest
    stream); ``columns``: stream name -> DenseColumn | SparseColumn.
    """
    chunk_id: int
    keys: np.ndarray
    lengths: np.ndarray
    columns: dict

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

    def __iter__(self):
        for i in range(len(self.keys)):
            yield self.sequence(i)
