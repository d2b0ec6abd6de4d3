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
import os
from typing import Callable, Sequence

import numpy as np

from recordkit.engine.streams import StreamSpec
from recordkit.errors import UsageError
from recordkit.integrations.ray._arrow import chunk_to_arrow

try:
    from ray.data import Datasource, ReadTask
    from ray.data.block import BlockMetadata
except ImportError as e:  # pragma: no cover - the package __init__ says how to install
    raise ImportError("recordkit.integrations.ray needs Ray Data: pip install 'recordkit[ray]'") from e

__all__ = ["ChunkDatasource", "dataset_from", "read_ctf", "read_cbf", "read_ofrecord", "read_singa",
           "ctf_datasource", "cbf_datasource", "ofrecord_datasource", "singa_datasource"]


@dataclasses.dataclass(frozen=True)
class _Input:
    """One input as the driver planned it: how to reopen it, its chunks, its key offset."""
    opener: Callable
    path: str
    files: tuple
    chunks: tuple
    key_base: int


class ChunkDatasource(Datasource):
    """A Ray ``Datasource`` over recordkit deserializers, one block per chunk.

    ``openers``: zero-argument picklable callables (e.g. ``functools.partial(CTFReader,
    path, streams)``), each returning a reader that follows the engine's ``Deserializer``
    protocol (``streams``, ``chunks``, ``load_chunk``) and has a ``path``. All inputs must
    declare the same streams. ``continue_keys``: number sequences on across inputs (for
    formats whose keys are ordinals, such as CBF, so a directory of parts keys its
    sequences as the single file would). ``include_paths``: add a ``path`` column.
    """

    def __init__(self, openers: Sequence[Callable], *, continue_keys: bool = False, include_paths: bool = False,
                 name: str = "Recordkit"):
        super().__init__()
        if not openers:
            raise UsageError("no input files given")
        self._name = name
        self.include_paths = bool(include_paths)
        self.inputs: list[_Input] = []
        self._streams: list[StreamSpec] | None = None
        first_key = 0
        for opener in openers:
            with opener() as reader:
                streams, chunks, path = reader.streams, reader.chunks, str(reader.path)
                files = tuple(getattr(reader, "paths", None) or [path])
            if self._streams is None:
                self._streams = streams
            elif _shape(streams) != _shape(self._streams):
                raise UsageError(f"{path}: its streams ({_describe(streams)}) differ from those of "
                                 f"{self.inputs[0].path} ({_describe(self._streams)})")
            self.inputs.append(_Input(opener, path, files, tuple(chunks), first_key if continue_keys else 0))
            first_key += sum(c.num_sequences for c in chunks)
        self._units = [(i, c) for i, inp in enumerate(self.inputs) for c in inp.chunks]

    # -- what the driver knows ------------------------------------------------------------------
    @property
    def streams(self) -> list[StreamSpec]:
        return list(self._streams)

    @property
    def num_chunks(self) -> int:
        return len(self._units)

    @property
    def num_sequences(self) -> int:
        return sum(c.num_sequences for _, c in self._units)

    def get_name(self) -> str:
        return self._name

    def _estimate(self, info) -> int:
        """In-memory bytes of a chunk's block: dense values exactly, sparse ones by the bytes on disk."""
        dense = sum(s.dim * (s.dtype.itemsize if s.dtype is not None else 4) for s in self._streams
                    if not s.is_sparse)
        return int(max(info.size, info.num_samples * dense) + 16 * info.num_sequences)

    def estimate_inmemory_data_size(self) -> int:
        return sum(self._estimate(c) for _, c in self._units)

    # -- the read tasks -------------------------------------------------------------------------
    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None, data_context=None,
                       **_) -> list:
        """One task per chunk, or ``parallelism`` tasks over runs of consecutive chunks if that is fewer."""
        units = self._units
        if not units:
            return []
        groups = np.array_split(np.arange(len(units)), max(1, min(int(parallelism), len(units))))
        tasks = []
        for group in groups:
            plan, last = [], None  # (opener, path, key base, chunk ids) per input, in order
            for u in group:
                i, info = units[int(u)]
                inp = self.inputs[i]
                if i == last:
                    plan[-1][3].append(info.id)
                else:
                    plan.append((inp.opener, inp.path, inp.key_base, [info.id]))
                    last = i
            infos = [units[int(u)][1] for u in group]
            files = sorted({f for u in group for f in self.inputs[units[int(u)][0]].files})
            meta = _block_metadata(num_rows=sum(c.num_sequences for c in infos),
                                   size_bytes=sum(self._estimate(c) for c in infos), input_files=files)
            read = functools.partial(_read_chunks, tuple((o, p, k, tuple(ids)) for o, p, k, ids in plan),
                                     self.include_paths)
            extra = {} if per_task_row_limit is None else {"per_task_row_limit": per_task_row_limit}
            tasks.append(ReadTask(read, meta, **extra))
        return tasks


