"""CTFReader: the CNTK text format as a chunked deserializer.

Opening a reader scans the file once into an index (or loads a cached one), groups
the sequences into chunks of about ``chunk_size`` bytes, and then loads one chunk at a
time: read its byte range, parse it in the compiled kernel with the GIL released,
and hand back columnar ``ChunkData``. Memory is bounded by the chunks in flight, not
the file size, and ``iter_chunks(threads=N)`` parses chunks in parallel.

Errors follow CNTK's ``maxErrors`` budget (see ``recordkit.errors.ErrorBudget``),
with three deliberate differences from CNTK 2.7 that the README lists.
"""
from __future__ import annotations

import os
import threading
from collections import Counter
from contextlib import closing
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Iterable, Iterator

import numpy as np

from recordkit.formats.closing import ClosingReader
from recordkit.engine.chunk import ChunkData, DenseColumn, Sequence, SparseColumn
from recordkit.engine.deserializer import ChunkInfo
from recordkit.engine.presence import ChecksPresence, StreamPresence, resolve_allowed
from recordkit.engine.streams import StreamSpec, check_streams, resolve_precision
from recordkit.errors import (TRACE_INFO, TRACE_WARNINGS, ErrorBudget, FormatError, WarningLimit,
                              trace_chunk_loaded, trace_level as _trace_level, warn)
from recordkit.formats.ctf import _kernel, index as ctf_index, messages as msg
from recordkit.storage import open_source
from recordkit.storage.read_buffers import ReadBuffers

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

from recordkit.engine import DEFAULT_CHUNK_SIZE  # noqa: E402,F401  (one constant)

# each kind of warning, as the count of those not shown names it at the end of a command
_KINDS = {msg.W_PADDED: "dense input padded with zeros", msg.W_UNKNOWN: "undeclared input skipped",
          msg.W_EMPTY_SEQUENCE: "sequence without declared inputs skipped"}


