"""ParquetWriter: chunks in, one Parquet file (or a directory of ``part-NNNNN.parquet``) out.

Every written chunk becomes a row group (split only where Arrow's 32-bit list offsets
require); the columns are built from the chunk's buffers (``arrow.py``). The schema metadata
records the stream declarations, and the footer the samples of every row group, so a reader
knows its chunks' sizes without decoding them.

One file is written through ``AtomicFile`` (temporary beside the target, renamed when
complete). With ``parts=N`` or ``shard_size=S`` (bytes of data per part, as for the shard formats:
``formats/sharding.ShardCutter``) the output is a directory: parts hold consecutive runs of
sequences (``parts`` needs ``total_sequences`` to balance them), and the
directory is written aside and put in place whole (``storage/staged_directory.py``).
"""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pyarrow.parquet as pq

from recordkit.storage.atomic import AtomicFile
from recordkit.engine.streams import check_streams, resolve_precision
from recordkit.formats.closing import AtomicWriter
from recordkit.formats.sharding import ShardCutter, sequence_bytes
from recordkit.formats.parquet.arrow import META_SAMPLES, ChunkBatches, schema_for, sequence_runs

if TYPE_CHECKING:
    from recordkit.engine.chunk import ChunkData
    from recordkit.engine.streams import StreamSpec

PART_PATTERN = "part-{:05d}.parquet"


def part_name(i: int) -> str:
    return PART_PATTERN.format(i)


def _is_part(name: str) -> bool:
    import re
    return re.fullmatch(r"part-\d+\.parquet(\.rkcrc)?", name) is not None


CDC_PYARROW = (21, 0)  # the first pyarrow whose Parquet writer cuts pages by content


def cdc_supported() -> bool:
    """Whether the installed pyarrow writes content-defined data pages."""
    import pyarrow
    try:
        version = tuple(int(x) for x in pyarrow.__version__.split(".")[:2])
    except ValueError:
        return False
    return version >= CDC_PYARROW


def content_defined_chunking_for(path: str, wanted) -> bool | dict:
    """The ``use_content_defined_chunking`` of a write: ``wanted`` (True, False or the chunker's
    options ``{"min_chunk_size": ..., "max_chunk_size": ...}``), by default on for ``hf://`` paths
    (the Hugging Face Hub stores files by content-defined chunks: pages cut the same way let an
    edited or grown data set upload only what changed) where pyarrow supports it."""
    if wanted is None:
        return path.startswith("hf://") and cdc_supported()
    if wanted is not False and not cdc_supported():
        import pyarrow
        from recordkit.errors import UsageError
        raise UsageError(f"content-defined chunking needs pyarrow >= {'.'.join(map(str, CDC_PYARROW))} "
                         f"(installed: {pyarrow.__version__})")
    return wanted


