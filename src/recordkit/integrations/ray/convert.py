"""Conversion on a Ray cluster: read tasks per input chunk, one output part per write task.

``write_parts`` is what ``recordkit convert --engine ray`` runs after building the input
dataset: it keeps Ray's block order (so part ``i`` holds the ``i``-th run of sequences and
the parts read in name order match a single-process conversion) and, when a task fails,
raises the recordkit error behind Ray's wrapper, so callers see ``path:line:col: ...``.
"""
from __future__ import annotations

from recordkit.errors import UsageError
from recordkit.integrations.ray._errors import recordkit_cause
from recordkit.integrations.ray.datasink import CBFDatasink, DataSetDatasink, OFRecordDatasink

__all__ = ["write_parts", "SINKS", "SET_FORMATS"]

SINKS = {"cbf": CBFDatasink, "ofrecord": OFRecordDatasink}
# directory formats written as one data set: a set per write task, joined (DataSetDatasink)
SET_FORMATS = ("webdataset", "tfrecord", "mds", "hf")


def write_parts(dataset, output, streams, *, to: str, precision: str = "float", chunk_size: int | None = None,
                **sink_options):
    """Write ``dataset`` to the directory ``output`` as ``to``: 'cbf' or 'ofrecord' parts (one per write
    task), or one data set of a directory format (``SET_FORMATS``: a set per task, joined when all
    are done); return the sink (its ``paths`` and ``sequences_written`` describe what was written).
    ``sink_options``: ``storage_options``, ``checksums``, ``shard_size`` (set formats)."""
    from ray.data import DataContext
    if to in SET_FORMATS:
        sink = DataSetDatasink(output, streams, to=to, precision=precision, **sink_options)
    elif to in SINKS:
        sink_options.pop("shard_size", None)
        from recordkit.formats import registry
        options = {"chunk_size": chunk_size} if chunk_size and registry.get(to).writer_takes("chunk_size") else {}
        sink = SINKS[to](output, streams, precision=precision, **options, **sink_options)
    else:
        raise UsageError(f"Ray conversion writes {', '.join(list(SINKS) + list(SET_FORMATS))} or parquet, not {to}")
    ctx = DataContext.get_current()
    before = ctx.execution_options.preserve_order
    ctx.execution_options.preserve_order = True
    try:
        dataset.write_datasink(sink)
    except Exception as e:
        cause = recordkit_cause(e)
        if cause is not None and cause is not e:
            raise cause from None
        raise
    finally:
        ctx.execution_options.preserve_order = before
    return sink
