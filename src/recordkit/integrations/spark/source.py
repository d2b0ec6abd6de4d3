"""``spark.read.format("recordkit")``: a Python data source whose partitions are the input's chunks.

The driver plans the input once (``integrations/chunk_plan.ChunkPlan``, the planning the Ray
datasource uses: CBF chunks, CTF index chunks, OFRecord runs of records, SINGA tuples, the
bridge formats' row groups and shards); each partition is a run of consecutive chunks (one
chunk each unless ``numPartitions`` asks for fewer) with a picklable recipe to reopen its
inputs, and ``read`` yields Arrow RecordBatches in the mapping of ``_columns``. A located
error (``FormatError``) raised while a partition loads fails its Spark task with the
recordkit message (file, line:column or byte offset) in the job's error.
"""
from __future__ import annotations

from recordkit.errors import UsageError
from recordkit.integrations.chunk_plan import ChunkPlan, ReadTask, openers_for, read_task
from recordkit.integrations.spark import _columns
from recordkit.integrations.spark.options import flag as _flag, integer as _int, stream_option  # noqa: F401

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

__all__ = ["RecordkitDataSource", "ChunkPartition"]


class ChunkPartition(InputPartition):
    """One Spark partition: a ``chunk_plan.ReadTask`` (a run of consecutive chunks)."""


class RecordkitDataSource(DataSource):
    """recordkit data as a Spark data source (register with ``recordkit.integrations.spark.register``).

    Reading options: ``path`` (``load(PATH)``); ``streams`` (the CLI's ``--stream`` strings, for
    formats that need them, e.g. CTF; otherwise they select streams, or all recorded streams
    are read); ``from`` (the input format, sniffed by default); ``precision``
    (``float``/``double``); ``numPartitions`` (fewer partitions than chunks); CTF's
    ``maxErrors``, ``chunkSize``, ``cacheIndex``. Writing: see ``sink.RecordkitWriter``.
    """

    @classmethod
    def name(cls) -> str:
        return "recordkit"

    def _plan(self):
        plan = getattr(self, "_planned", None)
        if plan is None:
            path = self.options.get("path")
            if not path:
                raise UsageError("spark.read.format('recordkit').load(PATH): no path given")
            ctf = {k: v for k, v in (("max_errors", _int(self.options, "maxErrors")),
                                     ("chunk_size", _int(self.options, "chunkSize"))) if v is not None}
            if _flag(self.options, "cacheIndex"):
                ctf["cache_index"] = True
            _, openers, continue_keys = openers_for(path, source_format=self.options.get("from") or None,
                                                    streams=stream_option(self.options.get("streams")),
                                                    precision=self.options.get("precision") or None, **ctf)
            plan = self._planned = ChunkPlan(openers, continue_keys=continue_keys)
        return plan

    def _precision(self) -> str:
        from recordkit.compose.convert import precision_of
        return self.options.get("precision") or precision_of(self._plan())

    def schema(self):
        return _columns.spark_schema(self._plan().streams, self._precision())

    def reader(self, schema) -> "RecordkitReader":
        plan = self._plan()
        return RecordkitReader(plan, self._precision(), schema, _int(self.options, "numPartitions"))

    def writer(self, schema, overwrite: bool):
        from recordkit.integrations.spark.sink import RecordkitWriter
        return RecordkitWriter(self.options, schema, overwrite)


class RecordkitReader(DataSourceReader):
    """Partitions from the plan; ``read`` loads one partition's chunks as RecordBatches."""

    def __init__(self, plan: ChunkPlan, precision: str, schema, num_partitions: int | None = None):
        self.tasks = plan.tasks(num_partitions or max(1, plan.num_chunks))
        self.streams = plan.streams
        self.precision = precision
        self.target = _columns.arrow_schema(schema)

    def partitions(self):
        # no chunks at all: one empty partition (an empty DataFrame of the schema)
        return [ChunkPartition(t) for t in self.tasks] or [ChunkPartition(ReadTask((), (), 0, 0))]

    def read(self, partition):
        for path, streams, chunk in read_task(partition.value.plan):
            yield from _columns.batches(chunk, streams, self.precision, self.target, path)
