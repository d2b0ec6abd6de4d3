"""Minibatches: the sequences a training step gets, packed per stream.

Dense streams are packed as a zero-padded (sequences, max length, dim) array with a
boolean mask and the lengths, the layout NumPy/PyTorch code expects; sparse streams
as one scipy CSR matrix whose rows are the samples, sequence after sequence, plus
the per-sequence row offsets; bytes streams as a NumPy object array of one ``bytes`` per
sequence. Packing is vectorized over the whole minibatch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from recordkit.engine import _gather

if TYPE_CHECKING:  # annotations only: SciPy is imported where a CSR matrix is asked for
    import scipy.sparse



@dataclass
class StreamBatch:
    """One stream of a minibatch.

    ``lengths[i]``: samples of sequence i in this stream. Dense: ``data`` is
    (sequences, T, dim) with T = max length, ``mask`` (sequences, T) marks real samples.
    Sparse: ``csr`` is (total samples, dim), ``seq_offsets`` its row range per sequence.
    Bytes (``is_bytes``): ``data`` is a 1-D NumPy object array, the sequences' ``bytes`` values in
    delivery order (``lengths`` all 1, no ``mask``). An object array rather than a list because
    ``data`` is an ndarray for every other stream: code that indexes, slices or reorders a batch's
    ``data`` (``data[order]``, ``len(data)``) works on it unchanged.
    """
    name: str
    is_sparse: bool
    dim: int
    lengths: np.ndarray
    data: np.ndarray | None = None
    mask: np.ndarray | None = None
    values: np.ndarray | None = None     # sparse: CSR values, indices and indptr over samples
    indices: np.ndarray | None = None
    indptr: np.ndarray | None = None
    seq_offsets: np.ndarray | None = None
    _csr: "scipy.sparse.csr_matrix | None" = field(default=None, repr=False)
    is_bytes: bool = False
    _counted: tuple | None = field(default=None, init=False, repr=False, compare=False)  # see num_samples

    @property
    def csr(self) -> "scipy.sparse.csr_matrix":
        """The sparse samples as a (total samples, dim) scipy CSR matrix (built on first use)."""
        if self._csr is None and self.is_sparse:
            import scipy.sparse as sp  # lazily: only callers that ask for a SciPy matrix pay for SciPy
            indptr = self.indptr
            assert indptr is not None  # a sparse stream has its CSR arrays
            self._csr = sp.csr_matrix((self.values, self.indices, indptr), shape=(len(indptr) - 1, self.dim))
        return self._csr

    @property
    def num_sequences(self) -> int:
        return len(self.lengths)

    @property
    def num_samples(self) -> int:
        """The stream's samples in the minibatch (the sum of ``lengths``), counted once."""
        return _counted_samples(self)

    @property
    def dtype(self) -> np.dtype:
        arr = self.values if self.is_sparse else self.data
        assert arr is not None  # sparse streams have values, dense ones data
        return arr.dtype

    def as_sequences(self) -> list:
        """One (samples, dim) array (dense) or CSR matrix (sparse) per sequence; a bytes stream's values."""
        if self.is_bytes:
            assert self.data is not None
            return list(self.data)
        if self.is_sparse:
            so = self.seq_offsets
            assert so is not None
            return [self.csr[so[i]:so[i + 1]] for i in range(self.num_sequences)]
        data = self.data
        assert data is not None
        return [data[i, :n] for i, n in enumerate(self.lengths)]

    def asarray(self) -> np.ndarray:
        """The padded dense (sequences, T, dim) array (sparse streams are densified; a bytes stream's
        object array as it is)."""
        if not self.is_sparse:
            assert self.data is not None
            return self.data
        T = int(self.lengths.max()) if len(self.lengths) else 0
        out = np.zeros((self.num_sequences, T, self.dim), dtype=self.csr.dtype)
        rows = _padded_rows(self.lengths, T)
        out.reshape(-1, self.dim)[rows] = self.csr.toarray()
        return out