class ParquetWriter(AtomicWriter):
    """Write sequences as Parquet rows (the mapping of ``formats/parquet/arrow.py``).

    ``compression``: any Parquet codec pyarrow knows ('snappy' default, 'zstd', 'none', ...).
    ``content_defined_chunking``: data pages cut where the content says (pyarrow >= 21), so that
    a data set that changes a little keeps most pages byte for byte (deduplicated by content-
    addressed stores such as the Hugging Face Hub): True, False, or the chunker's options;
    default on for ``hf://`` paths. ``data_page_size``: pyarrow's page size limit (bytes).
    """

    def __init__(self, path: str | os.PathLike[str], streams: Sequence[StreamSpec], *, parts: int | None = None,
                 shard_size: int | None = None, precision: str = "float", checksums: bool = False,
                 storage_options: dict | None = None, total_sequences: int | None = None, compression: str = "snappy",
                 content_defined_chunking: bool | dict | None = None, data_page_size: int | None = None,
                 **_: Any) -> None:
        self.path = path if isinstance(path, str) else os.fspath(path)
        self._streams = check_streams(streams)
        self.dtype = resolve_precision(precision)
        self.precision = "double" if self.dtype == np.float64 else "float"
        self.schema = schema_for(self._streams, self.precision)
        self.checksums = bool(checksums)
        self.storage_options = storage_options
        self.compression = None if compression in (None, "none") else compression
        self.content_defined_chunking = content_defined_chunking_for(self.path, content_defined_chunking)
        self.data_page_size = data_page_size
        self.sequences_written = 0
        self.paths: list[str] = []
        self._dir = None
        self._cutter = None  # where parts end (formats/sharding.py): balanced parts, or shard_size data bytes
        if parts is not None or shard_size is not None:
            from recordkit.storage.staged_directory import StagedDirectory
            if parts is not None and shard_size is None and total_sequences is None:
                raise ValueError("parts=N needs total_sequences to balance the parts (or give shard_size)")
            self._cutter = ShardCutter(parts=parts, shard_size=shard_size, total=total_sequences)
            self._nparts = int(parts) if parts is not None and shard_size is None else None
            self._dir = StagedDirectory(self.path, _is_part, storage_options=storage_options, what="Parquet part directory")
        self._part = -1
        self._file = None
        self._writer = None
        self._samples: list[int] = []
        self._pending = ChunkBatches(self._streams, self.schema, self.dtype)

    @property
    def streams(self):
        return list(self._streams)

    # -- parts ------------------------------------------------------------------------------------
    def _open(self, k: int) -> None:
        self._close_part()
        self._part = k
        target = self.path if self._dir is None else self._dir.path(part_name(k))
        self._file = AtomicFile(target, storage_options=self.storage_options, checksums=self.checksums)
        # no dictionaries (float data has few repeats; trying costs 2-7x the write time), statistics
        # for the key only
        pages = {"use_content_defined_chunking": self.content_defined_chunking} if self.content_defined_chunking \
            else {}
        if self.data_page_size is not None:
            pages["data_page_size"] = int(self.data_page_size)
        self._writer = pq.ParquetWriter(self._file.file, self.schema, compression=self.compression,
                                        use_dictionary=False, write_statistics=["key"], **pages)
        self._samples = []

    def _close_part(self) -> None:
        if self._writer is None:
            return
        self._flush()
        self._writer.add_key_value_metadata({META_SAMPLES.decode(): json.dumps(self._samples)})
        self._writer.close()
        self._writer = None
        self._file.commit()
        self.paths.append(self._file.path)
        self._file = None

    # -- input ------------------------------------------------------------------------------------
    def write_chunk(self, chunk: ChunkData) -> None:
        n = len(chunk)
        if n == 0:
            return
        runs = sequence_runs(chunk, self._streams)
        if self._cutter is None:
            parts = [(0, 0, n)]
        else:
            parts = self._cutter.assign(sequence_bytes(chunk, self._streams, self.dtype.itemsize))
        for k, a, b in parts:
            if k != self._part or self._writer is None:
                self._open(k)
            for x, y in runs:
                x, y = max(x, a), min(y, b)
                if x < y:
                    self._write_rows(chunk, x, y)
            self.sequences_written += b - a

    def _write_rows(self, chunk, a: int, b: int) -> None:
        # pieces of one input chunk (a CTF chunk parsed in pieces) make one row group, so the output's
        # chunks are the input's and a randomized read of it draws the same order
        if self._pending.starts_new(chunk):
            self._flush()
        self._pending.add(chunk, a, b)
        if chunk.chunk_id < 0:
            self._flush()

    def _flush(self) -> None:
        taken = self._pending.take()
        if taken is not None:
            table, samples = taken
            self._writer.write_table(table, row_group_size=max(table.num_rows, 1))  # one row group
            self._samples.append(samples)

    # -- output -----------------------------------------------------------------------------------
    def close(self) -> None:
        try:
            if self._dir is None:
                if self._writer is None:
                    self._open(0)
            else:
                wanted = self._nparts or 1
                while self._part + 1 < (wanted or 1):
                    self._open(self._part + 1)  # empty parts keep the numbering a user asked for
            self._close_part()
            if self._dir is not None:
                self._dir.commit()
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001 - the file is discarded anyway
                pass
            self._writer = None
        if self._file is not None:
            self._file.discard()
            self._file = None
        if self._dir is not None:
            self._dir.abort()
