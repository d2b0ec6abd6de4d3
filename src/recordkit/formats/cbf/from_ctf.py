"""CTF -> CBF without intermediate columns: the converter's fast path.

``CTFReader`` + ``CBFWriter`` parse each chunk into columns, then encode those into CBF
chunk bytes (a second copy) and write them (a third). Here the CTF kernel parses each
piece of a chunk straight into CBF's per-stream records (``ChunkParser.parse_cbf``): a
CBF chunk is the sample counts of its sequences followed, stream by stream, by those
sequences' records, so every output chunk is written with ``os.pwritev`` from slices of
the parsed buffers. The file is the same, byte for byte, as ``CBFWriter`` writes from
the same reader: sequences go into chunks by the same rule (a chunk closes after the
sequence that brings it to ``chunk_size`` bytes), the meta count is the maximum over
streams, and the header is the same.

Pieces of about ``PIECE_SIZE`` input bytes are parsed by ``threads`` threads (GIL
released) with ``prefetch`` chunks ahead, so output chunks close, and are written, while
later pieces are still being parsed. Writes run on one writer thread: each range is
fallocated first (buffered writes into allocated blocks are much cheaper on ext4) and
handed to writeback right away (``sync_file_range``), so the fsync before the rename has
little left to flush. The last chunk's first stream is written before that chunk closes
(see ``_Chunker``), which leaves little to write after the last piece. Errors and
warnings are charged to the reader's budget chunk by chunk, as ``iter_chunks`` does.
"""
from __future__ import annotations

from contextlib import closing

import numpy as np

from recordkit.engine.streams import check_streams
from recordkit.formats.cbf.output import CBFOutput

from recordkit.engine import DEFAULT_CHUNK_SIZE  # noqa: E402,F401  (one constant)
PIECE_SIZE = 4 << 20  # input bytes parsed per task


def supports(reader, dtype) -> bool:
    """Whether ``convert`` can take this reader: a CTFReader parsing in the output's element type."""
    from recordkit.formats.ctf.reader import CTFReader
    return isinstance(reader, CTFReader) and np.dtype(reader.dtype) == np.dtype(dtype) and reader.parses_into_cbf


class _Chunker:
    """Groups parsed sequences into CBF chunks by CBFWriter's rule and queues them for writing.

    A chunk's layout (the meta of all its sequences, then each stream's records) is known
    only when it closes, so its bytes are normally written then. The last chunk would thus
    be written entirely after the last piece is parsed, followed by the fsync. To shorten
    that tail, when a new chunk starts and the rest of the input looks too small to fill
    it, the chunk is assumed to be the last and to hold every remaining indexed sequence:
    that fixes its sequence count N, hence where its first stream's records go (after 4*N
    bytes of meta), and those are written as pieces arrive. When the chunk closes, the
    guess is checked (exactly N sequences, nothing dropped): if it held, only the meta and
    the other streams are left to write; if not, the whole chunk is written at its place,
    over the speculative bytes (and the file is cut to its real length at the end).
    """

    def __init__(self, out: CBFOutput, nstreams: int, chunk_size: int, total_sequences: int, end_offset: int):
        self.out = out
        self.ns = nstreams
        self.chunk_size = chunk_size
        self._pending = []  # (meta, streams, a, b): sequences [a, b) of a parsed piece
        self._pending_bytes = 0
        self._total = total_sequences     # indexed sequences in the input
        self._end = end_offset            # input byte offset where the last sequence ends
        self._in_bytes = 0                # input bytes of the pieces added so far
        self._out_bytes = 0               # CBF bytes of their sequences
        self._spec = None                 # [N, bytes of stream 0 written, segments written]
        self.guesses = [0, 0]             # last-chunk guesses that held, that did not

    def add(self, meta, streams, first_index: int, kept, piece_start: int, piece_end: int) -> None:
        """Add a parsed piece: ``kept`` = index positions of its sequences (relative to first_index),
        covering input bytes [piece_start, piece_end)."""
        n = len(meta)
        self._in_bytes += piece_end - piece_start
        if n == 0:
            return
        sizes = np.full(n, 4, dtype=np.int64)
        for _buf, offs in streams:
            sizes += np.diff(offs)
        cum = np.cumsum(sizes)
        self._out_bytes += int(cum[-1])
        start = 0
        while start < n:
            if not self._pending:
                self._maybe_speculate(first_index + int(kept[start]), piece_start)
            room = self.chunk_size - self._pending_bytes
            base = int(cum[start - 1]) if start else 0
            # the chunk closes after the first sequence that brings it to chunk_size or more
            end = int(np.searchsorted(cum, base + room, side="left")) + 1
            end = min(max(end, start + 1), n)
            self._pending.append((meta, streams, start, end))
            self._pending_bytes += int(cum[end - 1]) - base
            if self._spec is not None:
                nseq, s0, segs = self._spec
                buf, offs = streams[0]
                lo, hi = int(offs[start]), int(offs[end])
                self.out.write_at([memoryview(buf)[lo:hi]], self.out.pos + 4 * nseq + s0)
                self._spec = [nseq, s0 + hi - lo, segs + 1]
            if self._pending_bytes >= self.chunk_size:
                self.flush()
            start = end

    def _maybe_speculate(self, first_index: int, input_offset: int) -> None:
        self._spec = None
        if self._in_bytes <= 0 or self._out_bytes <= 0:
            return
        remaining = max(self._end - input_offset, 0) * (self._out_bytes / self._in_bytes)
        if remaining < 0.9 * self.chunk_size:
            self._spec = [self._total - first_index, 0, 0]

    def flush(self) -> None:
        if not self._pending:
            return
        metas = [meta[a:b] for meta, _streams, a, b in self._pending]
        nseq = sum(len(m) for m in metas)
        spec, self._spec = self._spec, None
        done0 = spec is not None and spec[0] == nseq and spec[2] == len(self._pending)
        if spec is not None:
            self.guesses[0 if done0 else 1] += 1
        pos = self.out.add_chunk(metas, self._pending_bytes)
        buffers = [memoryview(m).cast("B") for m in metas]
        at = pos
        for s in range(self.ns):
            section = []
            for _meta, streams, a, b in self._pending:
                buf, offs = streams[s]
                lo, hi = int(offs[a]), int(offs[b])
                if hi > lo:
                    section.append(memoryview(buf)[lo:hi])
            if s == 0 and done0:
                # already written where it belongs (the guess held)
                self.out.write_at(buffers, at)
                at += sum(len(b) for b in buffers) + spec[1]
                buffers = []
                continue
            buffers += section
        self.out.write_at(buffers, at)
        self._pending = []
        self._pending_bytes = 0