@dataclass
class Minibatch:
    """What ``MinibatchSource.next_minibatch`` returns."""
    streams: dict
    keys: np.ndarray
    lengths: np.ndarray          # per sequence, as counted for the minibatch size
    end_of_sweep: bool
    sweep: int                   # the sweep the minibatch started in
    sweeps: np.ndarray | None = None  # per sequence: its sweep (a minibatch may span two)
    extra: dict = field(default_factory=dict)
    epoch: int | None = None          # with epoch_size: the epoch, and whether this minibatch ends it
    end_of_epoch: bool = False
    _counted: tuple | None = field(default=None, init=False, repr=False, compare=False)  # see num_samples

    def __getitem__(self, name: str) -> StreamBatch:
        return self.streams[name]

    def __contains__(self, name: str) -> bool:
        return name in self.streams

    @property
    def num_sequences(self) -> int:
        return len(self.keys)

    @property
    def num_samples(self) -> int:
        """The samples in the minibatch (the sum of ``lengths``), counted once, like CNTK's
        ``MinibatchData.num_samples``. Counted again when ``lengths`` is replaced; an in-place
        change of ``lengths`` is not seen."""
        return _counted_samples(self)


def _counted_samples(batch) -> int:
    """``batch.lengths``' sum, kept in the object with the array it was counted from: the source and
    a training loop each ask for ``num_samples`` every minibatch, and a NumPy sum costs ~3-4 us
    (~2% of a randomized sweep of short sequences)."""
    counted = batch._counted
    if counted is None or counted[0] is not batch.lengths:
        counted = batch._counted = (batch.lengths, int(np.add.reduce(batch.lengths, dtype=np.int64)))
    return counted[1]


def counted(batch, total: int):
    """``batch`` with ``total`` kept as the sum of its ``lengths`` (``num_samples``), where the
    caller already has it (the gather sums the lengths as it copies them)."""
    batch._counted = (batch.lengths, int(total))
    return batch


