"""Conversion on a Ray cluster: read tasks per input chunk, one output part per write task.

``write_parts`` is what ``recordkit convert --engine ray`` runs after building the input
dataset: it keeps Ray's block order (so part ``i`` holds the ``i``-th run of sequences and
the parts read in name order match a single-process conversion) and, when a task fails,
raises the recordkit error behind Ray's wrapper, so callers see ``path:line:col: ...``.
"""
from __future__ import annotations

from recordkit.errors import UsageError
from recordkit.integrations.ray._errors import recordkit_cause
from recordkit.integrations.ray.datasink import CBFDatasink, OFRecordDatasink

__all__ = ["write_parts", "SINKS"]

SINKS = {"cbf": CBFDatasink, "ofrecord": OFRecordDatasink}


def write_parts(dataset, output, streams, *, to: str, precision: str = "float", chunk_size: int | None = None,
                **sink_options):
    """Write ``dataset`` to the directory ``output`` as ``to`` ('cbf' or 'ofrecord') parts; return the sink
    (its ``paths`` and ``sequences_written`` describe what was written). ``sink_options``:
    ``storage_options``, ``checksums``."""
    from ray.data import DataContext
    if to not in SINKS:
        raise UsageError(f"Ray conversion writes {' or '.join(SINKS)} part directories, not {to}")
    options = {"chunk_size": chunk_size} if to == "cbf" and chunk_size else {}
    sink = SINKS[to](output, streams, precision=precision, **options, **sink_options)
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
