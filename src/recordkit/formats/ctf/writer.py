"""CTFWriter: sequences out as CNTK text, one line per time step.

Every line starts with the sequence key (id mode), so multi-sample sequences and
sequences where a stream has fewer samples than another both read back exactly.
Values are written in the shortest text that reads back to the same float32/float64
(formatting runs in the compiled kernel), sparse samples as ``index:value`` pairs in
stored order. Output goes to a temporary file that is renamed into place on close.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from recordkit.formats.closing import AtomicWriter
from recordkit.storage.atomic import AtomicFile
from recordkit.engine.streams import StreamSpec, check_streams, resolve_precision
from recordkit.errors import UnrepresentableError
from recordkit.formats.ctf import _kernel

if TYPE_CHECKING:
    import os
    from typing import Iterable, Sequence

    from recordkit.engine.chunk import ChunkData, Sequence as ChunkSequence


class CTFWriter(AtomicWriter):
    """Write sequences to ``path`` (atomically: the file appears on ``close()``)."""

    def __init__(self, path: str | os.PathLike[str], streams: Sequence[StreamSpec], *, precision: str = "float",
                 storage_options: dict | None = None, checksums: bool = False) -> None:
        self._streams = check_streams(streams)
        self.dtype = resolve_precision(precision)
        self._double = self.dtype == np.float64
        self._out = AtomicFile(path, storage_options=storage_options, checksums=checksums)
        self._prefix = {s.name: b"|" + s.alias.encode("utf-8") + b" " for s in self._streams}
        self._next_key = 0
        self.sequences_written = 0

    def write(self, data: dict, key: int | None = None) -> None:
        """Write one sequence: ``{stream name: (samples, dim) array or sparse matrix}``."""
        if key is None:
            key = self._next_key
        key = int(key)
        if key < 0 or key > 2**64 - 1:
            raise ValueError(f"sequence key {key} is outside 0..2**64-1")
        self._next_key = key + 1
        texts = []
        longest = 0
        for spec in self._streams:
            value = data.get(spec.name)
            try:
                rows = [] if value is None else self._format(spec, value)
            except UnrepresentableError as e:
                raise UnrepresentableError(f"sequence {key}: {e}") from None
            texts.append(rows)
            longest = max(longest, len(rows))
        unknown = set(data) - {s.name for s in self._streams}
        if unknown:
            raise ValueError(f"sequence {key}: streams {sorted(unknown)} are not declared")
        if longest == 0:
            raise UnrepresentableError(f"sequence {key} has no samples in any stream: CTF cannot represent it")
        head = str(key).encode("ascii")
        lines = []
        for t in range(longest):
            parts = [head]
            for spec, rows in zip(self._streams, texts):
                if t < len(rows):
                    parts.append(b"\t" + self._prefix[spec.name] + rows[t] if rows[t] else b"\t|" + spec.alias.encode())
            lines.append(b"".join(parts))
        self._out.write(b"\n".join(lines) + b"\n")
        self.sequences_written += 1

    def write_chunk(self, chunk: ChunkData) -> None:
        """Write every sequence of a ChunkData (from any reader), keys included.

        Values are formatted a whole column at a time in the compiled kernel.
        """
        texts = []
        for spec in self._streams:
            col = chunk.columns.get(spec.name)
            if col is None:
                raise ValueError(f"chunk has no stream '{spec.name}'")
            if col.is_sparse != spec.is_sparse or col.dim != spec.dim:
                raise ValueError(f"stream '{spec.name}' is declared {spec.format} dim {spec.dim}, "
                                 f"the data is {'sparse' if col.is_sparse else 'dense'} dim {col.dim}")
            vals = np.asarray(col.values, dtype=np.float64)
            if not np.all(np.isfinite(vals)):
                raise _non_finite(spec, col, vals, chunk)
            if spec.is_sparse:
                rows = _kernel.format_sparse_rows(np.asarray(col.indptr, dtype=np.int64),
                                                  np.asarray(col.indices, dtype=np.int64),
                                                  np.ascontiguousarray(vals), self._double)
            else:
                rows = _kernel.format_dense_rows(np.ascontiguousarray(vals.astype(self.dtype).astype(np.float64)),
                                                 self._double)
            texts.append((self._prefix[spec.name], b"\t|" + spec.alias.encode(), rows, col.seq_offsets))
        out = []
        for i in range(len(chunk)):
            head = str(int(chunk.keys[i])).encode("ascii")
            spans = [(int(so[i]), int(so[i + 1])) for _, _, _, so in texts]
            longest = max((b - a for a, b in spans), default=0)
            if longest == 0:
                raise UnrepresentableError(f"sequence {int(chunk.keys[i])} (sequence {i} of chunk {chunk.chunk_id}) "
                                           f"has no samples in any stream: CTF cannot represent it")
            for t in range(longest):
                parts = [head]
                for (prefix, bare, rows, _), (a, b) in zip(texts, spans):
                    if a + t < b:
                        row = rows[a + t]
                        parts.append(b"\t" + prefix + row if row else bare)
                out.append(b"".join(parts))
        if out:
            self._out.write(b"\n".join(out) + b"\n")
        self.sequences_written += len(chunk)

    def _format(self, spec: StreamSpec, value) -> list[bytes]:
        if spec.is_sparse:
            import scipy.sparse as sp  # lazily (start-up)
            m = value.tocsr() if sp.issparse(value) else sp.csr_matrix(np.asarray(value))
            if m.ndim != 2 or m.shape[1] != spec.dim:
                raise ValueError(f"stream '{spec.name}': expected shape (samples, {spec.dim}), got {m.shape}")
            vals = np.asarray(m.data, dtype=np.float64)
            if not np.all(np.isfinite(vals)):
                raise UnrepresentableError(f"stream '{spec.name}': CTF cannot represent inf or nan")
            return _kernel.format_sparse_rows(np.asarray(m.indptr, dtype=np.int64),
                                              np.asarray(m.indices, dtype=np.int64), vals, self._double)
        arr = np.asarray(value)
        if arr.ndim == 1:
            arr = arr.reshape(1, -1)
        if arr.ndim != 2 or arr.shape[1] != spec.dim:
            raise ValueError(f"stream '{spec.name}': expected shape (samples, {spec.dim}), got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise UnrepresentableError(f"stream '{spec.name}': CTF cannot represent inf or nan")
        arr = np.ascontiguousarray(arr.astype(self.dtype).astype(np.float64))
        return _kernel.format_dense_rows(arr, self._double)

    def close(self) -> None:
        self._out.commit()

    def abort(self) -> None:
        self._out.discard()


def write_ctf(path: str | os.PathLike[str], streams: Sequence[StreamSpec],
              sequences: Iterable[ChunkSequence | tuple[int, dict]], *, precision: str = "float") -> int:
    """Write an iterable of ``Sequence`` (or ``(key, data)`` pairs); returns how many."""
    with CTFWriter(path, streams, precision=precision) as w:
        for seq in sequences:
            if isinstance(seq, tuple):
                key, data = seq
            else:
                key, data = seq.key, seq.data
            w.write(data, key=key)
    return w.sequences_written


def _non_finite(spec, col, vals: np.ndarray, chunk) -> UnrepresentableError:
    """Where the first inf/nan of a column is: stream, sequence key, sample."""
    flat = int(np.argmax(~np.isfinite(vals.reshape(-1))))
    sample = flat // spec.dim if not spec.is_sparse else int(np.searchsorted(col.indptr, flat, side="right")) - 1
    seq = int(np.searchsorted(col.seq_offsets, sample, side="right")) - 1
    value = float(vals.reshape(-1)[flat])
    return UnrepresentableError(f"stream '{spec.name}', sequence {int(chunk.keys[seq])} (sequence {seq} of chunk "
                                f"{chunk.chunk_id}), sample {sample - int(col.seq_offsets[seq])}: CTF cannot "
                                f"represent {value!r}")
