"""CBFReader: the CNTK binary format as a chunked deserializer.

Chunks are read with pread (a memory map would turn a file truncated while being read into a
SIGBUS crash); opening the file validates the prefix, header and offset table,
and each chunk is validated as it is loaded (every count against the bytes holding
it, sparse indices against the dimension, per-sample non-zero counts against NNZ)
by the compiled kernel, which then gathers each stream into one contiguous column.
Errors name the file, the byte offset and the chunk.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Iterable, Iterator

import numpy as np

from recordkit.formats.closing import ClosingReader
from recordkit.engine.chunk import ChunkData, DenseColumn, Sequence, SparseColumn
from recordkit.engine.deserializer import ChunkInfo
from recordkit.engine.presence import ChecksPresence, StreamPresence
from recordkit.engine.streams import StreamSpec, resolve_precision
from recordkit.errors import TRACE_INFO, FormatError, UsageError, trace_chunk_loaded, trace_level as _trace_level
from recordkit.formats.cbf import _kernel, layout
from recordkit.storage import open_source
from recordkit.storage.source import Prefetched, read_ranges
from recordkit.storage.read_buffers import PAGE as _PAGE, ReadBuffers

# below this a chunk is read and gathered by one thread even when more are offered: starting
# the threads (~0.1 ms) would cost more than they save
_SPLIT_BYTES = 1 << 20


def _run_all(pool, fn, items) -> None:
    """``fn(item)`` for every item on ``pool``; every call has ended before the first error is
    raised (the buffer they share must not go back to the pool while one still uses it)."""
    futures = [pool.submit(fn, item) for item in items]
    wait(futures)
    for f in futures:
        f.result()


_PROBLEMS = {
    1: "the per-sequence sample counts run past the chunk",
    2: "sequence data runs past the end of the chunk",
    3: "negative non-zero count",
    4: "sparse index out of range",
    5: "per-sample non-zero counts do not add up to the sequence's NNZ",
    6: "negative per-sample non-zero count",
    7: "bytes left over after the last stream of the chunk",
    8: "the chunk is too small for its sequences and streams",
}
_P_TABLE_SAMPLES = 9  # the kernel's code: the sequences' sample counts differ from the offset table's
# a run of adjacent small chunks is read with one pread and decoded by one kernel call up to this
# many bytes (``load_chunks``): the read buffer a run needs while it loads, what ``plan.load_bytes``
# counts for each load in flight of a reader that loads runs
RUN_BYTES = 1 << 20
# chunks of a run closer than this in the file are read with the bytes between them: a read costs
# about as much as copying 32 KB
_GAP_BYTES = 32 << 10
# a local file's per-chunk sample-count tables are read this many chunks at a time (sequence_lengths)
_LENGTHS_AHEAD = 1024


class CBFReader(ChecksPresence, ClosingReader):
    """Read a CBF file.

    ``streams``: None for every stream of the file under its own name; or a list of
    ``StreamSpec`` / a ``{name: name_in_file}`` dict to select streams and rename them
    (CNTK's ``alias``: the stream of the file named by the alias is delivered as
    ``name``). ``precision``: None keeps each stream's element type; 'float' or
    'double' converts. ``keep_data_in_memory`` caches loaded chunks. ``trace_level`` 2 (CNTK's
    traceLevel Info) reports each chunk loaded (``RecordkitInfo``); CBF has no warnings.

    A selected stream without a single sample in the whole file is an ``EmptyStreamError``
    once every chunk has been read (end of ``iter_chunks``, the last unread ``load_chunk``, or
    ``close()``), unless ``allow_empty_streams`` names it: such a file is what converting with
    a mistyped alias used to write (``recordkit.engine.presence``).

    ``path`` may be an fsspec URL (``storage_options`` for its filesystem): a chunk is then
    one ranged read, retried on failure, and kept in ``cache_dir`` when given. A
    ``.rkcrc`` checksum sidecar, when present, is verified on every read.
    """

    def __init__(self, path: str | os.PathLike[str], streams: Iterable[StreamSpec] | dict[str, str] | None = None, *,
                 precision: str | None = None, keep_data_in_memory: bool = False,
                 allow_empty_streams: str | Iterable[str] | None = None, trace_level: int | None = None,
                 storage_options: dict | None = None, cache_dir: str | None = None) -> None:
        self.path = path if isinstance(path, str) else os.fspath(path)
        self.trace_level = _trace_level(trace_level)
        self._source = open_source(self.path, storage_options=storage_options, cache_dir=cache_dir)
        self._buffers = ReadBuffers()  # chunk read buffers, reused by whichever thread loads next
        # a remote file's open reads its first and last block in one round trip (the prefix, the
        # header, the first length tables), until every length table has been read
        self._opening = self._source
        try:
            size = self._source.size
            if size == 0:
                raise FormatError(self.path, "file is empty: not a CBF file", offset=0)
            if self._source.remote:
                self._opening = Prefetched(self._source, layout.open_ranges(size))
            self.header = layout.read_header(self.path, self._opening.pread, size)
        except BaseException:
            self._source.close()
            raise
        self.dtype = None if precision is None else resolve_precision(precision)
        self.keep_data_in_memory = bool(keep_data_in_memory)
        self._memory: dict[int, ChunkData] = {}
        self._lengths: dict[int, np.ndarray] = {}  # a remote file's per-chunk length tables, fetched together
        self._selected = self._select(streams)
        # per selected stream: (index in the file, name, dtype to convert to or None, dim)
        self._outputs = [(i, spec.name, spec.dtype if spec.dtype != self.header.streams[i].dtype else None,
                          spec.dim) for i, spec in self._selected]
        table = self.header.table
        starts = np.concatenate([[0], np.cumsum(table["sequences"].astype(np.int64))])
        self._first_key = starts
        offsets, self._sizes = self.header.chunk_ranges()
        self._chunks = [ChunkInfo(k, n, m, a, z) for k, (n, m, a, z) in enumerate(zip(
            table["sequences"].tolist(), table["samples"].tolist(), offsets.tolist(), self._sizes.tolist()))]
        try:
            self._presence = StreamPresence(self.path, self.streams, len(self._chunks), allow_empty_streams,
                                            where=dict(offset=self.header.header_offset, record="header"))
        except BaseException:
            self._source.close()
            raise

    # -- streams ----------------------------------------------------------------------------------
    def _select(self, streams):
        file_streams = {s.name: (i, s) for i, s in enumerate(self.header.streams)}
        if streams is None:
            pairs = [(s.name, s.name) for s in self.header.streams]
        elif isinstance(streams, dict):
            pairs = list(streams.items())
        else:
            pairs = []
            for spec in streams:
                if not isinstance(spec, StreamSpec):
                    raise TypeError(f"expected StreamSpec, got {type(spec).__name__}")
                in_file = spec.alias
                if in_file in file_streams:
                    fs = file_streams[in_file][1]
                    if spec.format != fs.format or spec.dim != fs.dim:
                        raise UsageError(f"{self.path}: stream '{spec.name}' is declared {spec.format} dim {spec.dim}, "
                                         f"but the file's stream '{in_file}' is {fs.format} dim {fs.dim}")
                pairs.append((spec.name, in_file))
        selected = []
        names = set()
        for name, in_file in pairs:
            if in_file not in file_streams:
                raise UsageError(f"{self.path}: no stream '{in_file}' in the file "
                                 f"(it has: {', '.join(file_streams) or 'none'})")
            if name in names:
                raise UsageError(f"stream name '{name}' is used twice")
            names.add(name)
            i, fs = file_streams[in_file]
            dtype = self.dtype or fs.dtype
            selected.append((i, StreamSpec(name, fs.format, fs.dim, alias=in_file, dtype=dtype)))
        if not selected:
            raise UsageError(f"{self.path}: no streams selected")
        return selected

    @property
    def streams(self) -> list[StreamSpec]:
        return [spec for _, spec in self._selected]

    @property
    def chunks(self) -> list[ChunkInfo]:
        return list(self._chunks)

    @property
    def version(self) -> int:
        return self.header.version

    @property
    def num_sequences(self) -> int:
        return int(self._first_key[-1])

    # -- loading ------------------------------------------------------------------------------------
    # load_chunk(cid, threads=N) reads and gathers N parts of one chunk at once, but the walk
    # that checks a chunk is one thread's: several awaited chunks load faster a chunk per thread
    # (a randomized sparse sweep: 69 ms that way, 84 ms one after another split in two)
    splits_chunks = False
    run_bytes = RUN_BYTES  # load_chunks reads adjacent small chunks this many bytes at a time

    def sequence_location(self, chunk_id: int, index: int, sample: int | None = None) -> str:
        """Where sequence ``index`` of a chunk is: chunk and its byte offset (what ``verify`` prints)."""
        sam = f", sample {sample}" if sample is not None else ""
        return f"{self.path}: chunk {chunk_id} at byte offset {self.chunks[chunk_id].offset}, sequence {index} of the " \
               f"chunk{sam}"

    def load_chunk(self, chunk_id: int, *, threads: int = 1) -> ChunkData:
        """Decode one chunk; ``threads`` > 1 reads its bytes and gathers its columns in that many
        parts at once (for a caller waiting on this chunk, e.g. the first minibatch: on a 33 MB
        chunk the read and the first touches of the fresh column memory then run in parallel)."""
        data = self._load_chunk(chunk_id, threads)
        self._presence.check()  # the last unread chunk: a stream empty in the whole file is an error now
        return data

    def _load_chunk(self, chunk_id: int, threads: int = 1) -> ChunkData:
        if chunk_id in self._memory:
            return self._memory[chunk_id]
        threads = max(1, int(threads))
        if threads > 1 and self._chunks[chunk_id].size >= _SPLIT_BYTES:
            with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="recordkit-cbf") as pool:
                data = self._decode(chunk_id, pool, threads)
        else:
            data = self._decode_run([chunk_id])[0][0]
        self._loaded(chunk_id, data)
        return data

    def _loaded(self, chunk_id: int, data: ChunkData, counted: bool = False) -> None:
        """What every decoded chunk is counted in: stream presence (``counted``: a run's already
        was, all at once), the trace, the memory kept."""
        if not counted:
            self._presence.count(chunk_id, {name: col.num_samples for name, col in data.columns.items()},
                                 sequences=len(data))
        if self.trace_level >= TRACE_INFO:
            trace_chunk_loaded(self.path, self._chunks[chunk_id], level=self.trace_level)
        if self.keep_data_in_memory:
            self._memory[chunk_id] = data

    def sequence_lengths(self, chunk_id: int) -> np.ndarray:
        """The per-sequence sample counts stored at the start of a chunk (no decoding).

        From a remote file, the first call fetches every chunk's table at once (the offset table
        says where each is; ``storage.source.read_ranges`` asks for them concurrently, nearby ones
        in one request, those inside the blocks the open fetched not at all) and keeps them:
        opening a reader, which needs them all, waits about one round trip instead of one per
        chunk. A local file is read ``_LENGTHS_AHEAD`` chunks at a time, from this one on, the
        tables kept until asked for once (opening reads them in order: ~4 us a chunk one table at
        a time, ~1.3 us so).

        The offset table alone never tells them: a chunk of as many samples as sequences may
        hold sequences of 0 and 2 samples as well as of 1 each (CBF allows empty sequences)."""
        remote = self._source.remote
        known = self._lengths.get(chunk_id) if remote else self._lengths.pop(chunk_id, None)
        if known is not None:
            return known
        if remote:
            wanted = [k for k in range(len(self._chunks)) if k not in self._lengths]
        else:
            wanted = [k for k in range(chunk_id, min(len(self._chunks), chunk_id + _LENGTHS_AHEAD))
                      if k == chunk_id or k not in self._lengths]
        ranges = [(self._chunks[k].offset, 4 * self._chunks[k].num_sequences) for k in wanted]
        datas = read_ranges(self._opening, ranges)
        for k, (offset, n), data in zip(wanted, ranges, datas):
            self._check_read(len(data), n, offset, k)
        flat = np.frombuffer(b"".join(datas), dtype="<u4").astype(np.int64)
        bounds = np.cumsum([0] + [n // 4 for _, n in ranges]).tolist()
        out = {k: flat[a:b] for k, a, b in zip(wanted, bounds[:-1], bounds[1:])}
        mine = out.pop(chunk_id) if not remote else out[chunk_id]
        self._lengths.update(out)
        if remote:
            self._opening = self._source  # every table is here: the open's blocks are not needed any more
        return mine

    def all_sequence_lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """Every chunk's per-sequence sample counts at once, flat in chunk order, and the sequences of
        each chunk: what opening a source needs, without an array, a dict entry and a slice per
        chunk (``sequence_lengths`` of each cost ~4 us a 16 KB chunk, a third of opening a file of
        them). One read per chunk table (they are apart, at each chunk's start), one file check."""
        counts = self.header.table["sequences"].astype(np.int64)
        if self._source.remote or not self._chunks:  # remote: every table comes in the first call's fetch
            flat = [np.asarray(self.sequence_lengths(k), dtype=np.int64) for k in range(len(self._chunks))]
            return (np.concatenate(flat) if flat else np.zeros(0, dtype=np.int64)), counts
        ranges = [(c.offset, 4 * c.num_sequences) for c in self._chunks]
        datas = read_ranges(self._opening, ranges)
        if sum(map(len, datas)) != 4 * int(counts.sum()):
            for k, (offset, n), data in zip(range(len(ranges)), ranges, datas):
                self._check_read(len(data), n, offset, k)
        self._lengths.clear()  # nothing read ahead by ``sequence_lengths`` is asked for again
        return np.frombuffer(b"".join(datas), dtype="<u4").astype(np.int64), counts

    def estimated_chunk_bytes(self) -> np.ndarray:
        """Decoded bytes of each chunk (what ``max_memory`` and ``recordkit plan`` count): about
        its bytes in the file (values and indices are stored as they are decoded), scaled when
        the precision widens, plus what sparse streams' row pointers add (an int64 per sample
        where the file has an int32 count) and per-sequence keys, lengths and offsets."""
        hs = self.header.streams
        n_sparse = sum(1 for s in hs if s.format == "sparse")
        widen = 1.0
        if self.dtype is not None:
            widen = max(1.0, max(self.dtype.itemsize / s.dtype.itemsize for s in hs))
        table = self.header.table
        size = self._sizes if widen == 1.0 else (self._sizes * widen).astype(np.int64)
        return (size + n_sparse * (table["samples"].astype(np.int64) + 1) * 4
                + table["sequences"].astype(np.int64) * (8 * (len(hs) + 1) + 24))

    def _pread(self, offset: int, n: int) -> bytes:
        return self._source.pread(offset, n)

    def _read(self, offset: int, n: int, chunk_id: int, last: int | None = None) -> bytes:
        """Chunk bytes by pread (not a memory map: a file truncated meanwhile gives an error, not SIGBUS)."""
        data = self._pread(offset, n)
        self._check_read(len(data), n, offset, chunk_id, last)
        return data

    def _check_read(self, got: int, n: int, offset: int, chunk_id: int, last: int | None = None) -> None:
        """A short read is the file shrinking: named by its chunk (chunks ``chunk_id``-``last``: a run's read)."""
        if got != n:
            what = f"chunk {chunk_id}" if last is None else f"chunks {chunk_id}-{last}"
            raise FormatError(self.path, f"file shrank while being read: {what} needs {n} bytes at "
                                         f"offset {offset}, got {got}", offset=offset, record=what)

    def _read_for_decode(self, offset: int, n: int, chunk_id: int, pool=None, parts: int = 1,
                         last: int | None = None):
        """(bytes for ``decode_chunk``, which copies everything it keeps, and the buffer to give
        back afterwards or None): read into a reusable buffer where the source can (a local file
        without a checksum sidecar; ``storage/read_buffers.py``), in ``parts`` pieces on ``pool``
        when given. Measured on a 33 MB chunk: 6-7 ms into a reused, aligned buffer, 17-19 ms
        into a fresh bytes object (the kernel's page faults and zeroing)."""
        read_into = getattr(self._source, "pread_into", None)
        if read_into is None:
            return self._read(offset, n, chunk_id, last), None
        buf, view = self._buffers.take(n, offset)
        try:
            if pool is None or parts <= 1:
                self._check_read(read_into(offset, view), n, offset, chunk_id, last)
                return view, buf
            # pieces end on page boundaries of the file, so every piece's copy lines up too
            cuts = sorted({0, n} | {min(n, max(0, (offset + n * k // parts) // _PAGE * _PAGE - offset))
                                    for k in range(1, parts)})

            def read_piece(lh):
                lo, hi = lh
                self._check_read(read_into(offset + lo, view[lo:hi]), hi - lo, offset + lo, chunk_id)
            _run_all(pool, read_piece, list(zip(cuts[:-1], cuts[1:])))
            return view, buf
        except BaseException:
            self._buffers.give(buf)
            raise

    def sequence_keys(self, chunk_id: int) -> np.ndarray:
        """CBF keys are ordinals: chunk start + index in chunk."""
        first = int(self._first_key[chunk_id])
        return np.arange(first, first + self._chunks[chunk_id].num_sequences, dtype=np.uint64)

    def _decode(self, chunk_id: int, pool, parts: int) -> ChunkData:
        """One large chunk read and gathered in ``parts`` pieces on ``pool``."""
        info = self._chunks[chunk_id]
        hs = self.header.streams
        data, buf = self._read_for_decode(info.offset, info.size, chunk_id, pool, parts)

        def run_parts(gather, n):
            _run_all(pool, gather, range(n))
        try:
            meta, columns, problem = _kernel.decode_chunk(
                data, info.num_sequences, [s.format == "sparse" for s in hs], [s.dim for s in hs],
                [s.dtype.itemsize for s in hs], parts=parts, run_parts=run_parts)
        finally:
            del data
            if buf is not None:
                self._buffers.give(buf)
        if problem is not None:
            raise self._problem(chunk_id, *problem)
        total = int(meta.astype(np.int64).sum())
        if total != info.num_samples:
            raise self._problem(chunk_id, _P_TABLE_SAMPLES, -1, -1, 0, total, info.num_samples)
        columns = [(vals.view(fs.dtype) if ind is not None else vals.view(fs.dtype).reshape(-1, fs.dim), ind, ptr,
                    np.concatenate(([0], np.cumsum(counts)))) for (vals, ind, ptr, counts), fs in zip(columns, hs)]
        return self._chunk_data(info, meta.astype(np.int64), columns)

    def _problem(self, chunk_id: int, code: int, stream: int, seq: int, offset: int, a: int, b: int) -> FormatError:
        """The error for what the kernel found wrong in chunk ``chunk_id`` (``offset``: in the chunk)."""
        info = self._chunks[chunk_id]
        if code == _P_TABLE_SAMPLES:
            return FormatError(self.path, f"the offset table says chunk {chunk_id} has {b} samples, its sequences "
                                          f"add up to {a}", offset=info.offset, record=f"chunk {chunk_id}")
        hs = self.header.streams
        what = _PROBLEMS.get(code, f"problem {code}")
        detail = ""
        if code == 2:
            detail = f": needs {a} bytes, {b} left"
        elif code == 4:
            detail = f": index {a}, expected 0 <= index < dim {b}"
        elif code == 5:
            detail = f": they add up to {a}, NNZ is {b}"
        elif code == 7:
            detail = f": {a} bytes"
        elif code == 8:
            detail = f": needs at least {a} bytes, has {b}"
        where = f"chunk {chunk_id}"
        if stream >= 0:
            where += f", stream '{hs[stream].name}', sequence {seq} of the chunk"
        return FormatError(self.path, what + detail, offset=info.offset + offset, record=where)

    def load_chunks(self, chunk_ids: Iterable[int]) -> list[ChunkData]:
        """Decode these chunks (``load_chunk`` of each, in that order), in file order whatever the
        order asked: small chunks up to ``RUN_BYTES`` at a time with one kernel call, chunks that
        follow each other in the file (or with less than ``_GAP_BYTES`` between them) with one
        read. A 16 KB chunk's read, decode and columns cost about 60 us one at a time, most of it
        per call, not per byte. Each chunk still gets arrays of its own, so holding or dropping
        one frees exactly its own memory. A chunk found wrong raises its own error
        (``load_chunk``'s); the chunks before it in its run are not returned then."""
        ids = [int(c) for c in chunk_ids]
        got: dict[int, ChunkData] = {}
        for run in self._runs(sorted({c for c in ids if c not in self._memory})):
            if len(run) == 1:
                got[run[0]] = self._load_chunk(run[0])
                continue
            datas, samples = self._decode_run(run)
            self._presence.count_many(run, samples[:, [i for i, _ in self._selected]],
                                      np.array([self._chunks[c].num_sequences for c in run], dtype=np.int64))
            for cid, data in zip(run, datas):
                self._loaded(cid, data, counted=True)
                got[cid] = data
        out = [got[c] if c in got else self._memory[c] for c in ids]
        self._presence.check()  # the last unread chunk: a stream empty in the whole file is an error now
        return out

    def load_joined(self, chunk_ids: Iterable[int]) -> list[tuple[list[int], ChunkData]]:
        """These chunks as (chunk ids, one ChunkData of all their sequences in that order) units:
        each run of small chunks that ``load_chunks`` reads and decodes together is one unit, its
        arrays made once for the whole run (a 16 KB chunk's own arrays, ``ChunkData`` and gather
        columns cost about as much as its decode), the others a unit of one chunk. A unit's memory
        is one allocation: it is freed when nothing refers to any of its chunks any more. Errors as
        ``load_chunks``'s (a wrong chunk raises its own; the units before it are not returned)."""
        ids = list(dict.fromkeys(int(c) for c in chunk_ids))
        if self.keep_data_in_memory:  # the memory keeps each chunk's own ChunkData
            return [([c], d) for c, d in zip(ids, self.load_chunks(ids))]
        out = []
        for run in self._runs(sorted(ids)):
            if len(run) == 1:
                out.append((run, self._load_chunk(run[0])))
                continue
            out.append((run, self._decode_joined(run)))
        self._presence.check()
        return out

    def _decode_joined(self, run: list) -> ChunkData:
        """``_decode_run`` of a run into one ChunkData (``decode_chunks(joined=True)``), counted as
        each of its chunks' loads."""
        (lengths, columns), samples = self._decode_run(run, joined=True)
        counts = np.array([self._chunks[c].num_sequences for c in run], dtype=np.int64)
        self._presence.count_many(run, samples[:, [i for i, _ in self._selected]], counts)
        if self.trace_level >= TRACE_INFO:
            for cid in run:
                trace_chunk_loaded(self.path, self._chunks[cid], level=self.trace_level)
        first, total = int(self._first_key[run[0]]), int(counts.sum())
        if run[-1] - run[0] == len(run) - 1:  # chunks that follow each other: their keys do too
            keys = np.arange(first, first + total, dtype=np.uint64)
        else:  # a chunk not asked for between (read through): each chunk's keys from its own first
            starts = np.zeros(len(run), dtype=np.int64)
            np.cumsum(counts[:-1], out=starts[1:])
            keys = (np.repeat(self._first_key[run] - starts, counts) + np.arange(total)).astype(np.uint64)
        return self._chunk_data_of(run[0], keys, lengths, columns)

    def _runs(self, ids: list) -> list:
        """Sorted chunk ids cut into runs of at most ``RUN_BYTES`` to read (a larger chunk alone;
        a gap read through counts)."""
        runs: list = []
        run: list = []
        end = acc = 0
        for cid in ids:
            info = self._chunks[cid]
            gap = info.offset - end
            add = info.size + (gap if run and 0 <= gap < _GAP_BYTES else 0)
            if run and acc + add > RUN_BYTES:
                runs.append(run)
                run, acc, add = [], 0, info.size
            run.append(cid)
            acc += add
            end = info.offset + info.size
        if run:
            runs.append(run)
        return runs

    def _pieces(self, infos: list) -> list:
        """The byte ranges a run is read in: (file offset, bytes), chunks less than ``_GAP_BYTES``
        apart in one range (the gap read through costs less than another read)."""
        pieces = [[infos[0].offset, infos[0].offset + infos[0].size]]
        for info in infos[1:]:
            if 0 <= info.offset - pieces[-1][1] < _GAP_BYTES:
                pieces[-1][1] = info.offset + info.size
            else:
                pieces.append([info.offset, info.offset + info.size])
        return [(a, b - a) for a, b in pieces]

    def _read_run(self, infos: list) -> tuple:
        """(bytes holding the chunks ``infos``, where each starts in them, the buffer to give back or
        None). A remote file is asked for each chunk's own range, all at once, each in a request of
        its own (a range cache keeps ranges as asked: a run of other chunks later, or offline, must
        find them; the bytes between would be other partitions' chunks); a local one for
        each piece (``_pieces``), into one reusable buffer."""
        first = infos[0]
        last = None if len(infos) == 1 else infos[-1].id  # what a short read names: chunk, or chunks first-last
        read_into = getattr(self._source, "pread_into", None)
        if self._source.remote or read_into is None:
            pieces = [(i.offset, i.size) for i in infos] if self._source.remote else self._pieces(infos)
            parts = read_ranges(self._source, pieces, merge=not self._source.remote)
            for (offset, n), part in zip(pieces, parts):
                self._check_read(len(part), n, offset, first.id, last)
        else:
            pieces = self._pieces(infos)
            if len(pieces) == 1:
                data, buf = self._read_for_decode(first.offset, pieces[0][1], first.id, last=last)
                return data, np.array([i.offset - first.offset for i in infos], dtype=np.int64), buf
            parts = None
        at = np.cumsum([0] + [n for _, n in pieces])
        piece_start = np.array([o for o, _ in pieces], dtype=np.int64)
        offsets = np.array([i.offset for i in infos], dtype=np.int64)
        k = np.searchsorted(piece_start, offsets, side="right") - 1
        starts = at[k] + offsets - piece_start[k]
        if parts is not None:
            return b"".join(parts), starts, None
        buf, view = self._buffers.take(int(at[-1]), first.offset)
        try:
            for (offset, n), pos in zip(pieces, at[:-1].tolist()):
                self._check_read(read_into(offset, view[pos:pos + n]), n, offset, first.id, last)
        except BaseException:
            self._buffers.give(buf)
            raise
        return view, starts, buf

    def _decode_run(self, run: list, joined: bool = False) -> tuple:
        """Chunks ``run`` (in file order) read and decoded at once, and the samples of each of the
        file's streams in each (chunks x streams). ``joined``: the run's one (lengths, columns)
        instead of a ChunkData per chunk."""
        infos = [self._chunks[c] for c in run]
        data, starts, buf = self._read_run(infos)
        hs = self.header.streams
        try:
            decoded, samples, problem = _kernel.decode_chunks(
                data, starts, np.array([i.size for i in infos], dtype=np.int64),
                np.array([i.num_sequences for i in infos], dtype=np.int64),
                np.array([i.num_samples for i in infos], dtype=np.int64),
                [s.format == "sparse" for s in hs], [s.dim for s in hs], [s.dtype.itemsize for s in hs],
                [s.dtype for s in hs], joined)
        finally:
            del data
            if buf is not None:
                self._buffers.give(buf)
        if problem is not None:
            k, *rest = problem
            raise self._problem(run[k], *rest)
        if joined:
            return decoded[0], samples
        return [self._chunk_data(info, lengths, columns) for info, (lengths, columns) in zip(infos, decoded)], samples

    def _chunk_data(self, info: ChunkInfo, lengths: np.ndarray, columns: list) -> ChunkData:
        """A decoded chunk's ChunkData: the selected streams under their names, converted where
        the precision asks (``_outputs``: what that takes per stream, worked out once)."""
        first = int(self._first_key[info.id])
        return self._chunk_data_of(info.id, np.arange(first, first + info.num_sequences, dtype=np.uint64), lengths,
                                   columns)

    def _chunk_data_of(self, chunk_id: int, keys: np.ndarray, lengths: np.ndarray, columns: list) -> ChunkData:
        cols = {}
        for i, name, dtype, dim in self._outputs:
            values, ind, ptr, seq_offsets = columns[i]
            if dtype is not None:
                values = values.astype(dtype)
            cols[name] = DenseColumn(values, seq_offsets) if ind is None else \
                SparseColumn(values, ind, ptr, seq_offsets, dim)
        return ChunkData(chunk_id, keys, lengths, cols)

    def iter_chunks(self, threads: int = 2, prefetch: int | None = None) -> Iterator[ChunkData]:
        """Every chunk in file order, decoded ``threads`` at a time."""
        from recordkit.engine.deserializer import load_in_order
        yield from load_in_order(self._load_chunk, len(self._chunks), threads=threads, prefetch=prefetch,
                                 name="recordkit-cbf")
        self._presence.check()  # the end of the sweep: a selected stream without any sample is an error

    def __iter__(self) -> Iterator[Sequence]:
        for chunk in self.iter_chunks():
            yield from chunk

    def close(self) -> None:
        """Release the file; raises ``EmptyStreamError`` if the whole file was read, a selected
        stream had no sample and that was not reported yet."""
        if getattr(self, "_memory", None) is not None:
            self._memory.clear()
        self._buffers.clear()
        if getattr(self, "_source", None) is not None:
            self._source.close()
            self._source = self._opening = None
        self.check_presence()

