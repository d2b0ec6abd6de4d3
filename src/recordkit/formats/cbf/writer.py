"""CBFWriter: sequences (or whole chunks of them) in, CBF chunks out.

Sequences are buffered until the chunk being built reaches ``chunk_size`` bytes
(checked after each complete sequence, so a chunk is never split inside a sequence
and holds at least one), then encoded by the compiled kernel and appended. The
header and the offset table go at the end; the file is written to a temporary name
and renamed on ``close()``. Each sequence's meta sample count (the chunk prefix) is
the maximum over its streams, as CNTK's converter writes it.

Encoding a chunk runs on a background thread (the kernel releases the GIL), so a
conversion parses the next input chunk meanwhile; at most ``output.MAX_IN_FLIGHT`` chunks
wait (``output.OrderedWorker``), which bounds memory. The file itself is ``output.CBFOutput``, the same output the
CTF -> CBF fast path writes through (one writer thread, one abort path).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from recordkit.formats.closing import AtomicWriter
from recordkit.engine.chunk import ChunkData, DenseColumn, SparseColumn
from recordkit.engine.streams import check_streams, resolve_precision
from recordkit.formats.cbf import _kernel
from recordkit.formats.cbf.output import CBFOutput, OrderedWorker

if TYPE_CHECKING:
    import os
    from typing import Sequence

    from recordkit.engine.streams import StreamSpec

from recordkit.engine import DEFAULT_CHUNK_SIZE  # noqa: E402,F401  (one constant)


class CBFWriter(AtomicWriter):
    """Write a CBF file. ``streams`` name the streams (``name`` is stored in the header)."""

    def __init__(self, path: str | os.PathLike[str], streams: Sequence[StreamSpec], *, precision: str = "float",
                 chunk_size: int = DEFAULT_CHUNK_SIZE, storage_options: dict | None = None,
                 checksums: bool = False) -> None:
        self._streams = check_streams(streams)
        self.dtype = resolve_precision(precision)
        if int(chunk_size) <= 0:
            raise ValueError(f"chunk_size must be positive, not {chunk_size}")
        self.chunk_size = int(chunk_size)
        self._out = CBFOutput(path, self._streams, self.dtype, storage_options=storage_options, checksums=checksums)
        self._pending: list[tuple[ChunkData, int, int]] = []  # (chunk, first seq, end seq)
        self._pending_bytes = 0
        self._esize = self.dtype.itemsize
        self._io = OrderedWorker("recordkit-cbf-writer")

    # -- input ------------------------------------------------------------------------------------
    def write(self, data: dict, key: int | None = None) -> None:
        """Add one sequence: ``{stream name: (samples, dim) array or sparse matrix}``.

        CBF stores no keys: sequences are numbered by position (``key`` is ignored).
        """
        unknown = set(data) - {s.name for s in self._streams}
        if unknown:
            raise ValueError(f"streams {sorted(unknown)} are not declared")
        cols = {}
        lengths = []
        for spec in self._streams:
            value = data.get(spec.name)
            if spec.is_sparse:
                import scipy.sparse as sp  # lazily (start-up)
                m = sp.csr_matrix((0, spec.dim)) if value is None else (
                    value.tocsr() if sp.issparse(value) else sp.csr_matrix(np.atleast_2d(np.asarray(value))))
                if m.shape[1] != spec.dim:
                    raise ValueError(f"stream '{spec.name}': expected shape (samples, {spec.dim}), got {m.shape}")
                n = m.shape[0]
                cols[spec.name] = SparseColumn(np.asarray(m.data), np.asarray(m.indices, dtype=np.int32),
                                               np.asarray(m.indptr, dtype=np.int64), np.array([0, n]), spec.dim)
            else:
                arr = np.zeros((0, spec.dim)) if value is None else np.asarray(value)
                if arr.ndim == 1:
                    arr = arr.reshape(1, -1)
                if arr.ndim != 2 or arr.shape[1] != spec.dim:
                    raise ValueError(f"stream '{spec.name}': expected shape (samples, {spec.dim}), got {arr.shape}")
                n = arr.shape[0]
                cols[spec.name] = DenseColumn(arr, np.array([0, n]))
            lengths.append(n)
        self.write_chunk(ChunkData(-1, np.zeros(1, np.uint64), np.array([max(lengths)]), cols))

    def write_chunk(self, chunk: ChunkData) -> None:
        """Add every sequence of a ChunkData (from any reader), splitting into CBF chunks by size."""
        cols = self._columns_of(chunk)
        n = len(chunk)
        if n == 0:
            return
        sizes = np.full(n, 4, dtype=np.int64)
        for spec, col in zip(self._streams, cols):
            counts = np.diff(col.seq_offsets)
            if spec.is_sparse:
                nnz = np.diff(col.indptr[col.seq_offsets])
                sizes += 8 + nnz * (self._esize + 4) + counts * 4
            else:
                sizes += 4 + counts * spec.dim * self._esize
        start = 0
        cum = np.cumsum(sizes)
        while start < n:
            room = self.chunk_size - self._pending_bytes
            base = cum[start - 1] if start else 0
            # the chunk closes after the first sequence that brings it to chunk_size or more
            end = int(np.searchsorted(cum, base + room, side="left")) + 1
            end = min(max(end, start + 1), n)
            self._pending.append((chunk, start, end))
            self._pending_bytes += int(cum[end - 1] - base)
            if self._pending_bytes >= self.chunk_size:
                self._flush()
            start = end

    def _columns_of(self, chunk: ChunkData):
        cols = []
        for spec in self._streams:
            col = chunk.columns.get(spec.name)
            if col is None:
                raise ValueError(f"chunk has no stream '{spec.name}'")
            if col.is_sparse != spec.is_sparse or col.dim != spec.dim:
                kind = "sparse" if col.is_sparse else "dense"
                raise ValueError(f"stream '{spec.name}' is declared {spec.format} dim {spec.dim}, "
                                 f"the data is {kind} dim {col.dim}")
            if spec.is_sparse and len(col.indices) and (col.indices.min() < 0 or col.indices.max() >= spec.dim):
                raise ValueError(f"stream '{spec.name}': sparse index outside [0, {spec.dim})")
            cols.append(col)
        return cols

    # -- output -----------------------------------------------------------------------------------
    def _flush(self) -> None:
        if not self._pending:
            return
        meta_src = self._pending
        # per stream, the pending sequences as parts of their source columns (no copies)
        columns = []
        for s, spec in enumerate(self._streams):
            parts = []
            for chunk, a, b in meta_src:
                col = chunk.columns[spec.name]
                parts.append((col, a, b))
            columns.append(self._encode_input(spec, parts))
        meta = np.concatenate([self._meta(chunk, a, b) for chunk, a, b in meta_src]).astype(np.uint32)
        self._pending = []
        self._pending_bytes = 0
        self._io.submit(self._encode_and_write, meta, columns)

    @property
    def sequences_written(self) -> int:
        return self._out.sequences_written

    def _encode_and_write(self, meta, columns) -> None:
        # runs on the encoder thread: chunks are placed in submission order, written by the output's
        # writer thread (which hands them to writeback at once, so the final fsync has little left)
        blob = _kernel.encode_chunk(meta, columns, [s.is_sparse for s in self._streams],
                                    [s.dim for s in self._streams], [self._esize] * len(self._streams))
        start = self._out.add_chunk([meta], len(blob))
        self._out.write_at([memoryview(blob)], start)

    def _meta(self, chunk, a, b) -> np.ndarray:
        counts = [np.diff(chunk.columns[s.name].seq_offsets[a:b + 1]) for s in self._streams]
        return np.max(np.vstack(counts), axis=0)

    def _encode_input(self, spec, parts):
        """The encoder's parts for one stream: each (values bytes, indices, indptr, seq_offsets),
        in the writer's dtype, referring to the sources' arrays without gathering them."""
        out = []
        for col, a, b in parts:
            so = np.ascontiguousarray(col.seq_offsets[a:b + 1], dtype=np.int64)
            vals = np.ascontiguousarray(col.values, dtype=self.dtype)
            if spec.is_sparse:
                out.append((vals.view(np.uint8), np.ascontiguousarray(col.indices, dtype=np.int32),
                            np.ascontiguousarray(col.indptr, dtype=np.int64), so))
            else:
                out.append((vals.reshape(-1).view(np.uint8), None, None, so))
        return out

    def close(self) -> None:
        try:
            self._flush()
            self._io.finish()
        except BaseException:
            self.abort()
            raise
        try:
            self._out.close()
        except BaseException:
            self._out.abort()
            raise

    def abort(self) -> None:
        self._io.cancel()
        self._out.abort()

