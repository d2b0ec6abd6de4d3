"""Ray Data integration: recordkit formats as distributed datasets, and datasets back to files.

Reading (one read task per chunk, one block per chunk, files opened inside the tasks)::

    import ray
    from recordkit.integrations.ray import read_ctf, read_cbf, read_ofrecord, read_singa

    ds = read_ctf("train.ctf", ["x=dense:3", "y=sparse:5"], chunk_size=32 << 20)
    ds = read_cbf("train.cbf")                 # or a directory of part-NNNNN.cbf files
    ds = read_ofrecord("train_dir", ["x=dense:3"])
    ds = read_singa("train.bin", store="kvfile")

Columns, one row per sequence: ``key`` (uint64); a dense stream ``NAME`` as a
(samples, dim) tensor per row (Ray's tensor extension; variable-shaped when sequence
lengths differ); a sparse stream as ``NAME.indices`` (int32), ``NAME.values`` and
``NAME.nnz`` (entries per sample: its length is the sequence's sample count) list columns;
with ``include_paths=True`` a ``path`` column. ``chunk_to_arrow`` / ``arrow_to_chunk``
convert between a recordkit ``ChunkData`` and that layout.

Writing (one atomic part file per write task, named by the task index)::

    from recordkit.integrations.ray import CBFDatasink, OFRecordDatasink
    ds.write_datasink(CBFDatasink("out_cbf", ["x=dense:3", "y=sparse:5"]))   # part-00000.cbf, ...
    ds.write_datasink(OFRecordDatasink("out_ofrecord", ["x=dense:3"]))      # part-00000, ...

Training workers (``streaming_split`` shares one execution among n consumers)::

    from recordkit.integrations.ray import minibatches_from_ray
    its = ds.streaming_split(2, equal=True)
    # in worker i:
    for mb in minibatches_from_ray(its[i], streams, batch_size=64):
        mb["x"].data, mb["x"].mask, mb["y"].csr, mb.keys ...   # engine Minibatch

Errors raised in a task reach the driver as Ray's ``RayTaskError(FormatError)``, which is a
``FormatError`` too (path, line, column intact); ``recordkit convert --engine ray`` reports
the recordkit error itself. Workers must be able to import recordkit, and paths must name
the same files on every node (a shared file system) until fsspec URLs are supported.
"""
from __future__ import annotations

try:
    import ray.data  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised only without Ray
    raise ImportError("recordkit.integrations.ray needs Ray Data: pip install 'recordkit[ray]'") from e

from recordkit.integrations.ray._arrow import arrow_to_chunk, chunk_to_arrow, sparse_columns
from recordkit.integrations.ray.convert import write_parts
from recordkit.integrations.ray.datasink import CBFDatasink, DataSetDatasink, OFRecordDatasink
from recordkit.integrations.ray.datasource import (ChunkDatasource, cbf_datasource, ctf_datasource, dataset_from,
                                                   datasource_for,
                                                   ofrecord_datasource, read_cbf, read_ctf, read_ofrecord,
                                                   read_singa, singa_datasource)
from recordkit.integrations.ray.training import minibatch_from_batch, minibatches_from_ray


__all__ = ["read_ctf", "read_cbf", "read_ofrecord", "read_singa", "ChunkDatasource", "dataset_from", "datasource_for",
           "ctf_datasource", "cbf_datasource", "ofrecord_datasource", "singa_datasource",
           "CBFDatasink", "OFRecordDatasink", "DataSetDatasink", "write_parts", "minibatches_from_ray", "minibatch_from_batch",
           "chunk_to_arrow", "arrow_to_chunk", "sparse_columns"]