def convert(reader, path, *, streams=None, chunk_size: int = DEFAULT_CHUNK_SIZE, threads: int = 2,
            prefetch: int = 1, piece_size: int | None = None, progress=None, storage_options=None,
            checksums: bool = False) -> int:
    """Write every sequence ``reader`` (a CTFReader) reads into a CBF file at ``path``.

    ``streams`` name the output streams (default: the reader's); the element type is the
    reader's precision. Each input chunk is parsed in pieces of about ``piece_size`` bytes
    (at least ``threads`` pieces), so output chunks fill, and are written, while later
    pieces are still being parsed. ``progress(nbytes)`` is called with the input bytes of
    each chunk parsed. Returns the number of sequences written. The file appears under
    ``path`` only when complete (temporary file, fsync, rename); on an error nothing is
    left behind. ``path`` may be an fsspec URL (written locally, uploaded when complete);
    ``checksums=True`` also writes the ``.rkcrc`` sidecar.
    """
    streams = check_streams(streams if streams is not None else reader.streams)
    if int(chunk_size) <= 0:
        raise ValueError(f"chunk_size must be positive, not {chunk_size}")
    idx = reader.index
    out = CBFOutput(path, streams, reader.dtype, storage_options=storage_options, checksums=checksums)
    chunker = _Chunker(out, len(streams), int(chunk_size), len(idx), int(idx.offsets[-1] + idx.sizes[-1]))
    try:
        with closing(reader.cbf_pieces(threads=threads, prefetch=prefetch,
                                       piece_size=piece_size or PIECE_SIZE)) as pieces:
            for chunk_id, piece, last in pieces:
                lo, buf, parsed = piece
                meta, recs = parsed[1]
                chunker.add(meta, recs, lo, parsed[0], int(idx.offsets[lo]), int(idx.offsets[lo]) + len(buf))
                # a chunk's errors are charged once its last piece is taken (the budget may raise:
                # the output is then discarded)
                if last and progress is not None:
                    progress(reader.chunks[chunk_id].size)
        chunker.flush()
        # a declared stream without a single sample (a mistyped alias): an error, and nothing published
        reader.check_stream_presence()
    except BaseException:
        out.abort()
        raise
    try:
        out.close()
    except BaseException:
        out.abort()
        raise
    return out.sequences_written

