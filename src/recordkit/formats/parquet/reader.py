"""ParquetDeserializer: Parquet files (one, or a directory of parts) as a chunked Deserializer.

A chunk is a row group; a directory's ``*.parquet`` files are read in part order (the number
in the name), keys continuing across files where the data has no ``key`` column. The streams
come from the schema metadata recordkit writes (``recordkit.streams``); files written by other
tools are read with the streams their column types imply (``formats/arrow_layouts.py``) or with
declared streams (``--stream NAME=FORMAT:DIM[:COLUMN]``) selecting and renaming columns. Everything wrong is a ``FormatError`` naming the
file and the row group or column: a truncated file, a foreign schema, a null, a sparse index
out of range.

Local files without a checksum sidecar are read by Arrow's own I/O; URLs and files with a
``.rkcrc`` sidecar through recordkit's byte sources (ranged reads, retries, verification).
"""
from __future__ import annotations

import json
import os
import threading
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from recordkit.engine.chunk import concat_chunks
from recordkit.engine.deserializer import ChunkInfo, DeserializerBase
from recordkit.errors import FormatError, RecordkitError
from recordkit.formats.arrow_layouts import PROBE_ROWS
from recordkit.formats.closing import ClosingReader
from recordkit.formats.directories import part_paths
from recordkit.formats.parquet.arrow import META_SAMPLES, batch_to_chunk, select_streams
from recordkit.storage import location
from recordkit.storage.pool import SourcePool

if TYPE_CHECKING:
    from recordkit.engine.chunk import ChunkData
    from recordkit.engine.streams import StreamSpec

READ_BATCH = 8192  # rows per decoded batch (benchmarks/README.md: 2048 was 10-20% slower on every corpus)


def parquet_part_paths(path, storage_options=None) -> list[str]:
    """A Parquet file, or the numbered ``*.parquet`` parts of a directory in part order (any other
    directory is not one data set: ``formats/directories.py``)."""
    location.ensure_regular(path, storage_options)
    if location.isfile(path, storage_options):
        return [path]
    if not location.isdir(path, storage_options):
        raise FileNotFoundError(f"{path}: no such file or directory")
    return part_paths(path, (".parquet",), storage_options)


def _open_file(path, files):
    """What pq.ParquetFile reads: the path itself (Arrow's I/O) or a recordkit byte source. A remote
    file's source is the reader's pool's (``storage.pool``): one per file however many threads
    read it, its size, version and sidecar asked once per open; the footer and the column chunks
    are read at the same ranges every time, so they are kept in the range cache."""
    from recordkit.storage.source import SourceFile, plain_local_path
    plain = plain_local_path(path)
    if plain is not None:
        return plain
    import io
    src = files.source(path)
    return io.BufferedReader(SourceFile(src, owns=not src.remote, cache=True), buffer_size=1 << 20)


def arrow_error(path, e: Exception, where: str | None = None) -> FormatError:
    """An Arrow/Parquet failure as a located FormatError."""
    if isinstance(e, UnicodeDecodeError):  # pyarrow decodes the footer's column names
        return FormatError(path, f"cannot read Parquet data: a column name in its footer is not valid UTF-8 "
                                 f"({e.reason}; damaged file?)", record=where)
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if "magic" in msg.lower() or "footer" in msg.lower() or "size" in msg.lower() and "file" in msg.lower():
        msg += " (truncated or not a Parquet file?)"
    return FormatError(path, f"cannot read Parquet data: {msg}", record=where)


def first_rows(f, columns, path):
    """The first rows of ``columns`` of Parquet file ``f`` (None when it has none): what tells the dim
    of a list column (``arrow_layouts.infer_streams``)."""
    if f.metadata.num_row_groups == 0:
        return None
    try:
        return next(iter(f.iter_batches(batch_size=PROBE_ROWS, row_groups=[0], columns=columns)), None)
    except (pa.ArrowException, OSError) as e:
        raise arrow_error(path, e, "row group 0") from None


