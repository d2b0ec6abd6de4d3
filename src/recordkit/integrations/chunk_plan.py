"""A data set's chunks as units of distributed work, with no framework imported.

Every recordkit format already cuts its files into chunks that load independently (CTF:
runs of whole sequences of about ``chunk_size`` bytes found by the index; CBF: the offset
table's chunks; OFRecord: runs of ``records_per_chunk`` records of one part; SINGA: runs of
``tuples_per_chunk`` tuples; the bridge formats: their row groups and shards). Those are the
natural units of a distributed read, so the Ray datasource (``integrations/ray``) and the
Spark data source (``integrations/spark``) both plan through ``ChunkPlan``: the driver opens
each input once to learn its streams and chunks, ``tasks(n)`` cuts the chunks into ``n`` runs
of consecutive chunks (one per chunk when ``n`` is at least their count), and each task opens
its inputs again itself from a picklable recipe (``read_task``), so nothing open crosses a
process boundary.
"""
from __future__ import annotations

import dataclasses
import functools
import os
from typing import Callable, Sequence

import numpy as np

from recordkit.engine.streams import StreamSpec
from recordkit.errors import UsageError
from recordkit.formats.file_openers import cbf_files, input_paths, stream_specs  # noqa: F401  (this module's names)

__all__ = ["ChunkPlan", "ReadTask", "read_task", "openers_for", "cbf_files", "stream_specs", "input_paths"]


@dataclasses.dataclass(frozen=True)
class _Input:
    """One input as the driver planned it: how to reopen it, its chunks, its key offset."""
    opener: Callable
    path: str
    files: tuple
    chunks: tuple
    key_base: int


@dataclasses.dataclass(frozen=True)
class ReadTask:
    """What one task reads: ``(opener, path, key base, chunk ids)`` per input, in order; the files
    it touches; its sequences and estimated in-memory bytes. Picklable."""
    plan: tuple
    files: tuple
    num_sequences: int
    size_bytes: int


class ChunkPlan:
    """The chunks of some inputs, planned for tasks.

    ``openers``: zero-argument picklable callables (e.g. ``functools.partial(CTFReader,
    path, streams)``), each returning a reader that follows the engine's ``Deserializer``
    protocol (``streams``, ``chunks``, ``load_chunk``) and has a ``path``. All inputs must
    declare the same streams. ``continue_keys``: number sequences on across inputs (for
    formats whose keys are ordinals, such as CBF, so a directory of parts keys its
    sequences as the single file would).
    """

    def __init__(self, openers: Sequence[Callable], *, continue_keys: bool = False):
        if not openers:
            raise UsageError("no input files given")
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

    @property
    def streams(self) -> list[StreamSpec]:
        return list(self._streams)

    @property
    def num_chunks(self) -> int:
        return len(self._units)

    @property
    def num_sequences(self) -> int:
        return sum(c.num_sequences for _, c in self._units)

    def estimate(self, info) -> int:
        """In-memory bytes of a chunk's rows: dense values exactly, sparse ones by the bytes on disk."""
        dense = sum(s.dim * (s.dtype.itemsize if s.dtype is not None else 4) for s in self._streams
                    if not s.is_sparse)
        return int(max(info.size, info.num_samples * dense) + 16 * info.num_sequences)

    def tasks(self, n: int) -> list[ReadTask]:
        """One task per chunk, or ``n`` tasks over runs of consecutive chunks if that is fewer."""
        units = self._units
        if not units:
            return []
        out = []
        for group in np.array_split(np.arange(len(units)), max(1, min(int(n), len(units)))):
            plan, last = [], None
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
            out.append(ReadTask(tuple((o, p, k, tuple(ids)) for o, p, k, ids in plan), tuple(files),
                                sum(c.num_sequences for c in infos), sum(self.estimate(c) for c in infos)))
        return out


def read_task(plan):
    """Run inside a task: open each input of a ``ReadTask.plan``, yield ``(path, streams, chunk)`` per
    chunk (keys moved by the input's key base; chunks whose sequences were all dropped under
    ``max_errors`` are skipped)."""
    for opener, path, key_base, chunk_ids in plan:
        with opener() as reader:
            streams = reader.streams
            for chunk_id in chunk_ids:
                chunk = reader.load_chunk(chunk_id)
                if len(chunk) == 0:
                    continue
                if key_base:
                    chunk = dataclasses.replace(chunk, keys=chunk.keys + np.uint64(key_base))
                yield path, streams, chunk


def _shape(streams) -> list:
    return [(s.name, s.format, s.dim) for s in streams]


def _describe(streams) -> str:
    return ", ".join(f"{s.name}={s.format}:{s.dim}" for s in streams)


def openers_for(path, *, source_format: str | None = None, streams=None, precision=None, storage_options=None,
                cache_dir=None, **options) -> tuple[str, list[Callable], bool]:
    """(format kind, openers, continue_keys) of the input ``path``, its format sniffed unless
    ``source_format`` says. A format whose registry entry has ``file_openers`` (CBF parts, OFRecord
    data sets, SINGA stores, CTF files) is planned file by file (``options``: its reader's, e.g.
    CTFReader's), its keys numbered on across files where the format keeps no keys of its own
    (CBF's ordinals); any other format the registry reads is one input read through its reader
    (its chunks: row groups, shards)."""
    from recordkit.formats import registry
    from recordkit.formats.detect import sniff
    kind = source_format or sniff(path, storage_options)
    fmt = registry.of_kind(kind)
    if fmt.file_openers is not None:
        return kind, fmt.openers(path, streams, precision=precision, storage_options=storage_options,
                                 cache_dir=cache_dir, **options), not fmt.keys
    fmt.require("reading")
    storage = {k: v for k, v in (("storage_options", storage_options), ("cache_dir", cache_dir)) if v}
    return kind, [functools.partial(fmt.open_reader, os.fspath(path), streams, precision=precision, **storage)], False
