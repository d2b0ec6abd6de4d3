"""Ray Data datasinks writing CBF files and OFRecord parts: one part file per write task.

Each write task turns its blocks back into chunks (the layout of
``recordkit.integrations.ray``) and writes them to ``part-NNNNN.cbf`` /
``part-NNNNN`` named by its task index, through a temporary file that is renamed only
when the part is complete (``CBFWriter`` and ``AtomicFile``). A task that fails (bad
data, a killed worker) therefore never leaves a partial file under a part's name, and a
task that received no rows writes no part (OneFlow mishandles empty parts).

With ``DataContext.execution_options.preserve_order`` (``recordkit convert --engine ray``
sets it) task ``i`` holds the ``i``-th run of the data set, so the parts read in name order
give the sequences in the order a single-process conversion writes them.

When the write completes, parts of the same naming left from an earlier, larger write to the
directory are removed, so the directory holds exactly this data set. Each part appears
atomically; the set as a whole does not: after a failed write the directory holds only
complete parts, but not necessarily all of them (``on_write_failed`` leaves them for
inspection; write again to replace them).
"""
from __future__ import annotations

import os
import re

import numpy as np

from recordkit.engine.streams import check_streams, resolve_precision
from recordkit.integrations.ray._arrow import arrow_to_chunk, to_table
from recordkit.integrations.chunk_plan import stream_specs as _streams

try:
    from ray.data import Datasink
except ImportError as e:  # pragma: no cover
    raise ImportError("recordkit.integrations.ray needs Ray Data: pip install 'recordkit[ray]'") from e

from recordkit.integrations import task_sets
from recordkit.storage import location

__all__ = ["CBFDatasink", "OFRecordDatasink", "DataSetDatasink"]


class _StreamsDatasink(Datasink):
    """What every recordkit datasink holds: the output, its streams and precision, what was written."""

    def __init__(self, directory, streams, *, precision="float", storage_options=None, checksums: bool = False):
        self.directory = directory if isinstance(directory, str) else os.fspath(directory)
        self.storage_options = storage_options
        self.checksums = bool(checksums)
        self.streams = check_streams(_streams(streams))
        self.precision = "double" if resolve_precision(precision) == np.float64 else "float"
        self.paths: list[str] = []
        self.sequences_written = 0

    def _write_blocks(self, blocks, open_out, write_chunk, abort, dtype=None):
        """A write task's non-empty blocks as chunks into the output ``open_out()`` makes at the first
        one (a task without rows makes none): (the output or None, sequences written). On failure
        ``abort(out)``, then the error goes on to Ray."""
        out, n = None, 0
        try:
            for block in blocks:
                table = to_table(block)
                if table.num_rows == 0:
                    continue
                if out is None:
                    out = open_out()
                chunk = arrow_to_chunk(table, self.streams, dtype=dtype)
                write_chunk(out, chunk)
                n += len(chunk)
        except BaseException:
            if out is not None:
                abort(out)
            raise
        return out, n


class _PartDatasink(_StreamsDatasink):
    """Shared plumbing: one lazily opened atomic part per task, stale parts removed at the end."""

    suffix = ""

    def __init__(self, directory, streams, *, precision="float", part_name_prefix: str = "part-",
                 part_name_suffix_length: int = 5, storage_options=None, checksums: bool = False):
        super().__init__(directory, streams, precision=precision, storage_options=storage_options,
                         checksums=checksums)
        self.prefix = part_name_prefix
        self.suffix_length = int(part_name_suffix_length)

    def part_path(self, task_index: int) -> str:
        digits = str(int(task_index))
        return location.join(self.directory,
                             self.prefix + "0" * max(self.suffix_length - len(digits), 0) + digits + self.suffix)

    def on_write_start(self, schema=None) -> None:
        location.makedirs(self.directory, self.storage_options)

    def write(self, blocks, ctx) -> dict:
        path = self.part_path(ctx.task_idx)

        def open_part():
            location.makedirs(self.directory, self.storage_options)  # the driver's may be another machine's
            return self._open(path)
        out, n = self._write_blocks(blocks, open_part, self._write_chunk, self._abort)
        if out is None:
            return {"path": None, "sequences": 0}
        self._close(out)
        return {"path": path, "sequences": n}

    def on_write_complete(self, write_result) -> None:
        returns = [r for r in write_result.write_returns if r]
        self.paths = sorted(r["path"] for r in returns if r["path"])
        self.sequences_written = sum(r["sequences"] for r in returns)
        self._remove_stale_parts({p.rstrip("/").rsplit("/", 1)[-1].rsplit(os.sep, 1)[-1] for p in self.paths})

    def _remove_stale_parts(self, keep: set) -> None:
        pattern = re.compile(re.escape(self.prefix) + r"\d+" + re.escape(self.suffix) + "$")
        from recordkit.storage.checksum import sidecar_path
        for name in location.listdir(self.directory, self.storage_options):
            if pattern.match(name) and name not in keep:
                stale = location.join(self.directory, name)
                location.remove(sidecar_path(stale), self.storage_options)
                location.remove(stale, self.storage_options)

    # per format
    def _open(self, path):  # pragma: no cover - abstract
        raise NotImplementedError

    def _write_chunk(self, out, chunk) -> None:  # pragma: no cover
        raise NotImplementedError

    def _close(self, out) -> None:
        out.close()

    def _abort(self, out) -> None:
        out.abort()


