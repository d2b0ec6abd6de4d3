"""Ray Data datasources over recordkit's deserializers: one block per chunk of the input.

Every recordkit format already cuts its files into chunks that load independently (CTF:
runs of whole sequences of about ``chunk_size`` bytes found by the index; CBF: the offset
table's chunks; OFRecord: runs of ``records_per_chunk`` records of one part; SINGA: runs
of ``tuples_per_chunk`` tuples). Those are the natural units of distributed work, so a read
task covers one chunk (or, with ``num_read_tasks``, a run of consecutive chunks) and yields
one Arrow block per chunk (Ray joins consecutive small blocks of one task up to its target
block size, so with fewer tasks than chunks a block may hold several whole chunks). The driver opens each input once to learn its streams and
chunks; each task opens its inputs again itself from a picklable recipe (the reader class
and its arguments), so nothing open crosses a process boundary.

A CTF reader builds its index by scanning the whole file when it opens, so every read task
scans it again: for large files pass ``cache_index=True`` (the driver writes the index
beside the file once, the tasks load it), or fewer tasks with ``num_read_tasks``. Error
budgets (``max_errors``) count per task, since each task has its own reader.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Callable, Sequence

from recordkit.errors import UsageError
from recordkit.formats.file_openers import (cbf_files, cbf_openers, ctf_openers,  # noqa: F401
                                            ofrecord_openers, singa_openers)
from recordkit.integrations.chunk_plan import ChunkPlan, openers_for, read_task
from recordkit.integrations.ray._arrow import chunk_to_arrow

try:
    from ray.data import Datasource, ReadTask
    from ray.data.block import BlockMetadata
except ImportError as e:  # pragma: no cover - the package __init__ says how to install
    raise ImportError("recordkit.integrations.ray needs Ray Data: pip install 'recordkit[ray]'") from e

__all__ = ["ChunkDatasource", "dataset_from", "read_ctf", "read_cbf", "read_ofrecord", "read_singa",
           "ctf_datasource", "cbf_datasource", "ofrecord_datasource", "singa_datasource"]


class ChunkDatasource(Datasource, ChunkPlan):
    """A Ray ``Datasource`` over recordkit deserializers, one block per chunk.

    ``openers``: zero-argument picklable callables (e.g. ``functools.partial(CTFReader,
    path, streams)``), each returning a reader that follows the engine's ``Deserializer``
    protocol (``streams``, ``chunks``, ``load_chunk``) and has a ``path``. All inputs must
    declare the same streams. ``continue_keys``: number sequences on across inputs (for
    formats whose keys are ordinals, such as CBF, so a directory of parts keys its
    sequences as the single file would). ``include_paths``: add a ``path`` column. The
    planning is ``integrations/chunk_plan.ChunkPlan``'s, shared with the Spark data source.
    """

    def __init__(self, openers: Sequence[Callable], *, continue_keys: bool = False, include_paths: bool = False,
                 name: str = "Recordkit"):
        Datasource.__init__(self)
        ChunkPlan.__init__(self, openers, continue_keys=continue_keys)
        self._name = name
        self.include_paths = bool(include_paths)

    def get_name(self) -> str:
        return self._name

    def estimate_inmemory_data_size(self) -> int:
        return sum(self.estimate(c) for _, c in self._units)

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None, data_context=None,
                       **_) -> list:
        """One task per chunk, or ``parallelism`` tasks over runs of consecutive chunks if that is fewer."""
        tasks = []
        for task in self.tasks(parallelism):
            meta = _block_metadata(num_rows=task.num_sequences, size_bytes=task.size_bytes,
                                   input_files=list(task.files))
            read = functools.partial(_read_chunks, task.plan, self.include_paths)
            extra = {} if per_task_row_limit is None else {"per_task_row_limit": per_task_row_limit}
            tasks.append(ReadTask(read, meta, **extra))
        return tasks


def _read_chunks(plan, include_paths: bool):
    """Run inside a read task: open each input, yield one Arrow table per chunk."""
    for path, streams, chunk in read_task(plan):
        yield chunk_to_arrow(chunk, streams, path=path if include_paths else None)


def _block_metadata(**fields):
    """BlockMetadata across Ray releases (older ones also take a ``schema``)."""
    names = {f.name for f in dataclasses.fields(BlockMetadata)}
    kwargs = {k: v for k, v in fields.items() if k in names}
    kwargs.setdefault("exec_stats", None)
    if "schema" in names:
        kwargs.setdefault("schema", None)
    return BlockMetadata(**kwargs)


def dataset_from(source: ChunkDatasource, *, num_read_tasks: int | None = None, ray_remote_args: dict | None = None,
                 concurrency: int | None = None):
    """``ray.data.read_datasource`` asking for exactly one task per chunk (unless told fewer).

    Asking Ray for as many blocks as there are chunks matters: given fewer tasks than the
    block count it would pick itself, Ray splits each task's output further, and blocks
    would no longer follow the chunk boundaries.
    """
    import ray.data
    n = max(1, int(num_read_tasks) if num_read_tasks else source.num_chunks)
    params = inspect.signature(ray.data.read_datasource).parameters
    kwargs = {"override_num_blocks" if "override_num_blocks" in params else "parallelism": n}
    if ray_remote_args:
        kwargs["ray_remote_args"] = dict(ray_remote_args)
    if concurrency is not None:
        kwargs["concurrency"] = concurrency
    return ray.data.read_datasource(source, **kwargs)


def ctf_datasource(paths, streams, *, include_paths: bool = False, **reader_options) -> ChunkDatasource:
    """The datasource behind ``read_ctf`` (its ``streams`` and ``num_chunks`` are known before reading)."""
    return ChunkDatasource(ctf_openers(paths, streams, **reader_options), include_paths=include_paths, name="CTF")


def read_ctf(paths, streams, *, num_read_tasks: int | None = None, include_paths: bool = False,
             ray_remote_args: dict | None = None, concurrency: int | None = None, **reader_options):
    """CTF files as a ``ray.data.Dataset``, one block per chunk.

    ``streams``: ``StreamSpec``s (or ``"NAME=FORMAT:DIM[:ALIAS]"`` strings) as for
    ``CTFReader``; ``reader_options``: the rest of ``CTFReader``'s parameters (``precision``,
    ``max_errors``, ``skip_sequence_ids``, ``chunk_size``, ``cache_index``, ...).
    ``num_read_tasks``: run fewer tasks than chunks, each reading consecutive chunks (a task
    yields a block per chunk; Ray may join a task's small blocks, but a block never cuts a
    chunk). The column layout is in ``recordkit.integrations.ray``.
    """
    return dataset_from(ctf_datasource(paths, streams, include_paths=include_paths, **reader_options),
                        num_read_tasks=num_read_tasks, ray_remote_args=ray_remote_args, concurrency=concurrency)


def cbf_datasource(paths, streams=None, *, include_paths: bool = False, **reader_options) -> ChunkDatasource:
    """The datasource behind ``read_cbf``."""
    return ChunkDatasource(cbf_openers(paths, streams, **reader_options), continue_keys=True,
                           include_paths=include_paths, name="CBF")


def read_cbf(paths, streams=None, *, num_read_tasks: int | None = None, include_paths: bool = False,
             ray_remote_args: dict | None = None, concurrency: int | None = None, **reader_options):
    """CBF files (or directories of ``*.cbf`` parts, such as ``CBFDatasink`` writes) as a Dataset.

    ``streams``: None for every stream of the files, or a selection/renaming as for
    ``CBFReader``. CBF keys are ordinals, so they continue from one file to the next: a
    directory of parts gives the keys the single file would.
    """
    return dataset_from(cbf_datasource(paths, streams, include_paths=include_paths, **reader_options),
                        num_read_tasks=num_read_tasks, ray_remote_args=ray_remote_args, concurrency=concurrency)


def ofrecord_datasource(dirs, streams, *, include_paths: bool = False, **reader_options) -> ChunkDatasource:
    """The datasource behind ``read_ofrecord``."""
    return ChunkDatasource(ofrecord_openers(dirs, streams, **reader_options), include_paths=include_paths,
                           name="OFRecord")


def read_ofrecord(dirs, streams, *, num_read_tasks: int | None = None, include_paths: bool = False,
                  ray_remote_args: dict | None = None, concurrency: int | None = None, **reader_options):
    """OFRecord data sets (directories of part files, or single part files) as a Dataset.

    ``streams`` map features to streams as ``OFRecordDeserializer`` does (the alias is the
    feature name; a sparse stream is ``ALIAS:indices``/``:values``/``:nnz``);
    ``reader_options``: ``precision``, ``records_per_chunk``, ``data_part_num``, ...
    """
    return dataset_from(ofrecord_datasource(dirs, streams, include_paths=include_paths, **reader_options),
                        num_read_tasks=num_read_tasks, ray_remote_args=ray_remote_args, concurrency=concurrency)


def singa_datasource(paths, store: str | None = None, *, include_paths: bool = False,
                     **reader_options) -> ChunkDatasource:
    """The datasource behind ``read_singa``."""
    return ChunkDatasource(singa_openers(paths, store, **reader_options), include_paths=include_paths,
                           name="Singa")


def read_singa(paths, store: str | None = None, *, num_read_tasks: int | None = None, include_paths: bool = False,
               ray_remote_args: dict | None = None, concurrency: int | None = None, **reader_options):
    """SINGA stores as a Dataset, through recordkit's SINGA deserializers.

    ``store``: ``"kvfile"``/``"binfile"`` (record stores: streams ``features`` and
    ``label``; None sniffs the kind) or ``"csv"`` (CSVInputLayer text; pass ``count=``, the
    values per line). ``reader_options`` go to ``SingaRecordDeserializer`` (``precision``,
    ``tuples_per_chunk``, ``mean``, ``std``) or ``SingaCSVDeserializer``.
    """
    return dataset_from(singa_datasource(paths, store, include_paths=include_paths, **reader_options),
                        num_read_tasks=num_read_tasks, ray_remote_args=ray_remote_args, concurrency=concurrency)


def datasource_for(path, *, source_format: str | None = None, streams=None, precision=None, storage_options=None,
                   cache_dir=None, **ctf_options) -> ChunkDatasource:
    """The datasource a conversion reads ``path`` through, chosen by its format (sniffed unless
    ``source_format`` says): CBF (``streams`` select), OFRecord (``streams`` or the data set's own
    declarations), SINGA record stores, CTF (``streams`` required; ``ctf_options`` are CTFReader's).
    Other formats are a UsageError: they convert with the local engine."""
    from recordkit.formats import registry
    from recordkit.formats.detect import sniff
    kind = source_format or sniff(path, storage_options)
    fmt = registry.of_kind(kind)
    if fmt.file_openers is None:
        raise UsageError(f"--engine ray does not read {kind} input; convert it with the local engine")
    _, openers, continue_keys = openers_for(path, source_format=kind, streams=streams, precision=precision,
                                            storage_options=storage_options, cache_dir=cache_dir, **ctf_options)
    return ChunkDatasource(openers, continue_keys=continue_keys, name=fmt.title)