class ParquetDeserializer(DeserializerBase, ClosingReader):
    """Read Parquet data in the stream mapping.

    ``streams``: None for the recorded streams; else StreamSpecs selecting columns by alias and
    renaming them (``StreamSpec("x", "dense", 3, alias="column")``). ``precision``: None keeps the
    data's type, 'float'/'double' converts. ``threads``: row groups decoded at once by ``iter_chunks``.
    """

    # what a conversion back to CTF may use as field names: the recorded aliases
    keeps_aliases = True

    def __init__(self, path: str | os.PathLike[str], streams: Sequence[StreamSpec] | None = None, *,
                 precision: str | None = None, storage_options: dict | None = None, cache_dir: str | None = None,
                 **_: Any) -> None:
        self.path = path if isinstance(path, str) else os.fspath(path)
        self.paths = parquet_part_paths(self.path, storage_options)
        self._files = []
        self._local = threading.local()  # per thread: its own open files (Parquet readers are not shared)
        self._opened = []
        self._pool = SourcePool(self.path if self.paths != [self.path] else None, storage_options=storage_options,
                                cache_dir=cache_dir)
        self._chunks, self._where = [], []
        self.keys_are_ids = False
        try:
            self._open_all(streams, precision, storage_options, cache_dir)
        except BaseException:
            self.close()
            raise

    def _open_all(self, streams, precision, storage_options, cache_dir) -> None:
        schema0 = None
        first_key = 0
        for p in self.paths:
            try:
                f = pq.ParquetFile(_open_file(p, self._pool))
            except (pa.ArrowException, OSError, UnicodeDecodeError) as e:
                if isinstance(e, (FileNotFoundError, PermissionError, RecordkitError)):
                    raise
                raise arrow_error(p, e) from None
            self._files.append(f)
            schema = f.schema_arrow
            if schema0 is None:
                schema0 = schema
                self._selected = select_streams(schema, p, streams, precision, probe=lambda c, f=f, p=p: first_rows(f, c, p))
                self._columns = [c for c, _ in self._selected] + (["key"] if "key" in schema.names else [])
                self.keys_are_ids = "key" in schema.names
            elif not schema.remove_metadata().equals(schema0.remove_metadata()):
                raise FormatError(p, f"this file's schema differs from that of {self.paths[0]}: not parts of one "
                                     f"data set", offset=0)
            meta = f.metadata
            samples = None
            raw = (meta.metadata or {}).get(META_SAMPLES)
            if raw is not None:
                try:
                    samples = [int(x) for x in json.loads(raw)]
                except (ValueError, TypeError):
                    samples = None
                if samples is not None and len(samples) != meta.num_row_groups:
                    samples = None
            for g in range(meta.num_row_groups):
                rg = meta.row_group(g)
                # only the row group's own fields: a column chunk's metadata (``rg.column(j)``) checks
                # its size statistics in a constructor whose C++ exception pyarrow does not translate,
                # so a damaged footer would abort the process there; reading the row group reports the
                # same damage as an error this reader locates
                size, offset = rg.total_byte_size, 0
                n = rg.num_rows
                self._chunks.append(ChunkInfo(len(self._chunks), n, samples[g] if samples else n, offset, size))
                self._where.append((len(self._files) - 1, g, first_key))
                first_key += n

    @property
    def streams(self):
        return [s for _, s in self._selected]

    @property
    def num_sequences(self) -> int:
        return sum(c.num_sequences for c in self._chunks)

    def _file(self, k: int):
        files = getattr(self._local, "files", None)
        if files is None:
            files = self._local.files = {}
            self._opened.append(files)
        f = files.get(k)
        if f is None:
            f = files[k] = pq.ParquetFile(_open_file(self.paths[k], self._pool),
                                          metadata=self._files[k].metadata)
        return f

    def _read(self, chunk_id: int, columns):
        k, g, first = self._where[chunk_id]
        where = f"row group {g}"
        try:
            return self._file(k).read_row_group(g, columns=columns), self.paths[k], where, first
        except (pa.ArrowException, OSError) as e:
            if isinstance(e, FormatError):
                raise
            raise arrow_error(self.paths[k], e, where) from None

    def load_chunk(self, chunk_id: int, **_: Any) -> ChunkData:
        # a row group decoded in batches of READ_BATCH rows, joined with NumPy: Arrow decodes nested
        # lists 2-4x faster into small arrays than into one array of a whole row group
        k, g, first = self._where[chunk_id]
        path, where = self.paths[k], f"row group {g}"
        try:
            batches = list(self._file(k).iter_batches(batch_size=READ_BATCH, row_groups=[g], columns=self._columns,
                                                      use_threads=True))
        except (pa.ArrowException, OSError) as e:
            if isinstance(e, FormatError):
                raise
            raise arrow_error(path, e, where) from None
        parts, base = [], first
        for b in batches:
            parts.append(batch_to_chunk(b, self._selected, path=path, where=where, chunk_id=chunk_id, first_key=base,
                                        first_row=base - first))
            base += b.num_rows
        if not parts:
            parts = [batch_to_chunk(None, self._selected, path=path, where=where, chunk_id=chunk_id, first_key=first)]
        chunk = concat_chunks(parts)
        chunk.chunk_id = chunk_id
        if len(chunk) != self._chunks[chunk_id].num_sequences:
            raise FormatError(path, f"{where} holds {len(chunk)} rows, its metadata says "
                                    f"{self._chunks[chunk_id].num_sequences}", record=where)
        return chunk

    def sequence_location(self, chunk_id: int, i: int, sample: int | None = None) -> str:
        """Where sequence ``i`` of a chunk is: file, row group, row (what ``verify`` prints)."""
        k, g, first = self._where[chunk_id]
        sam = f", sample {sample}" if sample is not None else ""
        return f"{self.paths[k]}: row group {g}, row {i} of the group (sequence {first + i} of the data set{sam})"

    def sequence_keys(self, chunk_id: int) -> np.ndarray:
        if not self.keys_are_ids:
            _, _, first = self._where[chunk_id]
            return np.arange(first, first + self._chunks[chunk_id].num_sequences, dtype=np.uint64)
        from recordkit.formats.parquet.arrow import to_numpy
        table, _, _, _ = self._read(chunk_id, ["key"])
        return np.concatenate([to_numpy(c) for c in table.column(0).chunks] or [np.zeros(0, np.uint64)]
                              ).astype(np.uint64)


    def close(self) -> None:
        handles = list(getattr(self, "_files", []))
        for files in getattr(self, "_opened", []):
            handles += list(files.values())
            files.clear()
        for f in handles:
            try:
                f.close()
            except Exception:  # noqa: BLE001
                pass
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.close()
