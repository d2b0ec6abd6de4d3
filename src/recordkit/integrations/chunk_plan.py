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


def input_paths(paths) -> list[str]:
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    out = [os.fspath(p) for p in paths]
    if not out:
        raise UsageError("no input files given")
    return out


def stream_specs(streams) -> list[StreamSpec]:
    """StreamSpecs from specs or CLI-style strings ``NAME=FORMAT:DIM[:ALIAS]``."""
    return [StreamSpec.parse(s) if isinstance(s, str) else s for s in streams]




def cbf_files(path) -> list[str]:
    """A CBF file, or the numbered ``*.cbf`` parts of a directory in part order (``part-2`` before
    ``part-10``); any other directory is not one data set (``formats/directories.py``)."""
    from recordkit.formats.cbf.parts import cbf_part_paths
    path = os.fspath(path)
    return cbf_part_paths(path) if os.path.isdir(path) else [path]


def ctf_openers(paths, streams, **reader_options) -> list[Callable]:
    from recordkit.formats.ctf import CTFReader
    specs = stream_specs(streams)
    return [functools.partial(CTFReader, p, specs, **reader_options) for p in input_paths(paths)]


def cbf_openers(paths, streams=None, **reader_options) -> list[Callable]:
    from recordkit.formats.cbf import CBFReader
    files = [f for p in input_paths(paths) for f in cbf_files(p)]
    selection = streams if streams is None or isinstance(streams, dict) else stream_specs(streams)
    return [functools.partial(CBFReader, f, selection, **reader_options) for f in files]


def ofrecord_openers(dirs, streams, **reader_options) -> list[Callable]:
    from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
    specs = stream_specs(streams)
    return [functools.partial(OFRecordDeserializer, d, specs, **reader_options) for d in input_paths(dirs)]


def singa_openers(paths, store: str | None = None, **reader_options) -> list[Callable]:
    from recordkit.formats.singa.deserializer import SingaCSVDeserializer, SingaRecordDeserializer
    if store in ("csv", "textfile"):
        if "count" not in reader_options:
            raise UsageError("read_singa(store='csv') needs count=N, the values per line")
        return [functools.partial(SingaCSVDeserializer, p, **reader_options) for p in input_paths(paths)]
    return [functools.partial(SingaRecordDeserializer, p, store, **reader_options) for p in input_paths(paths)]


# the formats whose inputs are planned file by file (CBF parts, OFRecord data sets, SINGA stores, CTF),
# with the names their datasources go by
PER_FILE = {"cbf": "CBF", "ofrecord": "OFRecord", "singa": "Singa", "ctf": "CTF"}


def openers_for(path, *, source_format: str | None = None, streams=None, precision=None, storage_options=None,
                cache_dir=None, **ctf_options) -> tuple[str, list[Callable], bool]:
    """(format kind, openers, continue_keys) of the input ``path``, its format sniffed unless
    ``source_format`` says: CBF (``streams`` select), OFRecord (``streams`` or the data set's own
    declarations), SINGA record stores, CTF (``streams`` required; ``ctf_options`` are CTFReader's);
    any other format the registry reads is one input read through its reader (its chunks: row
    groups, shards)."""
    from recordkit.formats import registry
    from recordkit.formats.detect import sniff
    kind = source_format or sniff(path, storage_options)
    storage = {k: v for k, v in (("storage_options", storage_options), ("cache_dir", cache_dir)) if v}
    allowed = ctf_options.pop("allow_empty_streams", None)
    if kind == "cbf":
        return kind, cbf_openers(path, streams, precision=precision, allow_empty_streams=allowed, **storage), True
    if kind == "ofrecord":
        if streams is None:
            from recordkit.formats.ofrecord.dataset import read_streams
            streams = read_streams(path, storage_options=storage_options)
        if streams is None:
            raise UsageError(f"{path}: the OFRecord data set records no stream declarations: give --stream")
        return kind, ofrecord_openers(path, streams, precision=precision or "float", **storage), False
    if kind == "singa":
        return kind, singa_openers(path, precision=precision or "float", storage_options=storage_options), False
    if kind == "ctf":
        if not streams:
            from recordkit.formats.detect import streams_needed
            raise UsageError(streams_needed(path, registry.get(kind), storage_options))
        return kind, ctf_openers(path, streams, precision=precision or "float", allow_empty_streams=allowed,
                                 **ctf_options, **storage), False
    fmt = registry.get(kind)
    fmt.require("reading")
    options = dict(precision=precision, **storage)
    return kind, [functools.partial(fmt.open_reader, os.fspath(path), streams, **options)], False