def _read_chunks(plan, include_paths: bool):
    """Run inside a read task: open each input, yield one Arrow table per chunk."""
    for opener, path, key_base, chunk_ids in plan:
        with opener() as reader:
            streams = reader.streams
            for chunk_id in chunk_ids:
                chunk = reader.load_chunk(chunk_id)
                if len(chunk) == 0:  # every sequence of it was dropped under max_errors
                    continue
                if key_base:
                    chunk = dataclasses.replace(chunk, keys=chunk.keys + np.uint64(key_base))
                yield chunk_to_arrow(chunk, streams, path=path if include_paths else None)


def _block_metadata(**fields):
    """BlockMetadata across Ray releases (older ones also take a ``schema``)."""
    names = {f.name for f in dataclasses.fields(BlockMetadata)}
    kwargs = {k: v for k, v in fields.items() if k in names}
    kwargs.setdefault("exec_stats", None)
    if "schema" in names:
        kwargs.setdefault("schema", None)
    return BlockMetadata(**kwargs)


def _shape(streams) -> list:
    return [(s.name, s.format, s.dim) for s in streams]


def _describe(streams) -> str:
    return ", ".join(f"{s.name}={s.format}:{s.dim}" for s in streams)


def _paths(paths) -> list[str]:
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    out = [os.fspath(p) for p in paths]
    if not out:
        raise UsageError("no input files given")
    return out


def _streams(streams) -> list[StreamSpec]:
    """StreamSpecs from specs or CLI-style strings ``NAME=FORMAT:DIM[:ALIAS]``."""
    return [StreamSpec.parse(s) if isinstance(s, str) else s for s in streams]


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
    from recordkit.formats.ctf import CTFReader
    specs = _streams(streams)
    openers = [functools.partial(CTFReader, p, specs, **reader_options) for p in _paths(paths)]
    return ChunkDatasource(openers, include_paths=include_paths, name="CTF")


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


def cbf_files(path) -> list[str]:
    """A CBF file, or the numbered ``*.cbf`` parts of a directory in part order (``part-2`` before
    ``part-10``); any other directory is not one data set (``formats/directories.py``)."""
    from recordkit.formats.cbf.parts import cbf_part_paths
    path = os.fspath(path)
    return cbf_part_paths(path) if os.path.isdir(path) else [path]


def cbf_datasource(paths, streams=None, *, include_paths: bool = False, **reader_options) -> ChunkDatasource:
    """The datasource behind ``read_cbf``."""
    from recordkit.formats.cbf import CBFReader
    files = [f for p in _paths(paths) for f in cbf_files(p)]
    selection = streams if streams is None or isinstance(streams, dict) else _streams(streams)
    openers = [functools.partial(CBFReader, f, selection, **reader_options) for f in files]
    return ChunkDatasource(openers, continue_keys=True, include_paths=include_paths, name="CBF")


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
    from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
    specs = _streams(streams)
    openers = [functools.partial(OFRecordDeserializer, d, specs, **reader_options) for d in _paths(dirs)]
    return ChunkDatasource(openers, include_paths=include_paths, name="OFRecord")


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
    from recordkit.formats.singa.deserializer import SingaCSVDeserializer, SingaRecordDeserializer
    if store in ("csv", "textfile"):
        if "count" not in reader_options:
            raise UsageError("read_singa(store='csv') needs count=N, the values per line")
        openers = [functools.partial(SingaCSVDeserializer, p, **reader_options) for p in _paths(paths)]
    else:
        openers = [functools.partial(SingaRecordDeserializer, p, store, **reader_options) for p in _paths(paths)]
    return ChunkDatasource(openers, include_paths=include_paths, name="Singa")


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
    from recordkit.errors import UsageError
    from recordkit.formats.detect import sniff
    kind = source_format or sniff(path, storage_options)
    storage = {k: v for k, v in (("storage_options", storage_options), ("cache_dir", cache_dir)) if v}
    allowed = ctf_options.pop("allow_empty_streams", None)
    if kind == "cbf":
        return cbf_datasource(path, streams, precision=precision, allow_empty_streams=allowed, **storage)
    if kind == "ofrecord":
        if streams is None:
            from recordkit.formats.ofrecord.dataset import read_streams
            streams = read_streams(path, storage_options=storage_options)
        if streams is None:
            raise UsageError(f"{path}: the OFRecord data set records no stream declarations: give --stream")
        return ofrecord_datasource(path, streams, precision=precision or "float", **storage)
    if kind == "singa":
        return singa_datasource(path, precision=precision or "float", storage_options=storage_options)
    if kind == "ctf":
        if not streams:
            raise UsageError(f"{path}: declare at least one --stream NAME=FORMAT:DIM[:ALIAS] for a CTF file")
        return ctf_datasource(path, streams, precision=precision or "float", allow_empty_streams=allowed,
                              **ctf_options, **storage)
    raise UsageError(f"--engine ray does not read {kind} input; convert it with the local engine")