class CBFDatasink(_PartDatasink):
    """Write a Dataset as a directory of CBF files, ``part-NNNNN.cbf``, one per write task.

    ``streams``: the streams to write (``StreamSpec``s or ``"NAME=FORMAT:DIM"`` strings;
    their names are the columns read and the names stored in the header). ``precision``:
    'float' or 'double'; ``chunk_size``: CBF chunk size in bytes, as for ``CBFWriter``.
    ``recordkit.integrations.ray.read_cbf(directory)`` reads the parts back in order.
    """

    suffix = ".cbf"

    def __init__(self, directory, streams, *, precision="float", chunk_size: int | None = None,
                 part_name_prefix: str = "part-", part_name_suffix_length: int = 5, storage_options=None,
                 checksums: bool = False):
        super().__init__(directory, streams, precision=precision, part_name_prefix=part_name_prefix,
                         part_name_suffix_length=part_name_suffix_length, storage_options=storage_options,
                         checksums=checksums)
        self.chunk_size = chunk_size

    def _open(self, path):
        from recordkit.formats.cbf import CBFWriter
        extra = {} if self.chunk_size is None else {"chunk_size": self.chunk_size}
        return CBFWriter(path, self.streams, precision=self.precision, storage_options=self.storage_options,
                         checksums=self.checksums, **extra)

    def _write_chunk(self, out, chunk) -> None:
        out.write_chunk(chunk)


class OFRecordDatasink(_PartDatasink):
    """Write a Dataset as an OFRecord data set: ``part-NNNNN`` files, one per write task.

    Records follow ``recordkit.formats.ofrecord.deserializer``'s mapping (a dense stream is
    the feature named by its alias; a sparse one ``ALIAS:indices``/``:values``/``:nnz``;
    the key goes to ``key_feature``), exactly what ``recordkit convert`` writes.
    """

    def __init__(self, directory, streams, *, precision="float", key_feature: str | None = "key",
                 part_name_prefix: str = "part-", part_name_suffix_length: int = 5, storage_options=None,
                 checksums: bool = False):
        super().__init__(directory, streams, precision=precision, part_name_prefix=part_name_prefix,
                         part_name_suffix_length=part_name_suffix_length, storage_options=storage_options,
                         checksums=checksums)
        self.key_feature = key_feature

    def _open(self, path):
        from recordkit.storage.atomic import AtomicFile
        return AtomicFile(path, storage_options=self.storage_options, checksums=self.checksums)

    def _write_chunk(self, out, chunk) -> None:
        from recordkit.formats.ofrecord import codec
        from recordkit.formats.ofrecord.deserializer import chunk_records
        from recordkit.formats.ofrecord.writer import frame
        dtype = np.float64 if self.precision == "double" else np.float32
        for record in chunk_records(chunk, self.streams, dtype=dtype, key_feature=self.key_feature):
            out.write(frame(codec.encode(record)))

    def _close(self, out) -> None:
        out.commit()

    def _abort(self, out) -> None:
        out.discard()


class DataSetDatasink(_StreamsDatasink):
    """Write a Dataset as ONE data set of a directory format (WebDataset, TFRecord, MDS, Hugging
    Face ``save_to_disk``), ``to`` naming it in the format registry.

    Each write task writes its run of sequences with the format's own writer (the same bytes a
    local conversion writes) into a directory of its own, ``.OUT.<token>.tasks/task-TTTTT`` beside
    the output; when every task is done the driver joins those sets in task order
    (``Format.join``: shards renumbered, descriptions and indexes merged) and publishes the whole
    at once, so nothing appears under OUT before it is complete. A failed write removes the task
    directories. Ray Data's own ``write_webdataset`` / ``write_tfrecords`` write other layouts
    (dict samples, ``tf.train.Example``), not the bridge mapping, so they are not used.
    """

    def __init__(self, directory, streams, *, to: str, precision="float", shard_size: int | None = None,
                 storage_options=None, checksums: bool = False):
        from recordkit.formats import registry
        self.format = registry.get(to)
        if self.format.joiner is None:
            raise ValueError(f"{to}: not a directory format the Ray writer joins")
        self.format.require("writing")
        super().__init__(directory, streams, precision=precision, storage_options=storage_options,
                         checksums=checksums)
        self.shard_size = shard_size
        self.work = task_sets.work_directory(self.directory)

    def on_write_start(self, schema=None) -> None:
        location.makedirs(self.work, self.storage_options)

    def write(self, blocks, ctx) -> dict:
        where = task_sets.task_output(self.format, self.work, ctx.task_idx)
        options = {"shard_size": self.shard_size} if self.shard_size else {}

        def open_set():
            return self.format.open_writer(where, self.streams, precision=self.precision,
                                           storage_options=self.storage_options, checksums=self.checksums, **options)
        out, n = self._write_blocks(blocks, open_set, lambda w, chunk: w.write_chunk(chunk), lambda w: w.abort(),
                                    dtype=np.float64 if self.precision == "double" else np.float32)
        if out is None:
            return {"task": int(ctx.task_idx), "path": None, "sequences": 0}
        out.close()
        return {"task": int(ctx.task_idx), "path": where, "sequences": n}

    def on_write_complete(self, write_result) -> None:
        done = sorted((r for r in write_result.write_returns if r and r["path"]), key=lambda r: r["task"])
        self.paths = task_sets.publish(self.format, [r["path"] for r in done], self.directory, self.streams,
                                       work=self.work, precision=self.precision,
                                       storage_options=self.storage_options, checksums=self.checksums)
        self.sequences_written = sum(r["sequences"] for r in done)

    def on_write_failed(self, error: Exception) -> None:
        task_sets.discard(self.work, self.storage_options)
