"""``recordkit convert --engine ray ... --to parquet``: Ray Data's own Parquet writer over the mapping.

Each block (a run of input chunks in the Ray layout of ``_arrow.py``) is turned into the Parquet
mapping's columns (``formats/parquet/arrow.py``: dense ``list<fixed_size_list<float>[DIM]>``,
sparse ``list<struct<indices, values>>``, ``key``, the stream declarations in the schema
metadata) by a ``map_batches`` step, and ``Dataset.write_parquet`` writes one
``part-TTTTT.parquet`` per write task (task order = data order, ``preserve_order``). A local
directory is written aside and put in place whole (``storage/staged_directory.py``); on a URL the files
appear one by one, as Ray writes them.
"""
from __future__ import annotations

import numpy as np

from recordkit.engine.streams import check_streams, resolve_precision
from recordkit.integrations.ray._arrow import arrow_to_chunk, to_table

try:
    from ray.data.datasource import FilenameProvider
except ImportError as e:  # pragma: no cover
    raise ImportError("recordkit.integrations.ray needs Ray Data: pip install 'recordkit[ray]'") from e


class PartNames(FilenameProvider):
    """``part-TTTTT.parquet`` by write task (the recordkit reader's part order)."""

    def __init__(self):
        super().__init__(file_format="parquet")

    def get_filename_for_task(self, write_uuid, task_index):
        return f"part-{task_index:05d}.parquet"

    def get_filename_for_block(self, block, write_uuid, task_index, block_index):
        return f"part-{task_index:05d}.parquet" if block_index == 0 else \
            f"part-{task_index:05d}-{block_index:05d}.parquet"


def to_mapping(block, streams, precision):
    """One Ray block (recordkit's Ray layout) as a table of the Parquet mapping."""
    import pyarrow as pa
    from recordkit.formats.parquet.arrow import chunk_to_batch, schema_for, sequence_runs
    dtype = resolve_precision(precision)
    schema = schema_for(streams, "double" if dtype == np.float64 else "float")
    chunk = arrow_to_chunk(to_table(block), streams, dtype=dtype)
    batches = [chunk_to_batch(chunk, streams, schema, dtype, a, b) for a, b in sequence_runs(chunk, streams)]
    return pa.Table.from_batches(batches, schema=schema)


def write_parquet(dataset, output, streams, *, precision="float", storage_options=None, checksums=False):
    """Write ``dataset`` (recordkit's Ray layout) as a directory of Parquet parts; returns
    ``(paths, sequences)``."""
    from ray.data import DataContext
    from recordkit.errors import UsageError
    from recordkit.storage.staged_directory import StagedDirectory
    from recordkit.integrations.ray._errors import recordkit_cause
    from recordkit.storage import location
    if checksums:
        raise UsageError("--engine ray --to parquet writes no checksum sidecars; convert with the local engine, "
                         "or run `recordkit checksum create` on the parts afterwards")
    streams = check_streams(streams)
    staged = StagedDirectory(output, lambda n: n.startswith("part-") and n.endswith(".parquet"),
                             storage_options=storage_options, what="Parquet part directory")
    where = staged.staging or staged.target
    ctx = DataContext.get_current()
    before = ctx.execution_options.preserve_order
    ctx.execution_options.preserve_order = True
    try:
        mapped = dataset.map_batches(to_mapping, fn_args=(streams, precision), batch_format="pyarrow",
                                     batch_size=None, zero_copy_batch=True)
        fs = None
        if location.is_url(where):
            import pyarrow.fs as pafs
            fs = pafs.PyFileSystem(pafs.FSSpecHandler(location.filesystem(where, storage_options)[0]))
            where = location.filesystem(where, storage_options)[1]
        try:
            from ray.data import SaveMode
            mode = {"mode": SaveMode.OVERWRITE}  # a fresh staging directory: nothing of anybody's to keep
        except ImportError:  # Ray releases before SaveMode
            mode = {}
        mapped.write_parquet(where, filesystem=fs, filename_provider=PartNames(), use_dictionary=False, **mode)
        names = sorted(n for n in location.listdir(staged.staging or staged.target, storage_options)
                       if n.startswith("part-") and n.endswith(".parquet"))
        staged.written.extend(names)
        staged.commit()
    except Exception as e:
        staged.abort()
        cause = recordkit_cause(e)
        if cause is not None and cause is not e:
            raise cause from None
        raise
    finally:
        ctx.execution_options.preserve_order = before
    paths = [location.join(output, n) for n in names]
    if location.is_url(output):
        return paths, None
    import pyarrow.parquet as pq
    return paths, sum(pq.ParquetFile(p).metadata.num_rows for p in paths)
