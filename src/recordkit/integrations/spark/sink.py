"""``df.write.format("recordkit").option("to", FORMAT).save(PATH)``: recordkit's writers per Spark task.

Each task turns its Arrow batches back into chunks (the Parquet bridge's ``batch_to_chunk``,
which takes the columns ``_columns`` maps streams to) and writes them with the format's own
writer to an output of its own beside PATH; ``commit()`` on the driver joins the tasks'
outputs in partition order and publishes the whole at once, ``abort()`` removes them
(``integrations/task_sets``, the code Ray's ``DataSetDatasink`` uses). So PATH holds the
complete data set or what it held before, never a part of a failed job.

Options: ``to`` (the format; default: PATH's extension), ``streams`` (``NAME=FORMAT:DIM``
strings naming the columns to write; default: the declarations a recordkit read records in
the schema), ``precision``, ``chunkSize`` (CBF), ``shardSize`` (shard formats),
``checksums``. Without a ``key`` column a task numbers its sequences from 0. Spark offers
Python data sources the modes ``overwrite`` (PATH replaced as a whole) and ``append``, which
writes a new PATH only: recordkit data sets are not appended to.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from recordkit.engine.streams import StreamSpec, check_streams, resolve_precision
from recordkit.errors import UsageError
from recordkit.formats.parquet.arrow import batch_to_chunk
from recordkit.integrations import task_sets
from recordkit.integrations.spark import _columns
from recordkit.integrations.spark.options import flag as _flag, integer as _int, stream_option
from recordkit.storage import location

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

__all__ = ["RecordkitWriter"]


@dataclasses.dataclass
class TaskWritten(WriterCommitMessage):
    """What one task wrote: its partition, its output (None without rows), its sequences."""
    task: int
    path: str | None
    sequences: int


class RecordkitWriter(DataSourceArrowWriter):
    """Built on the driver; pickled to the tasks (``write``) and back for ``commit``/``abort``."""

    def __init__(self, options, schema, overwrite: bool):
        from recordkit.formats import registry
        self.directory = options.get("path")
        if not self.directory:
            raise UsageError("df.write.format('recordkit').save(PATH): no path given")
        to = options.get("to")
        self.format = registry.get(to) if to else registry.by_extension(self.directory)
        if self.format is None:
            raise UsageError(f"{self.directory}: say the format to write with .option('to', FORMAT) "
                             f"(one of {', '.join(registry.writable())})")
        task_sets.check_writable(self.format)
        declared = _columns.streams_of(schema, stream_option(options.get("streams")))
        self.precision = options.get("precision") or _columns.precision_of(schema, declared)
        dtype = np.float64 if resolve_precision(self.precision) == np.float64 else np.float32
        self.precision = "double" if dtype == np.float64 else "float"
        # read from column ALIAS, written as stream NAME
        self.columns = [(s.alias, StreamSpec(s.name, s.format, s.dim, s.alias, s.defines_mb_size, dtype))
                        for s in declared]
        self.streams = check_streams([StreamSpec(s.name, s.format, s.dim, None, s.defines_mb_size, dtype)
                                      for s in declared])
        if not overwrite and (location.isfile(self.directory) or location.isdir(self.directory)):
            raise UsageError(f"{self.directory}: exists; .mode('overwrite') replaces it as a whole "
                             f"(.mode('append') writes a new PATH only)")
        self.options = {k: v for k, v in (("chunk_size", _int(options, "chunkSize")),
                                          ("shard_size", _int(options, "shardSize"))) if v is not None}
        self.checksums = _flag(options, "checksums")
        self.work = task_sets.work_directory(self.directory)

    def write(self, iterator):
        from pyspark import TaskContext
        task = TaskContext.get().partitionId()
        where = task_sets.task_output(self.format, self.work, task)
        out, n = None, 0
        try:
            for batch in iterator:
                if batch.num_rows == 0:
                    continue
                if out is None:
                    location.makedirs(self.work)
                    out = self.format.open_writer(where, self.streams, precision=self.precision,
                                                  checksums=self.checksums, **self.options)
                chunk = batch_to_chunk(batch, self.columns, path=self.directory, where=f"Spark partition {task}",
                                       chunk_id=-1, first_key=n, first_row=n)
                out.write_chunk(chunk)
                n += len(chunk)
        except BaseException:
            if out is not None:
                out.abort()
            raise
        if out is None:
            return TaskWritten(task, None, 0)
        out.close()
        return TaskWritten(task, where, n)

    def commit(self, messages) -> None:
        done = sorted((m for m in messages if m is not None and m.path), key=lambda m: m.task)
        task_sets.publish(self.format, [m.path for m in done], self.directory, self.streams, work=self.work,
                          precision=self.precision, checksums=self.checksums)

    def abort(self, messages) -> None:
        task_sets.discard(self.work)