def _padded_rows(lengths: np.ndarray, T: int) -> np.ndarray:
    """Row index (in a flattened (S*T) array) of every real sample, sequence by sequence."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    seq = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    t = np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)
    return seq * T + t


def prepared_views(chunk, specs) -> dict:
    """Per chunk, once: the arrays the per-stream gather kernels take (byte views, int64 keys and
    lengths): what ``_pack_mixed`` reads."""
    prep = chunk.gather_views
    if prep is None:
        prep = {"__keys__": chunk.keys.view(np.int64),
                "__lengths__": np.ascontiguousarray(chunk.lengths, dtype=np.int64)}
        for spec in specs:
            if spec.is_bytes:  # gathered by _gather_bytes, not the kernels
                continue
            col = chunk.columns[spec.name]
            vals = np.ascontiguousarray(col.values)
            if spec.is_sparse:
                prep[spec.name] = (vals.view(np.uint8), col.indices, col.indptr, col.seq_offsets, vals.dtype)
            else:
                # (rows, offsets, what gather_padded takes, dtype): the kernel sees frames itself
                # (offsets 0, 1, ..., n: sequence j is row j)
                rows = vals.view(np.uint8).reshape(-1, spec.dim * vals.dtype.itemsize)
                prep[spec.name] = (rows, col.seq_offsets, col.seq_offsets, vals.dtype)
        chunk.gather_views = prep
    return prep


def chunk_columns(chunk, specs) -> tuple:
    """Per chunk, once: its arrays checked into a compiled ``ChunkColumns`` (what ``_gather.pack``
    takes), and each stream's dtype. Made as few NumPy calls as possible: the chunk cache makes it
    as each chunk loads, and a sweep of small chunks makes thousands."""
    cols = chunk.gather_columns
    if cols is None:
        streams: list[tuple] = []
        dtypes = []
        objects = []
        for spec in specs:
            col = chunk.columns[spec.name]
            if spec.is_bytes:
                objects.append(_bytes_values(col, spec))
                dtypes.append(_OBJECT)
                continue
            vals = col.values
            if not vals.flags.c_contiguous:
                vals = np.ascontiguousarray(vals)
            dtypes.append(vals.dtype)
            raw = vals.view(np.uint8)
            if spec.is_sparse:
                streams.append(("sparse", raw, col.indices, col.indptr, col.seq_offsets, vals.dtype.itemsize))
            else:
                row_bytes = spec.dim * vals.dtype.itemsize
                if raw.ndim != 2 or raw.shape[1] != row_bytes:
                    raw = raw.reshape(-1, row_bytes)
                streams.append(("dense", raw, col.seq_offsets, row_bytes))
        lengths = chunk.lengths
        if lengths.dtype != np.int64 or not lengths.flags.c_contiguous:
            lengths = np.ascontiguousarray(lengths, dtype=np.int64)
        if objects:  # never lent: the kernel's views are of numeric streams only
            table = _BytesColumns(chunk.keys.view(np.int64), lengths, streams)
            table.objects = objects
        else:
            table = _gather.ChunkColumns(chunk.keys.view(np.int64), lengths, streams, chunk.lendable)
        cols = chunk.gather_columns = (table, tuple(dtypes))
    return cols


_OBJECT = np.dtype(object)


class _BytesColumns(_gather.ChunkColumns):
    """A chunk's ``ChunkColumns`` (its numeric streams, for the kernel) with its bytes streams'
    object arrays in ``objects`` (in stream order), which ``_gather_bytes`` picks from: Python
    objects cannot be copied without the GIL, and a bytes value costs far more to use than to pick."""


def _bytes_values(col, spec) -> np.ndarray:
    values = getattr(col, "values", None)
    if not getattr(col, "is_bytes", False) or not isinstance(values, np.ndarray) or values.dtype != _OBJECT:
        raise ValueError(f"stream '{spec.name}' is declared bytes, the chunk's column is "
                         f"{'sparse' if col.is_sparse else 'dense'} numbers")
    return values


def _gather_bytes(objects: list, slot: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """``objects[slot[i]][seq[i]]`` for every pick, as an object array: one fancy index per chunk
    picked from (``objects`` holds None at slots no pick uses)."""
    out = np.empty(len(slot), dtype=object)
    if len(slot) == 0:
        return out
    lo, hi = int(slot.min()), int(slot.max())
    if lo == hi:
        out[:] = objects[lo][seq]
        return out
    for k in np.unique(slot).tolist():
        at = slot == k
        out[at] = objects[k][seq[at]]
    return out


def _bytes_batch(spec, values: np.ndarray) -> "StreamBatch":
    return StreamBatch(spec.name, False, 1, np.ones(len(values), dtype=np.int64), data=values, is_bytes=True)


def pack_from_chunks(chunks: list, slot: np.ndarray, seq: np.ndarray, specs, *, frame_mode: bool = False):
    """Pack sequences ``seq[i]`` of ``chunks[slot[i]]`` straight from the chunks' columns.

    One compiled call copies every picked sequence of every stream, with keys and lengths
    (``engine/_gather.pyx``: ``pack`` over each chunk's ``ChunkColumns``). Returns (streams, keys,
    lengths, the sum of lengths): ``counted(minibatch, total)`` keeps that sum as its ``num_samples``.
    """
    slot = np.ascontiguousarray(slot, dtype=np.int64)
    seq = np.ascontiguousarray(seq, dtype=np.int64)
    if not chunks:  # the streams' layout comes from the chunks: without one there is nothing to pack
        raise ValueError("pack_from_chunks: no chunks to pack from")
    cols = [chunk_columns(c, specs) for c in chunks]
    dtypes = cols[0][1]
    if any(c[1] != dtypes for c in cols[1:]):
        return _pack_mixed(chunks, slot, seq, specs, frame_mode)
    return pack_from_table([c[0] for c in cols], dtypes, slot, seq, specs, frame_mode=frame_mode)


def pack_from_table(table: list, dtypes: tuple, slot: np.ndarray, seq: np.ndarray, specs, *,
                    frame_mode: bool = False):
    """``pack_from_chunks`` over a table of ``ChunkColumns`` whose streams all have ``dtypes``
    (``ChunkCache.columns``: None at free slots), ``slot`` indexing the table: no Python work per
    chunk, however many chunks the minibatch draws from."""
    keys, lengths, total, outs = _gather.pack(table, slot, seq)
    streams = {}
    numeric, b = iter(outs), 0
    for spec, dtype in zip(specs, dtypes):
        if spec.is_bytes:
            objects = [None if t is None else t.objects[b] for t in table]
            streams[spec.name] = _bytes_batch(spec, _gather_bytes(objects, slot, seq))
            b += 1
        else:
            streams[spec.name] = _stream_batch(spec, dtype, next(numeric), frame_mode)
    return streams, keys.view(np.uint64), lengths, total


def lend_from_table(table: list, dtypes: tuple, slot: np.ndarray, seq: np.ndarray, specs, *,
                    frame_mode: bool = False):
    """``pack_from_table``'s minibatch without copying, where the picks are consecutive sequences of
    one lendable chunk (``_gather.lend_run``: an in-order minibatch inside a chunk): its samples are
    views of the chunk's columns. Returns what ``pack_from_table`` returns and whether any array is
    a view (the chunk was lent), or None when the picks are not such a run."""
    lent = _gather.lend_run(table, slot, seq)
    if lent is None:
        return None
    keys, lengths, total, outs, viewed = lent
    return _streams(specs, dtypes, outs, frame_mode), keys.view(np.uint64), lengths, total, viewed


def _streams(specs, dtypes, outs, frame_mode: bool) -> dict:
    """Name -> StreamBatch from what a gather returned per stream."""
    return {spec.name: _stream_batch(spec, dtype, out, frame_mode) for spec, dtype, out in zip(specs, dtypes, outs)}


def _stream_batch(spec, dtype, out, frame_mode: bool) -> "StreamBatch":
    """A StreamBatch from what the gather of one stream returned."""
    if spec.is_sparse:
        vals, ind, ptr, lens, so = out
        _check_frames(spec, lens, frame_mode)
        return StreamBatch(spec.name, True, spec.dim, lens, values=vals.view(dtype), indices=ind, indptr=ptr,
                           seq_offsets=so)
    data, lens, T = out
    _check_frames(spec, lens, frame_mode)
    data = data.view(dtype).reshape(len(lens), T, spec.dim)
    return StreamBatch(spec.name, False, spec.dim, lens, data=data, mask=np.arange(T) < lens[:, None])


def _pack_mixed(chunks, slot, seq, specs, frame_mode):
    """Chunks whose stream differs in dtype (no reader makes them; a hand-built deserializer
    could): each such stream's values cast to the common dtype, then gathered as usual."""
    preps = [prepared_views(c, specs) for c in chunks]
    keys = _gather.gather_items([p["__keys__"] for p in preps], slot, seq).view(np.uint64)
    lengths = _gather.gather_items([p["__lengths__"] for p in preps], slot, seq)
    streams = {}
    for spec in specs:
        if spec.is_bytes:
            objects = [_bytes_values(c.columns[spec.name], spec) for c in chunks]
            streams[spec.name] = _bytes_batch(spec, _gather_bytes(objects, slot, seq))
            continue
        parts = [p[spec.name] for p in preps]
        dtype = np.result_type(*[x[-1] for x in parts])
        if spec.is_sparse:
            vals = [x[0].view(x[4]).astype(dtype, copy=False).view(np.uint8) for x in parts]
            out = _gather.gather_sparse(vals, [x[1] for x in parts], [x[2] for x in parts], [x[3] for x in parts],
                                        slot, seq, dtype.itemsize)
        else:
            rows = [x[0].view(x[3]).astype(dtype, copy=False).view(np.uint8) for x in parts]
            out = _gather.gather_padded(rows, [x[2] for x in parts], slot, seq, spec.dim * dtype.itemsize)
        streams[spec.name] = _stream_batch(spec, dtype, out, frame_mode)
    return streams, keys, lengths, int(np.add.reduce(lengths, dtype=np.int64))


def _check_frames(spec, lengths: np.ndarray, frame_mode: bool) -> None:
    # a UsageError (a ValueError): the caller's frame_mode does not fit the data (CLI: exit 2, one line)
    if frame_mode and len(lengths) and lengths.max() > 1:
        from recordkit.errors import UsageError
        raise UsageError(f"frame mode needs single-sample sequences, but stream '{spec.name}' has a "
                         f"sequence of {int(lengths.max())} samples (CNTK: 'Detected a non-frame sequence')")
