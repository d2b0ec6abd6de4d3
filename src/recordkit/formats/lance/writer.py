"""LanceWriter: chunks in, a Lance data set out (the Parquet mapping's columns).

Every written chunk becomes a fragment (one data file; pieces of one input chunk are joined,
as the Parquet writer joins them into a row group), written by ``lance.fragment.write_fragments``
as it arrives; ``close`` commits them all as the data set's version (an ``Overwrite``), with the
stream declarations and the samples of every fragment in the schema metadata, so a reader needs
no ``--stream`` and knows its chunks' sizes without decoding them.

A local data set is written in a staging directory beside the target and put in place whole
(``staged_directory.py``); a URL is written by Lance's own object store, where nothing is
visible before the commit writes the manifest (``LanceTarget``, shared with ``records.py``).
"""
from __future__ import annotations

import json
import os

import numpy as np

os.environ.setdefault("LANCE_LOG", "error")  # Lance logs warnings (a new data set...) to stderr by default
import lance  # noqa: E402
import pyarrow as pa  # noqa: E402
from lance.fragment import write_fragments  # noqa: E402

from recordkit.engine.streams import check_streams, resolve_precision  # noqa: E402
from recordkit.errors import UsageError  # noqa: E402
from recordkit.formats.closing import AtomicWriter  # noqa: E402
from recordkit.formats.lance.reader import META_SAMPLES  # noqa: E402
from recordkit.formats.parquet.arrow import ChunkBatches, schema_for, sequence_runs  # noqa: E402
from recordkit.storage import location  # noqa: E402

ENTRIES = ("data", "_versions", "_transactions", "_deletions", "_indices")


def _is_entry(name: str) -> bool:
    return name in ENTRIES


def refuse_options(path: str, *, checksums=False, parts=None, shard_size=None) -> None:
    """A usage error for the options of other formats' outputs that a Lance data set has no use for."""
    if checksums:
        raise UsageError(f"{path}: a Lance data set gets no .rkcrc sidecars (its files are named by Lance); "
                         f"convert without --checksum")
    if parts is not None or shard_size is not None:
        raise UsageError(f"{path}: a Lance data set is one directory, its fragments one per input chunk: "
                         f"convert without --parts/--shard-size")


class LanceTarget:
    """Where a data set is written: a local target through a staging directory beside it, swapped in
    whole by ``commit`` (``staged_directory.py``); a URL by Lance's object store, where nothing is
    visible before the manifest is committed. ``write(table)`` adds fragments (one data file for up to
    ``rows`` rows), ``commit(schema)`` makes them the data set."""

    def __init__(self, path: str, storage_options=None):
        self.path = path
        self._dir = None
        self.fragments: list = []
        if location.is_url(path):
            self.uri = path
        else:
            from recordkit.storage.staged_directory import StagedDirectory
            self._dir = StagedDirectory(path, _is_entry, storage_options=storage_options, what="Lance data set")
            for name in ENTRIES[:3]:
                self._dir.path(name)
            self.uri = os.path.dirname(self._dir.path(ENTRIES[0]))

    def write(self, table: pa.Table) -> int:
        """``table`` as one fragment (more when Lance cuts it); the number of fragments written."""
        written = write_fragments(table, self.uri, schema=table.schema, max_rows_per_file=max(table.num_rows, 1))
        self.fragments += written
        return len(written)

    def commit(self, schema: pa.Schema) -> None:
        lance.LanceDataset.commit(self.uri, lance.LanceOperation.Overwrite(schema, self.fragments))
        if self._dir is not None:
            self._dir.commit()

    def abort(self) -> None:
        if self._dir is not None:
            self._dir.abort()


class LanceWriter(AtomicWriter):
    """Write sequences as the rows of a Lance data set (``formats/parquet/arrow.py``'s columns)."""

    def __init__(self, path, streams, *, precision="float", checksums: bool = False, storage_options=None,
                 parts: int | None = None, shard_size: int | None = None, **_):
        self.path = path if isinstance(path, str) else os.fspath(path)
        refuse_options(self.path, checksums=checksums, parts=parts, shard_size=shard_size)
        self._streams = check_streams(streams)
        self.dtype = resolve_precision(precision)
        self.precision = "double" if self.dtype == np.float64 else "float"
        self.schema = schema_for(self._streams, self.precision)
        self.sequences_written = 0
        self._target = LanceTarget(self.path, storage_options)
        self._samples: list[int] = []
        self._pending = ChunkBatches(self._streams, self.schema, self.dtype)

    @property
    def streams(self):
        return list(self._streams)

    @property
    def paths(self) -> list[str]:
        return [self.path]

    def write_chunk(self, chunk) -> None:
        n = len(chunk)
        if n == 0:
            return
        for a, b in sequence_runs(chunk, self._streams):
            if self._pending.starts_new(chunk):
                self._flush()
            self._pending.add(chunk, a, b)
        self.sequences_written += n
        if chunk.chunk_id < 0:
            self._flush()

    def _flush(self) -> None:
        taken = self._pending.take()
        if taken is not None:
            table, samples = taken
            written = self._target.write(table)
            self._samples += [samples] + [0] * (written - 1)

    def close(self) -> None:
        try:
            self._flush()
            meta = dict(self.schema.metadata)
            meta[META_SAMPLES] = json.dumps(self._samples).encode()
            self._target.commit(self.schema.with_metadata(meta))
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        self._pending.clear()
        self._target.abort()