class CTFReader(ChecksPresence, ClosingReader):
    """Read a CTF file as sequences of declared streams.

    Parameters mirror CNTK's CNTKTextFormatReader: ``precision`` ('float' or
    'double'), ``max_errors`` (maxErrors), ``skip_sequence_ids`` (skipSequenceIds),
    ``trace_level`` (traceLevel: 0 errors only, the tolerated ones counted in ``summary()`` but not
    listed; 1 each tolerated error and warning too; 2 each chunk loaded too; None: the default of
    ``recordkit.errors.set_trace_level``, 1 unless changed), ``chunk_size``
    (chunkSizeInBytes), ``cache_index`` (cacheIndex) and ``keep_data_in_memory``
    (keepDataInMemory: parse each chunk once and keep it).

    A declared stream without a single sample in the whole file (a mistyped alias, say) is an
    ``EmptyStreamError`` once every chunk has been read: at the end of ``iter_chunks`` /
    iteration, when ``load_chunk`` loads the last unread chunk, or on ``close()``;
    ``allow_empty_streams`` (stream names or aliases) allows it for those streams
    (``recordkit.engine.presence``). Likewise a dense stream none of whose samples has its
    declared dim (``features=dense:5`` over rows of 4: every sample zero padded) is a
    ``PaddedStreamError`` naming both widths; ``allow_padding`` (names or aliases) allows it. Short
    rows in some samples are CTF's own and are padded with a warning, as CNTK does.

    ``path`` may be an fsspec URL (``storage_options`` for its filesystem): the index scan
    streams the file once, each chunk is then one ranged read (retried on failure), and
    ``cache_dir`` keeps chunk ranges and the index on the local disk. A ``.rkcrc``
    checksum sidecar, when present, is verified on every read.
    """

    def __init__(self, path: str | os.PathLike[str], streams: Iterable[StreamSpec], *, precision: str = "float",
                 max_errors: int = 0, skip_sequence_ids: bool = False, trace_level: int | None = None,
                 chunk_size: int = DEFAULT_CHUNK_SIZE, cache_index: bool = False,
                 keep_data_in_memory: bool = False, allow_empty_streams: str | Iterable[str] | None = None,
                 storage_options: dict | None = None, cache_dir: str | None = None,
                 allow_padding: str | Iterable[str] | None = None) -> None:
        self.path = path if isinstance(path, str) else os.fspath(path)
        self._streams = check_streams(streams)
        resolve_allowed(self._streams, allow_empty_streams)  # an unknown name fails before the file is opened
        resolve_allowed(self._streams, allow_padding, "allow_padding")
        self.dtype = resolve_precision(precision)
        self.skip_sequence_ids = bool(skip_sequence_ids)
        self.trace_level = _trace_level(trace_level)
        if int(chunk_size) <= 0:
            raise ValueError(f"chunk_size must be positive, not {chunk_size}")
        self.chunk_size = int(chunk_size)
        self.keep_data_in_memory = bool(keep_data_in_memory)
        self.budget = ErrorBudget(max_errors, warn=self._warn_error)
        self.warning_counts: Counter = Counter()
        self._shown = WarningLimit(self.path, level=self.trace_level)
        self._lock = threading.Lock()
        self._charged: set[int] = set()
        self._memory: dict[int, ChunkData] = {}
        # text read buffers reused across the chunk loads of a burst (storage/read_buffers.py;
        # ``retaining_buffers``): a fresh 33 MB bytes object per chunk cost its page faults, as
        # much as the parse's own memory; between bursts none is held (memory bounds count on it)
        self._buffers = ReadBuffers(keep=2, only_while_held=True)
        self._density = None  # sparse entries per byte of text, sampled when first needed

        self._source = open_source(self.path, storage_options=storage_options, cache_dir=cache_dir)
        try:
            idx = self._open_index(cache_index, cache_dir)
        except BaseException:
            self._source.close()
            raise
        if len(idx) == 0:
            raise FormatError(self.path, "input file is empty: no sequences found", line=1, column=1)
        self.index = idx
        self._bounds = idx.chunk_bounds(self.chunk_size)
        self._chunks = self._describe_chunks()
        self._presence = StreamPresence(self.path, self._streams, len(self._chunks), allow_empty_streams,
                                        where=dict(line=int(idx.first_lines[0]) + 1, column=1),
                                        allow_padding=allow_padding)

        mb = [i for i, s in enumerate(self._streams) if s.defines_mb_size]
        self._parser = _kernel.ChunkParser(
            [s.alias.encode("utf-8") for s in self._streams],
            [s.is_sparse for s in self._streams],
            [s.dim for s in self._streams],
            self.dtype == np.float64,
            mb[0] if mb else -1,
        )
        self._mb_stream = mb[0] if mb else -1

    def _open_index(self, cache_index: bool, cache_dir):
        """The sequence index: from the cache when allowed and valid, else one scan of the file.

        A local file's cache lives beside it (CNTK's cacheIndex); a remote file's only in
        ``cache_dir`` (with none given, a remote file is scanned on every open).
        """
        src = self._source
        cache = cache_index and (not src.remote or cache_dir is not None)
        where = dict(fingerprint=src.fingerprint, cache_dir=cache_dir if src.remote else None)
        idx = ctf_index.load_cached(self.path, self.skip_sequence_ids, **where) if cache else None
        self.index_from_cache = idx is not None
        if idx is None:
            idx = ctf_index.scan(src, skip_sequence_ids=self.skip_sequence_ids)
            self._charge_index_errors(idx)
            if cache:
                ctf_index.write_cache(self.path, self.skip_sequence_ids, idx, **where)
        return idx

    # -- the Deserializer protocol -----------------------------------------------------------
    @property
    def streams(self) -> list[StreamSpec]:
        return list(self._streams)

    @property
    def chunks(self) -> list[ChunkInfo]:
        return list(self._chunks)

    splits_chunks = True  # load_chunk(cid, threads=N) parses N pieces of the chunk at once

    def sequence_location(self, chunk_id: int, index: int, sample: int | None = None, *,
                          key: int | None = None) -> str:
        """Where sequence ``index`` of a chunk is: file and line (what ``verify`` and errors print)."""
        s = int(self._bounds[chunk_id]) + index
        line = int(self.index.first_lines[s]) + 1
        sam = f", sample {sample}" if sample is not None else ""
        return f"{self.path}:{line} (sequence {key if key is not None else s}{sam})"

    def load_chunk(self, chunk_id: int, *, threads: int = 1) -> ChunkData:
        """Parse one chunk; ``threads`` > 1 parses byte-balanced pieces of it in parallel
        (for a caller that waits on this chunk alone, e.g. the first minibatch)."""
        data = self._load_chunk(chunk_id, threads)
        self._presence.check()  # the last unread chunk: a stream empty in the whole file is an error now
        return data

    def _load_chunk(self, chunk_id: int, threads: int = 1) -> ChunkData:
        if chunk_id in self._memory:
            return self._memory[chunk_id]
        stop = self._stop_after(chunk_id)
        pieces = self._pieces(chunk_id, threads)
        parsed = []
        try:
            if len(pieces) == 1:
                parsed.append(self._parse_piece(chunk_id, *pieces[0], stop, reuse=True))
            else:
                with ThreadPoolExecutor(max_workers=len(pieces), thread_name_prefix="recordkit-ctf") as pool:
                    futures = [pool.submit(self._parse_piece, chunk_id, lo, hi, stop, reuse=True)
                               for lo, hi in pieces]
                    wait(futures)  # all of them: none may still read into a buffer given back below
                    parsed.extend(f.result() for f in futures if f.exception() is None)
                    for f in futures:
                        f.result()  # the first failure, if any
            return self._finish_chunk(chunk_id, parsed)
        finally:
            self._give_back(parsed)

    def retaining_buffers(self) -> AbstractContextManager[ReadBuffers]:
        """A context in which chunk loads pass their text buffers on to the next load (a burst,
        e.g. every chunk a minibatch waits for: ``ChunkCache.ensure``); outside one a load's
        buffers are let go when it ends, so an idle reader holds only its chunks."""
        return self._buffers.hold()

    # -- conveniences --------------------------------------------------------------------------
    def sequence_lengths(self, chunk_id: int) -> np.ndarray:
        """Index estimate of each sequence's length (its non-blank lines), without parsing."""
        lo, hi = int(self._bounds[chunk_id]), int(self._bounds[chunk_id + 1])
        return self.index.rows[lo:hi].astype(np.int64)

    def sequence_keys(self, chunk_id: int) -> np.ndarray:
        """Keys of the chunk's described sequences, without parsing."""
        lo, hi = int(self._bounds[chunk_id]), int(self._bounds[chunk_id + 1])
        return self.index.keys[lo:hi]

    def estimated_chunk_bytes(self) -> np.ndarray:
        """Decoded bytes of each chunk, from the index (what ``max_memory`` and ``recordkit plan``
        count): dense streams as rows x dim values (exact when every line has every dense
        stream), sparse ones as a row pointer per row plus (value, int32 index) per entry, the
        entries per byte of text counted (one ':' each) in a few 64 KiB samples of the file."""
        if getattr(self, "_estimates", None) is None:
            from recordkit.engine.memory import generic_chunk_bytes
            density = self._sparse_density() if any(s.is_sparse for s in self._streams) else None
            self._estimates = generic_chunk_bytes(self._streams, self._chunks, itemsize=self.dtype.itemsize,
                                                  sparse_entries_per_byte=density)
        return self._estimates.copy()

    def _sparse_density(self, samples: int = 8, size: int = 64 << 10) -> float:
        """Sparse entries per byte of text, from up to ``samples`` pieces of ``size`` bytes spread
        over the file (4 KiB pieces of a cached index's file would do as well; this costs < 1 ms)."""
        if self._source is None:
            return 1 / 8
        total = int(self._source.size)
        starts = sorted({min(max(total - size, 0), total * k // samples) for k in range(samples)})
        colons = seen = 0
        for start in starts:
            buf = bytes(self._source.pread(start, min(size, total - start)))
            colons += buf.count(b":")
            seen += len(buf)
        return colons / seen if seen else 1 / 8

    @property
    def errors_counted(self) -> int:
        return self.budget.count

    @property
    def num_sequences(self) -> int:
        """Sequences in the index (before any is dropped for errors)."""
        return len(self.index)

    def iter_chunks(self, threads: int = 2, prefetch: int = 1, *, whole: bool = True) -> Iterator[ChunkData]:
        """Every chunk in file order, parsed by ``threads`` threads (GIL released).

        Each chunk is cut into ``threads`` pieces of about equal bytes, so even a file
        of one or two chunks keeps every thread busy; ``prefetch`` chunks are parsed
        ahead of the one being consumed. ``whole=False`` yields the pieces as they are
        (consecutive runs of a chunk's sequences) instead of joining them, which saves a
        copy for consumers that take sequences in order anyway, such as a converter.
        """
        if threads <= 1:
            for i in range(len(self._chunks)):
                yield self._load_chunk(i)
            self._presence.check()
            return
        ahead = self._parse_ahead(lambda c: self._pieces(c, threads), threads, prefetch,
                                  skip=lambda c: c in self._memory, reuse=whole)
        # the whole file is one burst of loads: text buffers are reused until the last chunk
        with closing(ahead), self._buffers.hold():  # the pool shut down here, not whenever the GC finds it
            for i, futures in ahead:
                if i in self._memory:  # kept meanwhile (keep_data_in_memory): its parse is not needed
                    for f in futures or ():
                        f.cancel()
                    yield self._memory[i]
                    continue
                pieces = [f.result() for f in futures]
                if whole or len(pieces) == 1:
                    try:
                        data = self._finish_chunk(i, pieces)
                    finally:
                        self._give_back(pieces)
                    yield data
                else:
                    self._charge_pieces(i, pieces)
                    sequences = samples = 0
                    for piece in pieces:
                        part = self._finish_chunk(i, [piece], remember=False)
                        sequences += len(part)
                        samples += int(part.lengths.sum())
                        yield part
                    self._trace_chunk(i, sequences, samples)
        self._presence.check()  # the end of the sweep: a declared stream without any sample is an error

    # -- the CTF -> CBF fast path (formats/cbf/from_ctf.py) ----------------------------------------
    @property
    def parses_into_cbf(self) -> bool:
        """Whether this reader's kernel can emit CBF records straight from the text."""
        return hasattr(self._parser, "parse_cbf")

    def cbf_pieces(self, *, threads: int = 2, prefetch: int = 2,
                   piece_size: int = 4 << 20) -> Iterator[tuple[int, tuple, bool]]:
        """The file parsed straight into CBF records, in file order: ``(chunk id, (first sequence,
        the piece's text, parsed), last piece of its chunk?)``. ``parsed[1]`` is (per-sequence CBF
        metadata, record buffers). A chunk's errors and warnings are charged (the error budget may
        raise) and its trace line printed once its last piece has been taken, as ``iter_chunks``
        does. Close the generator when stopping early (``contextlib.closing``)."""
        n = len(self._chunks)
        threads, prefetch, piece_size = max(int(threads), 1), max(int(prefetch), 0), max(int(piece_size), 1)

        def pieces(i):
            # the last chunk in smaller pieces, so that the threads finish together
            size = piece_size if i < n - 1 else max(piece_size // 4, 1)
            return self._pieces(i, max(threads, -(-self._chunks[i].size // size)))

        def parsed():
            if threads <= 1:
                for i in range(n):
                    ranges, stop = pieces(i), self._stop_after(i)
                    for k, (lo, hi) in enumerate(ranges):
                        yield i, self._parse_piece(i, lo, hi, stop, True), k == len(ranges) - 1
                return
            with closing(self._parse_ahead(pieces, threads, prefetch, cbf=True)) as ahead:
                for i, futures in ahead:
                    for k, f in enumerate(futures):
                        yield i, f.result(), k == len(futures) - 1

        done = []
        with closing(parsed()) as stream:
            for chunk_id, piece, last in stream:
                done.append(piece)
                yield chunk_id, piece, last
                if last:
                    self._charge_pieces(chunk_id, done)
                    self._trace_chunk(chunk_id, sum(len(p[2][1][0]) for p in done),
                                      sum(int(p[2][1][0].sum(dtype=np.int64)) for p in done))
                    done = []

    def _parse_ahead(self, pieces_of, threads: int, prefetch: int, *, cbf: bool = False, skip=None,
                     reuse: bool = False):
        """(chunk id, futures of its parsed pieces) for every chunk in file order, while the
        pieces (``pieces_of(chunk)``: runs of sequences) of the next ``prefetch`` chunks are
        parsed on ``threads`` threads. Chunks for which ``skip`` says so are not parsed (their
        futures are None). Shared by ``iter_chunks`` and the CTF -> CBF converter
        (``cbf=True``: parse into CBF records). ``reuse``: the pieces' text goes into the
        reader's reusable buffers, which the caller gives back (``_give_back``). Callers must
        close the generator when they stop early (``contextlib.closing``): left to the garbage
        collector, its pool shutdown (joining threads) can run inside another thread's start-up
        and deadlock.
        """
        n = len(self._chunks)
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="recordkit-ctf") as pool:
            pending: dict[int, list | None] = {}
            nxt = 0
            try:
                for i in range(n):
                    while nxt < n and nxt <= i + max(prefetch, 0):
                        if skip is not None and skip(nxt):
                            pending[nxt] = None
                        else:
                            stop = self._stop_after(nxt)
                            pending[nxt] = [pool.submit(self._parse_piece, nxt, lo, hi, stop, cbf, reuse)
                                            for lo, hi in pieces_of(nxt)]
                        nxt += 1
                    yield i, pending.pop(i)
            finally:
                for futures in pending.values():
                    for f in futures or ():
                        f.cancel()

    def _pieces(self, chunk_id: int, parts: int) -> list[tuple[int, int]]:
        """Split a chunk's sequences into up to ``parts`` runs of about equal bytes."""
        lo, hi = int(self._bounds[chunk_id]), int(self._bounds[chunk_id + 1])
        if parts <= 1 or hi - lo < 2:
            return [(lo, hi)]
        offs = self.index.offsets
        start, stop = int(offs[lo]), int(offs[hi - 1] + self.index.sizes[hi - 1])
        targets = start + (stop - start) * np.arange(1, parts) // parts
        cuts = np.searchsorted(offs[lo:hi], targets.astype(np.uint64)) + lo
        edges = sorted({lo, hi, *[int(c) for c in cuts if lo < c < hi]})
        return list(zip(edges[:-1], edges[1:]))

    def __iter__(self) -> Iterator[Sequence]:
        for chunk in self.iter_chunks():
            yield from chunk

    def check_stream_presence(self) -> None:
        """Raise ``EmptyStreamError`` if every chunk has been read and a declared stream (not in
        ``allow_empty_streams``) had no sample; for consumers that read chunks their own way
        (the CTF -> CBF converter calls it before publishing its output)."""
        self._presence.check()

    def close(self) -> None:
        """Release the file; raises ``EmptyStreamError`` if the whole file was read, a declared
        stream had no sample and that was not reported yet."""
        if getattr(self, "_source", None) is not None:
            self._source.close()
            self._source = None
        if getattr(self, "_buffers", None) is not None:
            self._buffers.clear()
        self.check_presence()


    # -- internals -------------------------------------------------------------------------------
    def _describe_chunks(self) -> list[ChunkInfo]:
        idx, b = self.index, self._bounds
        rows_cum = np.concatenate([[0], np.cumsum(idx.rows, dtype=np.int64)])
        infos = []
        for c in range(len(b) - 1):
            lo, hi = int(b[c]), int(b[c + 1])
            start = int(idx.offsets[lo])
            end = int(idx.offsets[hi - 1] + idx.sizes[hi - 1])
            infos.append(ChunkInfo(c, hi - lo, int(rows_cum[hi] - rows_cum[lo]), start, end - start))
        return infos

    def _stop_after(self, chunk_id: int) -> int:
        # the kernel may stop once it has seen enough errors to break the budget;
        # a chunk whose errors were already counted is parsed to the end (0 = never stop)
        if chunk_id in self._charged:
            return 0
        return max(self.budget.remaining, 0) + 1

    def _parse_piece(self, chunk_id: int, lo: int, hi: int, stop_after: int, cbf: bool = False,
                     reuse: bool = False):
        """Read and parse sequences [lo, hi) of the index (part or all of a chunk): (lo, text, parsed).

        ``cbf``: parse into CBF records (``ChunkParser.parse_cbf``, for the converter) instead of columns.
        ``reuse``: read the text into one of the reader's reusable buffers where the source reads
        into a buffer (a local file); the caller gives it back with ``_give_back`` once done with
        the text (the parsed columns never point into it). Measured, one thread parsing the
        sparse 100 MB corpus: the page faults of a fresh bytes object per piece were 15-18% of
        the parse."""
        idx = self.index
        start = int(idx.offsets[lo])
        size = int(idx.offsets[hi - 1] + idx.sizes[hi - 1]) - start
        source = self._source
        if source is None:
            raise ValueError(f"{self.path}: reader is closed")
        read_into = getattr(source, "pread_into", None) if reuse else None
        owner = None  # the pool's buffer behind ``buf``, given back here if the read or parse fails
        if read_into is None:
            buf = source.pread(start, size)
        else:
            owner, buf = self._buffers.take(size, start)
        try:
            got = len(buf) if owner is None else read_into(start, buf)
            if got != size:
                raise FormatError(self.path, f"file shrank while reading: chunk {chunk_id} expected {size} bytes "
                                             f"at offset {start}, got {got}", offset=start)
            parsed = self._parse_text(chunk_id, buf, start, lo, hi, stop_after, cbf)
        except BaseException:
            if owner is not None:
                self._buffers.give(owner)
            raise
        return lo, buf, parsed

    def _parse_text(self, chunk_id: int, buf, start: int, lo: int, hi: int, stop_after: int, cbf: bool):
        """Parse the text of sequences [lo, hi) (``buf``, read from absolute offset ``start``)."""
        idx = self.index
        size = len(buf)
        rows = int(idx.rows[lo:hi].sum())
        self._check_padding(chunk_id, start, size, rows)
        if cbf:
            return self._parser.parse_cbf(buf, start, idx.offsets[lo:hi], idx.sizes[lo:hi], idx.first_lines[lo:hi],
                                          stop_after, rows)
        return self._parser.parse(buf, start, idx.offsets[lo:hi], idx.sizes[lo:hi], idx.first_lines[lo:hi],
                                  stop_after, rows, self._entries_hint(size))

    def _entries_hint(self, size: int) -> int:
        """Sparse entries to reserve per sparse stream for ``size`` bytes of text: the file's
        sampled entries per byte (all sparse streams together), a quarter more for the spread
        between pieces. An overestimate only reserves address space: pages never written are
        not memory the process holds."""
        if not any(s.is_sparse for s in self._streams):
            return 0
        if self._density is None:
            self._density = self._sparse_density()
        return int(self._density * size * 1.25) + 64

    def _give_back(self, pieces) -> None:
        """Return the read buffers of parsed pieces (``_parse_piece(..., reuse=True)``) to the pool."""
        for piece in pieces:
            self._buffers.give_view(piece[1])  # a no-op for pread's own bytes

    def _check_padding(self, chunk_id: int, offset: int, size: int, rows: int) -> None:
        """Refuse a chunk whose dense streams, zero-padded to their declared dims, would take far
        more memory than its text could ever hold (a value takes at least 2 bytes of text, so
        complete data pads to at most 4x its bytes) or than the machine has: a huge declared dim
        on a small file is an error with the size it would need, not gigabytes of zeros."""
        dense = [s for s in self._streams if not s.is_sparse]
        if not dense or rows == 0:
            return
        need = rows * sum(s.dim for s in dense) * self.dtype.itemsize
        if need <= max(_PADDING_FLOOR, _PADDING_RATIO * size):
            from recordkit.engine.memory import available_memory
            available = available_memory()
            if need <= available // 2:
                return
            why = f"more than half of the {_size(available)} of memory available"
        else:
            why = f"{need // max(size, 1)}x the chunk's {_size(size)} of text: most values would be zero padding"
        widest = max(dense, key=lambda s: s.dim)
        raise FormatError(self.path, f"chunk {chunk_id}: {rows} samples padded to the declared dense dims "
                                     f"(stream '{widest.name}' dim {widest.dim}) would need {_size(need)}, "
                                     f"{why}; check the --stream dims", offset=offset, record=f"chunk {chunk_id}")

    def _charge_pieces(self, chunk_id: int, pieces) -> None:
        """Count and report the errors and warnings of a chunk's pieces, once per chunk."""
        with self._lock:
            if chunk_id not in self._charged:
                for lo, buf, (kept, columns, errors, nerr, warns, wcounts, stopped, widest) in pieces:
                    self._charge_events(chunk_id, lo, buf, errors, nerr, warns, wcounts)
                self._charged.add(chunk_id)
                self._presence.count(chunk_id, _stream_samples(pieces, len(self._streams)),
                                     sequences=sum(len(p[2][0]) for p in pieces),
                                     skipped_empty=sum(p[2][5].get(msg.W_EMPTY_SEQUENCE, 0) for p in pieces),
                                     widest=[max(p[2][7][s] for p in pieces) for s in range(len(self._streams))])

    def _finish_chunk(self, chunk_id: int, pieces, *, remember: bool = True) -> ChunkData:
        """Charge the pieces' events (once per chunk), then join them into one ChunkData."""
        self._charge_pieces(chunk_id, pieces)
        kept = np.concatenate([p[0] + p[2][0] for p in pieces])  # absolute index of each sequence read
        keys = self.index.keys[kept] if len(kept) else np.zeros(0, dtype=np.uint64)
        cols = {}
        counts_all = []
        for s, spec in enumerate(self._streams):
            parts = [p[2][1][s] for p in pieces]
            vals, ind, ptr, counts = parts[0] if len(parts) == 1 else _join_columns(parts, spec.is_sparse)
            seq_offsets = np.zeros(len(counts) + 1, dtype=np.int64)
            np.cumsum(counts, out=seq_offsets[1:])
            if spec.is_sparse:
                cols[spec.name] = SparseColumn(vals, ind, ptr, seq_offsets, spec.dim)
            else:
                cols[spec.name] = DenseColumn(vals, seq_offsets)
            counts_all.append(counts)
        if self._mb_stream >= 0:
            lengths = counts_all[self._mb_stream].copy()
        else:
            lengths = np.max(np.vstack(counts_all), axis=0) if len(kept) else np.zeros(0, dtype=np.int64)
        first = int(self._bounds[chunk_id])
        data = ChunkData(chunk_id, keys, lengths, cols, positions=kept - first)
        if remember:  # a whole chunk (pieces are traced by iter_chunks, once per chunk)
            self._trace_chunk(chunk_id, len(data), int(lengths.sum()))
            if self.keep_data_in_memory:
                self._memory[chunk_id] = data
        return data

    def _charge_index_errors(self, idx) -> None:
        for code, _seq, line, col, _stream, a, b in idx.errors:
            self.budget.charge(FormatError(self.path, msg.error_message(code, None, a, b), line=line, column=col),
                               consequence="sequence skipped")
        if idx.error_count > len(idx.errors):
            # the scanner records the first events only; the rest come after the last recorded one
            last = idx.errors[-1] if idx.errors else None
            self.budget.charge_unlocated(self.path, idx.error_count - len(idx.errors),
                                         "further sequence id errors after this line (details not recorded)",
                                         line=last[2] if last else 1, column=1)

    def _charge_events(self, chunk_id, lo, buf, errors, nerr, warns, wcounts) -> None:
        for code, seq, line, col, stream, a, b in errors:
            name = self._streams[stream].name if stream >= 0 else None
            err = FormatError(self.path, msg.error_message(code, name, a, b), line=line, column=col)
            key = int(self.index.keys[lo + seq])
            if code in msg.DROPS_SEQUENCE:
                what = f"sequence {key} skipped" if self.index.id_mode else "line skipped"
            else:
                what = "skipped"
            self.budget.charge(err, consequence=what)
        if nerr > len(errors):
            first_line = int(self.index.first_lines[lo]) + 1
            self.budget.charge_unlocated(self.path, nerr - len(errors),
                                         f"further errors in chunk {chunk_id} at or after this line "
                                         f"(details not recorded)", line=first_line, column=1)
        for code, n in wcounts.items():
            self.warning_counts[code] += n
        if wcounts.get(msg.W_UNKNOWN) or wcounts.get(msg.W_PADDED):
            for code, seq, line, col, stream, a, b in warns:
                if code == msg.W_UNKNOWN:
                    self._presence.note_undeclared(bytes(buf[a:a + b]).decode("utf-8", "replace"), line, col)
                elif code == msg.W_PADDED:
                    self._presence.note_padded(self._streams[stream].name, line, col)
        if self.trace_level < TRACE_WARNINGS:
            return
        located = Counter()
        for code, seq, line, col, stream, a, b in warns:
            located[code] += 1
            if code == msg.W_PADDED:
                text = (f"dense input '{self._streams[stream].name}' has {a} of {b} values: "
                        f"padded with zeros")
            elif code == msg.W_UNKNOWN:
                name = bytes(buf[a:a + b]).decode("utf-8", "replace")
                text = f"input '{name}' is not declared: skipped"
            else:
                text = "sequence has no samples of any declared input: skipped"
            self._warn_kind(code, f"{self.path}:{line}:{col}: {text}")
        for code, n in wcounts.items():  # beyond the events the kernel records: counted, never shown
            if n > located[code]:
                self._warn_unlocated(code, n - located[code])

    def _warn_kind(self, code: int, text: str) -> None:
        """One warning, shown while its kind's limit lasts (``errors.WarningLimit``)."""
        self._shown.warn(_KINDS[code], text)

    def _warn_unlocated(self, code: int, n: int) -> None:
        self._shown.unshown(_KINDS[code], n)

    def _warn_error(self, text: str) -> None:
        # a tolerated error is one of CNTK's warnings: listed from trace level 1, counted at every level
        warn(text, level=self.trace_level)

    def _trace_chunk(self, chunk_id: int, sequences: int, samples: int) -> None:
        """Trace level 2: one line per chunk parsed (CNTK prints one per sequence at its Info level)."""
        if self.trace_level >= TRACE_INFO:
            trace_chunk_loaded(self.path, self._chunks[chunk_id], sequences, samples, level=self.trace_level)

    def summary(self) -> dict:
        """Counts of what was tolerated so far: errors and each kind of warning."""
        return {
            "errors": self.budget.count,
            "max_errors": self.budget.max_errors,
            "padded_samples": self.warning_counts.get(msg.W_PADDED, 0),
            "unknown_inputs": self.warning_counts.get(msg.W_UNKNOWN, 0),
            "empty_sequences": self.warning_counts.get(msg.W_EMPTY_SEQUENCE, 0),
        }


def _stream_samples(pieces, nstreams: int) -> list[int]:
    """Samples per stream in parsed pieces: columns (values, indices, indptr, per-sequence counts),
    or CBF records (``parse_cbf``: each sequence's record starts with its uint32 sample count)."""
    totals = [0] * nstreams
    for _lo, _buf, parsed in pieces:
        columns = parsed[1]
        for s in range(nstreams):
            if isinstance(columns, tuple):  # (meta, [(records, offsets) per stream])
                records, offsets = columns[1][s]
                if len(offsets) > 1:
                    counts = np.frombuffer(records, dtype="<u4")[offsets[:-1] // 4]
                    totals[s] += int(counts.sum(dtype=np.int64))
            else:
                totals[s] += int(columns[s][3].sum())
    return totals


def _join_columns(parts, sparse: bool):
    """Concatenate one stream's columns parsed from consecutive pieces of a chunk."""
    vals = np.concatenate([p[0] for p in parts])
    counts = np.concatenate([p[3] for p in parts])
    if not sparse:
        return vals, None, None, counts
    ind = np.concatenate([p[1] for p in parts])
    ptrs = []
    base = 0
    for p in parts:
        ptrs.append(p[2][:-1] + base)
        base += int(p[2][-1])
    ptrs.append(np.array([base], dtype=np.int64))
    return vals, ind, np.concatenate(ptrs), counts


_PADDING_FLOOR = 256 << 20  # below this a chunk's padded values are never refused
_PADDING_RATIO = 64         # padded bytes per byte of text beyond which a chunk is refused


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}" if unit != "bytes" else f"{n} bytes"
        n /= 1024
